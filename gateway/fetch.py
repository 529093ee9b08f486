"""The guarded fetcher: every outbound fetch of an address that a caller or an administrator
supplied goes through it, under the egress policy (fetch_policy.py). Two ways to use it:
`GuardedFetcher` for one bounded request, `guarded_session` for a long-lived client session (the
model providers' streaming calls); both connect through the same guarded connector.

What it guarantees, hop by hop:

- only `http` and `https`;
- every address the host name resolves to is checked, and the connection goes to exactly the
  addresses that were checked (the check runs inside the connector's resolver, so a second DNS
  answer cannot slip a different address in between);
- the addresses the policy refuses are refused (link-local and cloud metadata always; loopback
  and private ranges unless the operator allowed them, see fetch_policy.py);
- redirects are followed by hand, each new address checked again; when a redirect leaves the
  original origin (scheme, host or port) only the headers of `CROSS_ORIGIN_HEADERS` go on, so a
  credential the caller set (`Authorization`, `Cookie`, an `X-Api-Key`, a signature) is never
  sent to another origin;
- a URL that cannot be parsed (`http://[::1/`), given or redirected to, is refused like any other;
- the whole exchange is bounded in time and the body in bytes.

    fetcher = GuardedFetcher.from_config(context.config)
    result = await fetcher.fetch(url, headers={"Accept": "application/json"})
    data = result.json()
"""
from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, TypedDict, Unpack
from urllib.parse import SplitResult, urljoin, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from multidict import CIMultiDict, CIMultiDictProxy

from .config import Config
from .contracts import ContractKey, Contracts
from .fetch_policy import FetchPolicy, literal_address
from .text import loads_utf8_safe

DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_REDIRECTS = 5
# A plugin may provide an aiohttp `AbstractResolver` under this contract; guarded fetches
# then resolve through it (the policy still checks every address it answers).
RESOLVER: ContractKey[AbstractResolver] = ContractKey("core.fetch_resolver", "name resolution for guarded fetches")
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# The caller's headers that follow a redirect to another origin: none of them can carry a
# credential. Every other header (Authorization, Cookie, Proxy-Authorization, X-Api-Key, a
# webhook's signature...) stays with the origin the caller meant it for.
CROSS_ORIGIN_HEADERS = frozenset({"accept", "accept-encoding", "accept-language", "content-language",
                                  "content-type", "user-agent"})


class FetchError(Exception):
    """The URL could not be fetched; the message says why in words an operator can act on."""

    kind = "failed"


class FetchRefused(FetchError):
    """The URL or an address it leads to is not allowed by the fetch policy."""

    kind = "refused"


class FetchTimeout(FetchError):
    kind = "timeout"


class FetchTooLarge(FetchError):
    kind = "too_large"


class GuardedResolver(AbstractResolver):
    """Resolves through `inner` and refuses the whole answer when any address is not allowed,
    so the connector connects only to addresses that passed the policy."""

    def __init__(self, policy: FetchPolicy, inner: AbstractResolver):
        self.policy = policy
        self.inner = inner

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        try:
            results = await self.inner.resolve(host, port, family)
        except OSError as error:
            raise FetchError(f"cannot resolve {host}: {error}") from None
        if not results:
            raise FetchError(f"{host} has no address")
        for result in results:
            address = literal_address(result["host"])
            if address is None:
                raise FetchRefused(f"{host} resolved to {result['host']!r}, which is not an IP address")
            reason = self.policy.refusal(host, address, port or None)
            if reason:
                raise FetchRefused(reason)
        return results

    async def close(self) -> None:
        await self.inner.close()


def _refuse_literal_address(policy: FetchPolicy, scheme: str, host: str | None, port: int | None) -> None:
    """The check the resolver cannot make: aiohttp never resolves a literal address."""
    if scheme not in ("http", "https"):
        raise FetchRefused(f"only http and https URLs are fetched, not {scheme or 'a relative URL'!r}")
    if not host:
        raise FetchRefused("the URL has no host")
    address = literal_address(host)
    if address is not None:
        reason = policy.refusal(host, address, port)
        if reason:
            raise FetchRefused(reason)


MAX_REMEMBERED_ORIGINS = 1024


