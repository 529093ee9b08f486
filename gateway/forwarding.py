"""Who the client is when a request came through a proxy.

Two ways to learn it, neither of which trusts a caller for where it connects from alone:

- `X-Forwarded-For`, read only when the direct peer is one of the configured trusted proxies
  (a reverse proxy such as nginx, which cannot sign anything);
- a service of this deployment that proxies for browsers (the frontend) *vouches* for its
  client: `X-Client-Address` with `X-Client-Address-Proof`, an HMAC of the address and the time
  under the service credential (`SERVICE_TOKEN`). Only a holder of the credential can make one,
  so the gateway believes it from any peer, and believes nothing merely because a caller is on
  loopback (where any program on the machine could claim any address).
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import time
from typing import Iterable, Mapping

from aiohttp import web

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

CLIENT_ADDRESS_HEADER = "X-Client-Address"
CLIENT_PROOF_HEADER = "X-Client-Address-Proof"
# How old (or, for clocks a little apart, how far ahead) a proof may be: a copied pair of headers
# is worth nothing after this.
PROOF_LIFETIME_SECONDS = 120
_PROOF_LABEL = b"client-address\n"  # so this HMAC can never stand for anything else signed with the token


def parse_trusted_proxies(entries: Iterable[str] | str | None, setting: str) -> list[Network]:
    """Addresses and CIDR ranges of a `trusted_proxies` setting; a bad entry raises ValueError
    naming `setting`."""
    if not entries:
        return []
    if isinstance(entries, str):
        entries = [part for part in entries.replace(",", " ").split() if part]
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(str(entry).strip(), strict=False))
        except ValueError:
            raise ValueError(f"{setting}: {entry!r} is not an address or CIDR range") from None
    return networks


def parse_address(address: str) -> Address | None:
    try:
        parsed = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped
    return parsed


def _is_trusted(address: Address | None, trusted: list[Network]) -> bool:
    return address is not None and any(address in network for network in trusted)


def forwarded_client(request: web.Request, trusted: list[Network]) -> str:
    """The direct peer, or, when that peer is a trusted proxy, the right-most address in
    X-Forwarded-For that is not itself a trusted proxy (the one the outermost trusted proxy saw)."""
    peer = request.remote or "unknown"
    if not trusted or not _is_trusted(parse_address(peer), trusted):
        return peer
    hops = [hop.strip() for header in request.headers.getall("X-Forwarded-For", [])
            for hop in header.split(",") if hop.strip()]
    for hop in reversed(hops):
        parsed = parse_address(hop)
        if not _is_trusted(parsed, trusted):
            return str(parsed) if parsed is not None else hop
    return str(parse_address(hops[0])) if hops else peer


def _signature(secret: str, address: str, issued: int) -> str:
    message = _PROOF_LABEL + f"{address}\n{issued}".encode("utf-8")
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def vouch_headers(address: str, secret: str, *, now: float | None = None) -> dict[str, str]:
    """The headers with which a service tells a peer who its client is; none without a secret
    or for something that is not an IP address."""
    parsed = parse_address(address)
    if not secret or parsed is None:
        return {}
    issued = int(time.time() if now is None else now)
    return {CLIENT_ADDRESS_HEADER: str(parsed),
            CLIENT_PROOF_HEADER: f"{issued}.{_signature(secret, str(parsed), issued)}"}


def vouched_client(headers: Mapping[str, str], secret: str, *, now: float | None = None) -> str | None:
    """The client address a peer holding `secret` vouched for; None when the headers are absent,
    or the proof is malformed, stale or not made with `secret` (then the caller is judged by
    its own address, as if it had sent nothing)."""
    address, proof = headers.get(CLIENT_ADDRESS_HEADER), headers.get(CLIENT_PROOF_HEADER)
    if not secret or not address or not proof:
        return None
    issued_text, _, signature = proof.strip().partition(".")
    parsed = parse_address(address)
    if parsed is None or not issued_text.isdigit() or len(issued_text) > 12:
        return None
    issued = int(issued_text)
    if abs((time.time() if now is None else now) - issued) > PROOF_LIFETIME_SECONDS:
        return None
    expected = _signature(secret, address.strip(), issued)
    if not hmac.compare_digest(signature.encode("ascii", "replace"), expected.encode("ascii")):
        return None
    return str(parsed)


def has_vouch(headers: Mapping[str, str]) -> bool:
    return CLIENT_ADDRESS_HEADER in headers or CLIENT_PROOF_HEADER in headers
