"""The one egress policy for addresses that a caller or an administrator supplied (a model
provider's `base_url`, an image link, a webhook target...). Without it such an address is a way
into the host's network: the cloud metadata service, the database port, an admin page on
loopback. The guarded fetcher and session (fetch.py) enforce it at connect time, hop by hop.

Link-local (169.254.0.0/16, fe80::/10), cloud metadata, multicast, unspecified and reserved
addresses are refused always; loopback and private ranges only when the operator allowed them
(`[fetch] allow_private = true`, or per host, `host:port`, or network in `[fetch] allow_hosts`;
for the model providers only in `[fetch] model_hosts`; for one plugin's purpose only in a list
of its own settings, e.g. `[plugins.notifications] push_hosts`)."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import urlsplit

from .config import Config

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Instance metadata services that do not sit in 169.254.0.0/16 (which is refused as a whole).
METADATA_ADDRESSES: frozenset[IpAddress] = frozenset(ipaddress.ip_address(a) for a in (
    "fd00:ec2::254",     # AWS, IPv6
    "100.100.100.200",   # Alibaba Cloud
    "192.0.0.192",       # Oracle Cloud
))
# Addresses that carry an IPv4 address inside an IPv6 one; the inner address is what is reached.
NAT64_NETWORK = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class FetchPolicy:
    """Which addresses outside the public internet may be reached."""

    allow_private: bool = False
    allow_hosts: frozenset[str] = frozenset()        # lower-case host names
    allow_networks: tuple[IpNetwork, ...] = ()
    allow_endpoints: frozenset[tuple[str, int]] = frozenset()  # (lower-case host name or address, port)
    # The settings that would allow a refused address, named in the refusal.
    remedy: str = "[fetch] allow_private = true or by listing it in [fetch] allow_hosts"

    @classmethod
    def from_config(cls, config: Config, *, purpose: str = "", also_allow: Iterable[str] = (),
                    hosts: Iterable[str] = (), hosts_setting: str = "") -> "FetchPolicy":
        """The `[fetch]` policy. With a `purpose` of the core's (`model`), the entries of `[fetch]
        <purpose>_hosts` are allowed too, for that purpose only; a plugin's own purpose brings its
        list, `hosts`, from its settings, named in a refusal as `hosts_setting` (e.g.
        "[plugins.notifications] push_hosts"). `also_allow` adds entries the caller derived from
        the operator's own configuration (the endpoint of a provider the operator named)."""
        settings = config.settings.fetch
        entries = [*settings.allow_hosts, *hosts]
        remedy = cls.remedy
        if purpose:
            entries += settings.hosts_for(purpose)
            hosts_setting = hosts_setting or f"[fetch] {purpose}_hosts"
        if hosts_setting:
            remedy = (f"[fetch] allow_private = true or by listing it in {hosts_setting} "
                      f"or [fetch] allow_hosts")
        return cls.build(settings.allow_private, [*entries, *also_allow], remedy=remedy)

    @classmethod
    def build(cls, allow_private: bool = False, allow_hosts: Iterable[str] = (), *,
              remedy: str | None = None) -> "FetchPolicy":
        """`allow_hosts` mixes host names (`llm.lan`), addresses (`10.0.0.5`), networks
        (`192.168.1.0/24`) and single endpoints (`127.0.0.1:11434`, `llm.lan:8000`,
        `[::1]:8000`); a bad entry is a configuration error, raised as ValueError."""
        names, networks, endpoints = set(), [], set()
        for entry in _entries(allow_hosts, "fetch.allow_hosts"):
            entry = entry.lower()
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            host, separator, port = entry.rpartition(":")
            if separator and port.isdigit() and 0 < int(port) < 65536 and host \
                    and (host.startswith("[") == host.endswith("]")) and ("[" in host or ":" not in host):
                endpoints.add((_host_key(host.strip("[]")), int(port)))
            elif "/" in entry or ":" in entry or "[" in entry:
                raise ValueError(f"[fetch] allow_hosts / <purpose>_hosts: {entry!r} is neither a host name, "
                                 f"an endpoint (host:port) nor a network")
            else:
                names.add(_host_key(entry))
        return cls(allow_private, frozenset(names), tuple(networks), frozenset(endpoints),
                   remedy or cls.remedy)

    def refusal(self, host: str, address: IpAddress, port: int | None = None) -> str | None:
        """Why `host` may not be reached at `address` (on `port`), or None when it may."""
        inner = _embedded_ipv4(address)
        if inner is not None:
            address = inner
        if address.is_link_local or address in METADATA_ADDRESSES:
            return f"{host} resolves to {address}, a link-local or cloud metadata address, which is never fetched"
        if address.is_multicast or address.is_unspecified:
            return f"{host} resolves to {address}, which is not a unicast address"
        if not (address.is_loopback or address.is_private):
            if address.is_reserved:
                return f"{host} resolves to {address}, which is not a unicast address"
            if address.is_global:
                return None
        if self.allow_private or _host_key(host) in self.allow_hosts:
            return None
        if any(address.version == network.version and address in network for network in self.allow_networks):
            return None
        if port is not None and ((_host_key(host), port) in self.allow_endpoints
                                 or (str(address), port) in self.allow_endpoints):
            return None
        where = f"{host}:{port}" if port is not None else host
        return (f"{where} resolves to {address}, a loopback or private address; the operator can allow it "
                f"with {self.remedy}")


def _entries(value: Any, setting: str) -> list[str]:
    """A list setting given as a TOML list, or as one string separated by commas or spaces."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in value.replace(",", " ").split() if part]
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise ValueError(f"{setting} must be a list of hosts, endpoints or networks")
    return [str(entry).strip() for entry in value if str(entry).strip()]


def _host_key(host: str) -> str:
    """A host as policies compare it: a name lower-cased without its final dot, an address in
    its canonical form (so `[0::1]` and `::1` are one endpoint)."""
    address = literal_address(host)
    return str(address) if address is not None else host.lower().rstrip(".")


def endpoint_entry(url: str) -> str | None:
    """The `host:port` allow-list entry of an http(s) URL (None when it has no host), for an
    address the operator configured themself."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not host:
        return None
    port = port or (443 if parts.scheme == "https" else 80)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _embedded_ipv4(address: IpAddress) -> ipaddress.IPv4Address | None:
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in NAT64_NETWORK:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def literal_address(host: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None