def guarded_session(policy: FetchPolicy, *, resolver: AbstractResolver | None = None,
                    limit: int = 100, timeout: aiohttp.ClientTimeout | None = None,
                    use_dns_cache: bool = True, force_close: bool = False) -> aiohttp.ClientSession:
    """A client session that connects only where `policy` allows, at connect time: host names in
    the connector's resolver (the connection goes to exactly the addresses checked), literal
    addresses by a middleware that runs for every request and every redirect hop. Environment
    proxies are ignored (`trust_env=False`): a proxy would be reached instead of the checked host.

    Refusals raise `FetchRefused` (directly, or as the `__cause__` of an `aiohttp.ClientError`;
    `refusal_of` finds it)."""
    connector = aiohttp.TCPConnector(resolver=GuardedResolver(policy, resolver or DefaultResolver()),
                                     limit=limit, use_dns_cache=use_dns_cache, force_close=force_close)

    # (scheme, host, port) found allowed: a session's policy never changes, and parsing the
    # address again cost a model call of the OpenAI door a good part of its added time (issue 44).
    allowed: set[tuple[str, str | None, int | None]] = set()

    async def check_address(request: aiohttp.ClientRequest,
                            handler: aiohttp.ClientHandlerType) -> aiohttp.ClientResponse:
        url = request.url
        key = (url.scheme, url.host, url.port)
        if key not in allowed:
            _refuse_literal_address(policy, *key)
            if len(allowed) < MAX_REMEMBERED_ORIGINS:
                allowed.add(key)
        return await handler(request)

    return aiohttp.ClientSession(connector=connector, trust_env=False, middlewares=(check_address,),
                                 timeout=timeout or aiohttp.ClientTimeout(total=None))


def refusal_of(error: BaseException) -> FetchError | None:
    """The policy's (or the resolver's) error behind an exception of a guarded session."""
    if isinstance(error, FetchError):
        return error
    cause = error.__cause__
    return cause if isinstance(cause, FetchError) else None


@dataclass
class FetchResult:
    url: str                    # the final URL, after redirects
    status: int
    headers: CIMultiDictProxy[str]
    body: bytes
    redirects: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        try:
            return loads_utf8_safe(self.body)  # an upstream's deep or huge JSON is refused like bad JSON
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise FetchError(f"{self.url} did not answer JSON: {error}") from None


def _split(url: str) -> SplitResult:
    """`urlsplit`, with its ValueError (an unclosed `[` of an IPv6 host) a refusal."""
    try:
        return urlsplit(url)
    except ValueError as error:
        raise FetchRefused(f"the URL is malformed: {error}") from None


def _origin(url: str) -> tuple[str, str, int | None]:
    """Of a URL `check_url` accepted."""
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or (443 if parts.scheme == "https" else 80)


def _redirect_target(url: str, location: str) -> str:
    try:
        return urljoin(url, location)
    except ValueError as error:
        raise FetchRefused(f"the redirect's Location is malformed: {error}") from None


class FetcherOptions(TypedDict, total=False):
    """What a caller of `from_config` or `for_context` may set over the `[fetch]` section."""

    timeout: float
    max_bytes: int
    max_redirects: int
    resolver: AbstractResolver | None


class FetchContext(Protocol):
    """What `for_context` reads of a service's context. The context (gateway/context.py) reaches
    this module through the embedder, so the fetcher names what it needs rather than its class."""

    @property
    def config(self) -> Config: ...

    @property
    def contracts(self) -> Contracts: ...


