"""The gateway as the AI core's peer. Tools that need what the gateway keeps (a person's stored
messages today; devices, reminders and knowledge next) ask the gateway's own HTTP API with the
service credential, the one path for all of them.

The gateway takes the service credential for an administrator identity of kind "service", which
names the person it acts for with the query parameter `user_id` — where every endpoint of the
gateway reads whom the administrator acts for, whatever the method and whether the body is JSON,
a form or absent; a tool acts only for the person of its turn (`ToolCallContext.ask_gateway`)."""
from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from gateway.text import loads_utf8_safe

from .contract import GatewayFailed

CONNECT_TIMEOUT = 10.0


class GatewayPeer:
    def __init__(self, context, read_timeout: float):
        self.context = context
        self.timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT, sock_read=read_timeout)

    async def request(self, method: str, path: str, *, acting_for: str, params: dict | None = None,
                      body: dict | None = None) -> Any:
        """The gateway's decoded JSON answer to `method path`, asked on behalf of `acting_for`."""
        params = {**(params or {}), "user_id": acting_for}
        url = self.context.peer_url("gateway") + path
        try:
            async with self.context.http.request(method, url, params=params, json=body,
                                                 headers=self.context.peer_headers(),
                                                 timeout=self.timeout) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            raise GatewayFailed(f"the gateway cannot be reached ({error.__class__.__name__})") from None
        try:
            answer = loads_utf8_safe(raw)
        except ValueError:
            answer = None
        if status >= 400:
            message = answer.get("error") if isinstance(answer, dict) else None
            error_type = answer.get("errorType") if isinstance(answer, dict) else None
            raise GatewayFailed(f"the gateway answered {status}: {message or 'no message'}", status,
                                error_type if isinstance(error_type, str) else None)
        if answer is None:
            raise GatewayFailed("the gateway answered something other than JSON")
        return answer
