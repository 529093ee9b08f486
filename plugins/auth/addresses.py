"""The client's address, for rate limiting. `X-Forwarded-For` is believed only when the
direct peer is one of the configured trusted proxies; otherwise anyone could pick a fresh
address per request and never be limited."""
from __future__ import annotations

import ipaddress
from typing import Iterable

from aiohttp import web

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_trusted_proxies(entries: Iterable[str] | str | None) -> list[Network]:
    """Addresses and CIDR ranges from `plugins.auth.trusted_proxies`; a bad entry stops start-up."""
    if not entries:
        return []
    if isinstance(entries, str):
        entries = [part for part in entries.replace(",", " ").split() if part]
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(str(entry).strip(), strict=False))
        except ValueError:
            raise ValueError(f"plugins.auth.trusted_proxies: {entry!r} is not an address or CIDR range") from None
    return networks


def _parse(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        parsed = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped
    return parsed


def _is_trusted(address, trusted: list[Network]) -> bool:
    return address is not None and any(address in network for network in trusted)


def client_address(request: web.Request, trusted: list[Network]) -> str:
    """The direct peer, or, when that peer is a trusted proxy, the right-most address in
    X-Forwarded-For that is not itself a trusted proxy (the one the outermost trusted proxy saw)."""
    peer = request.remote or "unknown"
    if not trusted or not _is_trusted(_parse(peer), trusted):
        return peer
    hops = [hop.strip() for header in request.headers.getall("X-Forwarded-For", [])
            for hop in header.split(",") if hop.strip()]
    for hop in reversed(hops):
        parsed = _parse(hop)
        if not _is_trusted(parsed, trusted):
            return str(parsed) if parsed is not None else hop
    return str(_parse(hops[0])) if hops else peer