class GuardedFetcher:
    """Fetches caller-supplied URLs under a `FetchPolicy`. Cheap to create; every fetch opens
    its own short-lived connection pool, so nothing is shared with the service's own client
    session (whose connections to peers are trusted) and nothing needs closing.

    `resolver` replaces the system resolver underneath the guard; tests use it to make a host
    name resolve to an address of their choosing."""

    def __init__(self, policy: FetchPolicy | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 max_bytes: int = DEFAULT_MAX_BYTES, max_redirects: int = DEFAULT_MAX_REDIRECTS,
                 resolver: AbstractResolver | None = None):
        self.policy = policy or FetchPolicy()
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.resolver = resolver

    @classmethod
    def from_config(cls, config: Config, policy: FetchPolicy | None = None,
                    **overrides: Unpack[FetcherOptions]) -> "GuardedFetcher":
        """Limits from the `[fetch]` section (timeout, max_bytes, max_redirects); the policy from
        it too (allow_private, allow_hosts) unless a purpose's own `policy` is given."""
        settings = config.settings.fetch
        options: dict[str, Any] = {"timeout": settings.timeout, "max_bytes": settings.max_bytes,
                                   "max_redirects": settings.max_redirects}
        options.update(overrides)
        return cls(policy or FetchPolicy.from_config(config), **options)

    @classmethod
    def for_context(cls, context: FetchContext, *, policy: FetchPolicy | None = None,
                    **overrides: Unpack[FetcherOptions]) -> "GuardedFetcher":
        """`from_config` with the resolver a plugin provides as the `RESOLVER` contract, if any
        (split-horizon DNS in production; a fixed table in tests)."""
        resolver = context.contracts.get(RESOLVER)
        if resolver is not None:
            overrides.setdefault("resolver", resolver)
        return cls.from_config(context.config, policy, **overrides)

    def check_url(self, url: str) -> None:
        """Refuse a URL before any network use: its scheme, and its host when that is an address."""
        parts = _split(url)
        if parts.scheme not in ("http", "https"):
            raise FetchRefused(f"only http and https URLs are fetched, not {parts.scheme or 'a relative URL'!r}")
        try:
            host = parts.hostname
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError as error:
            raise FetchRefused(f"the URL is malformed: {error}") from None
        if not host:
            raise FetchRefused("the URL has no host")
        if parts.username or parts.password:
            raise FetchRefused("URLs with credentials in them are not fetched")
        # Before any network use, for a clear refusal; the session checks it again at connect time.
        _refuse_literal_address(self.policy, parts.scheme, host,
                                parts.port or (443 if parts.scheme == "https" else 80))

    async def fetch(self, url: str, *, method: str = "GET", headers: Mapping[str, str] | None = None,
                    json_body: Any = None, data: bytes | None = None, timeout: float | None = None,
                    max_bytes: int | None = None) -> FetchResult:
        """The final response of `url` after checked redirects. Any HTTP status is a result;
        a refused address, a timeout, a body above the limit or a network failure raise.
        `data`: a body sent byte for byte (one the caller signed), instead of `json_body`."""
        timeout = self.timeout if timeout is None else timeout
        max_bytes = self.max_bytes if max_bytes is None else max_bytes
        self.check_url(url)
        redirects: list[str] = []
        request_headers = CIMultiDict(headers or {})
        first_origin = _origin(url)
        try:
            async with asyncio.timeout(timeout):
                async with guarded_session(self.policy, resolver=self.resolver,
                                           use_dns_cache=False, force_close=True) as session:
                    while True:
                        self.check_url(url)
                        async with session.request(method, url, headers=request_headers, json=json_body,
                                                   data=data, allow_redirects=False) as response:
                            location = response.headers.get("Location")
                            if response.status in REDIRECT_STATUSES and location:
                                if len(redirects) >= self.max_redirects:
                                    raise FetchError(f"more than {self.max_redirects} redirects")
                                url = _redirect_target(url, location)
                                self.check_url(url)  # before anything parses it: a malformed target is refused
                                redirects.append(url)
                                if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                                    method, json_body, data = "GET", None, None
                                    request_headers.popall("Content-Type", None)
                                if _origin(url) != first_origin:
                                    request_headers = CIMultiDict(
                                        (name, value) for name, value in request_headers.items()
                                        if name.lower() in CROSS_ORIGIN_HEADERS)
                                continue
                            body = await _read_bounded(response, max_bytes)
                            return FetchResult(str(response.url), response.status, response.headers, body,
                                               redirects)
        except FetchError:
            raise
        except TimeoutError:
            raise FetchTimeout(f"no complete answer within {timeout:g}s") from None
        except aiohttp.ClientError as error:
            cause = refusal_of(error)
            if cause is not None:
                raise cause from None
            raise FetchError(f"cannot reach {urlsplit(url).netloc}: {error}") from None


async def _read_bounded(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    declared = response.content_length
    if declared is not None and declared > max_bytes:
        raise FetchTooLarge(f"the answer is {declared} bytes, above the limit of {max_bytes}")
    body = bytearray()
    async for block in response.content.iter_chunked(65536):
        body += block
        if len(body) > max_bytes:
            raise FetchTooLarge(f"the answer is larger than the limit of {max_bytes} bytes")
    return bytes(body)
