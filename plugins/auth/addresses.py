"""The client's address, for rate limiting (docs/auth.md, "Login limits").

In order: the address a peer service vouched for with the service credential (the frontend's
proxy, `gateway.forwarding`); else `X-Forwarded-For` when the direct peer is one of the
configured trusted proxies; else the direct peer. A caller that forges either header without
being what it claims is judged by its own address, so it cannot pick a fresh address per request."""
from __future__ import annotations

import ipaddress
import logging
import time

from aiohttp import web

from gateway.forwarding import (PROOF_LIFETIME_SECONDS, Network, forwarded_client, has_vouch, parse_address,
                                vouched_client)

log = logging.getLogger("plugins.auth")

# One client in IPv6 is a /64: whoever holds one can use any of its 2**64 addresses.
IPV6_CLIENT_PREFIX = 64
_WARNING_INTERVAL = 60.0
_last_warning = 0.0


def client_address(request: web.Request, trusted: list[Network], service_token: str) -> str:
    vouched = vouched_client(request.headers, service_token)
    if vouched is not None:
        return vouched
    if has_vouch(request.headers):
        _warn_refused_vouch(request)
    return forwarded_client(request, trusted)


def limit_key(address: str) -> str:
    """What one client's attempts are counted under: the address, an IPv6 one by its /64."""
    parsed = parse_address(address)
    if isinstance(parsed, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((parsed, IPV6_CLIENT_PREFIX), strict=False))
    return str(parsed) if parsed is not None else address


def _warn_refused_vouch(request: web.Request) -> None:
    """A forged header, or a frontend whose SERVICE_TOKEN (or clock) differs: said at most once
    a minute, since anyone can send such headers."""
    global _last_warning
    now = time.monotonic()
    if now - _last_warning >= _WARNING_INTERVAL:
        _last_warning = now
        log.warning("a client address vouched for by %s was refused (bad or stale proof): its own address "
                    "is used; a frontend must share this gateway's SERVICE_TOKEN and a clock within %ss",
                    request.remote, PROOF_LIFETIME_SECONDS)
