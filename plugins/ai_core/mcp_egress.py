"""The egress policy for MCP servers reached over HTTP: the SDK's transport talks through an
httpx2 client, so the check of gateway/fetch.py (`FetchPolicy.refusal`) runs in that client's
transport, before every request (the first, each redirect the SDK follows within the origin,
each reconnection): http(s) only, every address the host resolves to allowed by `[fetch]`
plus `[plugins.ai_core] mcp_hosts`. Environment proxies are ignored, so none can carry a request past it."""
from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from typing import Any, AsyncIterator

from gateway.config import Config
from gateway.fetch import FetchRefused
from gateway.fetch_policy import FetchPolicy

def mcp_policy(config: Config, mcp_hosts: list[str]) -> FetchPolicy:
    """`[fetch]` plus `[plugins.ai_core] mcp_hosts`: where the administrator's MCP servers may answer."""
    return FetchPolicy.from_config(config, hosts=mcp_hosts, hosts_setting="[plugins.ai_core] mcp_hosts")


async def check_address(policy: FetchPolicy, scheme: str, host: str, port: int | None) -> None:
    """FetchRefused unless every address of `host` may be reached (the resolution runs in the
    loop's resolver, off the event loop)."""
    if scheme not in ("http", "https"):
        raise FetchRefused(f"only http and https MCP servers are reached, not {scheme!r}")
    if not host:
        raise FetchRefused("the URL has no host")
    try:
        addresses = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        try:
            answers = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as error:
            raise FetchRefused(f"cannot resolve {host}: {error}") from None
        addresses = [ipaddress.ip_address(str(answer[4][0]).split("%")[0]) for answer in answers]
    for address in addresses:
        reason = policy.refusal(host, address, port)
        if reason:
            raise FetchRefused(reason)


def _transport_class() -> Any:
    import httpx2

    class GuardedTransport(httpx2.AsyncHTTPTransport):
        def __init__(self, policy: FetchPolicy):
            super().__init__(trust_env=False)
            self.policy = policy

        async def handle_async_request(self, request: "httpx2.Request") -> "httpx2.Response":
            url = request.url
            port = url.port or (443 if url.scheme == "https" else 80)
            try:
                await check_address(self.policy, url.scheme, url.host, port)
            except FetchRefused as refusal:
                raise httpx2.ConnectError(f"refused by the egress policy: {refusal}", request=request) from None
            return await super().handle_async_request(request)

    return GuardedTransport


@contextlib.asynccontextmanager
async def guarded_http_client(policy: FetchPolicy, headers: dict[str, str], timeout: float) -> AsyncIterator[Any]:
    """An httpx2 client for one MCP server: its headers, the policy's check, the SDK's timeouts
    for a stream's silence (five minutes) and `timeout` for everything else."""
    import httpx2

    client = httpx2.AsyncClient(headers=headers, transport=_transport_class()(policy), trust_env=False,
                                timeout=httpx2.Timeout(timeout, read=300.0))
    async with client:
        yield client
