"""The one way to call another service of this deployment (a *peer*, gateway/contracts.py).

- Where a peer answers (gateway/peer_location.py): its `*_URL` variable (`[peers] <peer>_url`),
  else its port of the service table on 127.0.0.1. The services, the console and the plugin
  manager all find each other this way.
- How it is called (`PeerClient`): over the service's one client session, with the one service
  credential (SERVICE_TOKEN), within a `PeerTimeout`: a JSON call, a server-sent-event stream,
  a WebSocket connect, an answer left unread for a proxy to pass on (the console's).
- What a failure is (`PeerFailed`, the spec's error body): no usable answer (no address, not
  reachable, past the time limit, an error without the spec's body) and a refused credential
  are 502 `<peer>_unreachable`, the service's own configuration to fix; the peer's own error
  `{error, errorType, hint}` is passed on with its status.

Each feature's client is its contract's Protocol implemented over a `PeerClient`."""
from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import (Any, AsyncGenerator, AsyncIterator, Callable, Mapping, Protocol, TypedDict,
                    Unpack)

import aiohttp
import orjson
import yarl

from .config import Config
from .peer_location import PEER_SERVICES
from .errors import ApiError
from .sse import MAX_LINE, EventTooLarge, SseDecoder
from .text import loads_utf8_safe

# The statuses with which a peer refuses our credential (SERVICE_TOKEN).
CREDENTIAL_REFUSED = (401, 403)
# The 5xx statuses of a peer's error body passed on as they are (something behind it is down).
PASSED_OUTAGES = (502, 503)


class PeerContext(Protocol):
    """What a peer client reads of its service's context: where peers answer, the credential,
    the one client session, the configuration. The context (gateway/context.py) asks this module
    for the addresses, so the client names what it needs rather than the context's class."""

    @property
    def config(self) -> Config: ...

    @property
    def http(self) -> aiohttp.ClientSession: ...

    def peer_url(self, peer: str) -> str: ...

    def peer_headers(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class PeerTimeout:
    """How long a call to a peer may take, in seconds (None: no limit): `connect` to reach it,
    `read` between two reads of its answer, `total` for the whole call."""
    connect: float | None = 10.0
    read: float | None = None
    total: float | None = None

    def client_timeout(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=self.total, connect=self.connect, sock_read=self.read)

    @classmethod
    def from_config(cls, config: Config, *, read: float | None = None, total: float | None = None) -> "PeerTimeout":
        """The core's `[peers] connect_timeout` with a feature's own read or total limit."""
        return cls(connect=config.settings.peers.connect_timeout or None, read=read, total=total)


class ErrorOptions(TypedDict, total=False):
    """What a `PeerFailed` passes on to `ApiError` as it is."""

    headers: Mapping[str, str] | None
    extra: Mapping[str, Any] | None


class PeerFailed(ApiError):
    """A call to a peer that did not succeed, as the spec's error body: `status` is what an
    endpoint answers with, `peer_status` what the peer answered (None when it was not reached),
    `retry_after` its Retry-After. The one error of every client of another service; a
    feature's own error subclasses it."""
    status = 502
    error_type = "peer_failed"

    def __init__(self, error: str, error_type: str | None = None, hint: str | None = None,
                 status: int | None = None, *, peer_status: int | None = None, retry_after: str | None = None,
                 **options: Unpack[ErrorOptions]):
        if retry_after and "headers" not in options:
            options["headers"] = {"Retry-After": retry_after}
        super().__init__(error, error_type, hint, status, **options)
        self.peer_status = peer_status
        self.retry_after = retry_after


@dataclass
class PeerAnswer:
    status: int
    body: bytes
    headers: Mapping[str, str]

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "").partition(";")[0].strip()

    def decoded(self) -> Any:
        """The body as JSON; ValueError when it is not JSON."""
        return loads_utf8_safe(self.body)

    def json(self) -> dict | None:
        """The body as a JSON object; None when it is not one."""
        try:
            value = self.decoded()
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def encode_body(body: Any) -> bytes:
    """orjson writes a turn's history several times faster than json; it refuses a lone
    surrogate (a client may send one escaped in JSON), which json writes escaped."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()


class RequestOptions(TypedDict, total=False):
    """`PeerClient.request`'s keyword arguments, for the calls that pass them on."""

    params: Mapping[str, Any] | None
    json_body: Any
    data: Any
    headers: Mapping[str, str] | None
    timeout: PeerTimeout | None
    quoted: bool


class PeerClient:
    """Calls to one peer for one feature. `unreachable` and `refused` are the feature's error
    classes (a no usable answer, the peer's error answer); `error_prefix` names its errorTypes
    (`<prefix>_unreachable`, `<prefix>_failed`); `passed_refusals` are errorTypes of a 401/403
    that are the peer's answer about the request (an operation refused), not our credential."""

    def __init__(self, context: PeerContext, peer: str, *, timeout: PeerTimeout, service: str,
                 error_prefix: str | None = None, unreachable: type[PeerFailed] = PeerFailed,
                 refused: type[PeerFailed] | None = None, passed_refusals: tuple[str, ...] = ()):
        self.context, self.peer, self.timeout, self.service = context, peer, timeout, service
        self.error_prefix = error_prefix or peer
        self.unreachable_error, self.refused_error = unreachable, refused or unreachable
        self.passed_refusals = passed_refusals
        self._headers: dict[str, str] | None = None
        self._stream_targets: dict[tuple[str, str], tuple[yarl.URL, dict[str, str]]] = {}
        self._silence: PeerTimeout | None = None

    @property
    def variable(self) -> str:
        return PEER_SERVICES.get(self.peer, ("", f"[peers] {self.peer}_url"))[1]

    def base_url(self) -> str:
        """The peer's address; `unreachable` when none is configured."""
        url = self.context.peer_url(self.peer)
        if not url:
            raise self.unreachable(f"No address is configured for the {self.service}.",
                                   hint=f"Set {self.variable} ([peers] {self.peer}_url).")
        return url

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        if self._headers is None:  # built once: the configuration does not change while running
            self._headers = self.context.peer_headers()
        return {**self._headers, **extra} if extra else self._headers

    # ---------------------------------------------------------------- the failures

    def unreachable(self, reason: str, *, hint: str | None = None, peer_status: int | None = None) -> PeerFailed:
        if hint is None:
            where = self.context.peer_url(self.peer) or "(unset)"
            hint = (f"SERVICE_TOKEN must be the same for this service and the {self.service}."
                    if peer_status in CREDENTIAL_REFUSED else
                    f"Check that the {self.service} runs at {where} ({self.variable}).")
        return self.unreachable_error(reason, f"{self.error_prefix}_unreachable", hint, 502, peer_status=peer_status)

    def not_reached(self, error: BaseException) -> PeerFailed:
        detail = str(error)
        return self.unreachable(f"The {self.service} cannot be reached or did not answer in time "
                                f"({error.__class__.__name__}{': ' + detail if detail else ''}).")

    def refusal(self, answer: PeerAnswer) -> PeerFailed:
        """The peer's error answer, passed on as it said it; with its status, but for a 5xx
        other than 502/503 (the peer's own failure is not this service's 500): 502."""
        body = answer.json() or {}
        hint = body.get("hint")
        error_class = self.unreachable_error if answer.status >= 500 else self.refused_error
        status = answer.status if answer.status < 500 or answer.status in PASSED_OUTAGES else 502
        return error_class(str(body.get("error") or f"The {self.service} answered {answer.status}."),
                           str(body.get("errorType") or f"{self.error_prefix}_failed"),
                           hint if isinstance(hint, str) else None, status, peer_status=answer.status,
                           retry_after=answer.headers.get("Retry-After"))

    def check(self, answer: PeerAnswer) -> PeerAnswer:
        """`answer` unless it refuses our credential or is an error without the spec's body."""
        if answer.status < 400:
            return answer
        body = answer.json()
        if answer.status in CREDENTIAL_REFUSED and (body or {}).get("errorType") not in self.passed_refusals:
            said = (body or {}).get("error") or "?"
            raise self.unreachable(f"The {self.service} refused this service's credential ({answer.status}: {said}).",
                                   peer_status=answer.status)
        if not body or not body.get("error"):
            said = answer.body[:200].decode("utf-8", "replace").strip()
            raise self.unreachable(f"The {self.service} answered {answer.status} without an error body"
                                   f"{': ' + said if said else ''}.", peer_status=answer.status)
        return answer

    # ---------------------------------------------------------------- calls

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      json_body: Any = None, data: Any = None, headers: Mapping[str, str] | None = None,
                      timeout: PeerTimeout | None = None, quoted: bool = False) -> PeerAnswer:
        """The peer's answer to `method path`, any status but a refused credential; None values
        of `params` are left out. `quoted`: `path` is percent-encoded already and goes as it is
        (an id quoted whole, even `..`)."""
        query = {key: str(value) for key, value in (params or {}).items() if value is not None}
        if json_body is not None:
            data, headers = encode_body(json_body), {"Content-Type": "application/json", **(headers or {})}
        try:
            async with self.context.http.request(method, self._url(path, quoted), params=query, data=data,
                                                 headers=self.headers(headers),
                                                 timeout=(timeout or self.timeout).client_timeout()) as response:
                answer = PeerAnswer(response.status, await response.read(), response.headers.copy())
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:  # ValueError: a bad URL
            raise self.not_reached(error) from None
        return self.check(answer)

    def _url(self, path: str, quoted: bool) -> str | yarl.URL:
        return yarl.URL(self.base_url() + path, encoded=True) if quoted else self.base_url() + path

    async def open(self, method: str, path: str, *, data: Any = None, headers: Mapping[str, str] | None = None,
                   timeout: PeerTimeout | None = None, quoted: bool = False) -> aiohttp.ClientResponse:
        """The peer's answer unread, whatever its status, redirects not followed: for a proxy
        that passes it on as it comes (the caller releases it). Only no answer is raised."""
        try:
            return await self.context.http.request(method, self._url(path, quoted), data=data,
                                                   headers=self.headers(headers), allow_redirects=False,
                                                   timeout=(timeout or self.timeout).client_timeout())
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:  # ValueError: a bad URL
            raise self.not_reached(error) from None

    async def call(self, method: str, path: str, **options: Unpack[RequestOptions]) -> dict:
        """The JSON object of a 2xx answer; the peer's error answer raised as `refused`."""
        answer = await self.request(method, path, **options)
        if answer.status >= 400:
            raise self.refusal(answer)
        body = answer.json()
        if body is None:
            raise self.unreachable(f"The {self.service} answered {answer.status} without a JSON object.",
                                   peer_status=answer.status)
        return body

    @asynccontextmanager
    async def stream(self, method: str, path: str, *, json_body: Any = None, accept: str = "text/event-stream",
                     timeout: PeerTimeout | None = None) -> AsyncIterator[aiohttp.ClientResponse]:
        """A 200 answer to read as it comes (`timeout.read`, else `total`, bounds the wait for
        its start); any other answer raised as the peer said it."""
        limit = timeout or self.timeout
        try:
            url, headers = self._stream_target(path, accept)
            async with asyncio.timeout(limit.read or limit.total):
                response = await self.context.http.request(
                    method, url, data=None if json_body is None else encode_body(json_body), headers=headers,
                    timeout=aiohttp.ClientTimeout(total=None, connect=limit.connect))
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
            raise self.not_reached(error) from None
        async with response:
            if response.status != 200:
                answer = self.check(PeerAnswer(response.status, await response.read(), response.headers.copy()))
                raise self.refusal(answer)
            yield response

    def _silence_limit(self, silence: float) -> PeerTimeout:
        if self._silence is None or self._silence.read != silence:
            self._silence = PeerTimeout(self.timeout.connect, silence)
        return self._silence

    def _stream_target(self, path: str, accept: str) -> tuple[yarl.URL, dict[str, str]]:
        """The stream's URL, parsed once, and its headers, built once: a chat turn's request
        goes out a little sooner (the paths of streams are few and fixed)."""
        target = self._stream_targets.get((path, accept))
        if target is None:
            target = (yarl.URL(self.base_url() + path),
                      self.headers({"Content-Type": "application/json", "Accept": accept}))
            self._stream_targets[(path, accept)] = target
        return target

    async def events(self, path: str, body: Any, *, silence: float,
                     on_stop: Callable[[Callable[[], None]], None] | None = None) -> AsyncGenerator[dict, None]:
        """The JSON objects of a server-sent-event stream answering `POST path`. `silence`
        bounds each wait: for the answer's start, then between two reads of its body (a
        `SilenceWatch`: one timer for the stream, where aiohttp's read timeout moves a timer for
        every piece, dozens a second for a streamed reply). One generator, decoding inline:
        this runs for every piece of every reply. `on_stop` is given the stream's way to end from
        outside (a person stopped the reply): the waiting read returns, the stream ends with no more
        events, and its connection is closed, which the peer sees."""
        try:
            async with self.stream("POST", path, json_body=body, timeout=self._silence_limit(silence)) as response:
                loop = asyncio.get_running_loop()
                decoder = SseDecoder(errors="replace")
                content = response.content
                if on_stop is not None:
                    on_stop(lambda: content.set_exception(StreamStopped()))
                watch = SilenceWatch(loop, silence, content)
                try:
                    while True:
                        watch.waiting_since = loop.time()
                        try:
                            chunk = await content.readany()
                        except StreamStopped:
                            response.close()
                            return
                        watch.waiting_since = None
                        if not chunk:
                            break
                        for data in decoder.feed(chunk):
                            try:
                                event = loads_utf8_safe(data)
                            except ValueError:
                                raise self.unreachable_error(f"the {self.service} sent an unreadable event",
                                                             f"{self.error_prefix}_failed", status=502) from None
                            if isinstance(event, dict):
                                yield event
                finally:
                    watch.stop()
        except (aiohttp.ClientError, asyncio.TimeoutError, RuntimeError) as error:  # RuntimeError: aiohttp's
            # "Connection closed." when the peer closes the response while it is read
            raise self.not_reached(error) from None
        except EventTooLarge:  # one event larger than a reply may be (docs/chat.md, "Limits")
            raise self.unreachable_error(f"the {self.service} sent an event longer than {MAX_LINE} bytes",
                                         "reply_too_large", status=502) from None
        except ValueError as error:  # a stream that is not server-sent events of JSON
            raise self.unreachable_error(f"the {self.service} sent an unreadable stream: {error}",
                                         f"{self.error_prefix}_failed", status=502) from None

    async def connect(self, path: str, *, params: Mapping[str, str] | None = None,
                      **options: Any) -> aiohttp.ClientWebSocketResponse:
        """A WebSocket to the peer; a refused credential or a peer that cannot be reached is
        `unreachable`, any other refused handshake `refused` with its status."""
        options.setdefault("timeout", aiohttp.ClientWSTimeout(ws_receive=None, ws_close=self.timeout.connect))
        try:
            # Typed here: with `options` open, the session's overloads cannot tell the answer's.
            websocket: aiohttp.ClientWebSocketResponse = await self.context.http.ws_connect(
                self.base_url() + path, params=params, headers=self.headers(), **options)
            return websocket
        except aiohttp.WSServerHandshakeError as error:
            if error.status in CREDENTIAL_REFUSED or error.status >= 500:
                raise self.unreachable(f"The {self.service} refused the connection ({error.status}).",
                                       peer_status=error.status) from None
            raise self.refused_error(f"The {self.service} refused the connection ({error.status}).",
                                     f"{self.error_prefix}_refused", status=error.status,
                                     peer_status=error.status) from None
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
            raise self.not_reached(error) from None


class StreamStopped(Exception):
    """Set on a stream's reader by its stop: the read ends at once."""


class SilenceWatch:
    """Ends a stream's read once it has waited `limit` seconds for the next piece: the read
    raises aiohttp's `SocketTimeoutError`, as with aiohttp's own read timeout. The reader sets
    `waiting_since` (the loop's time) before each read and None after it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: float, content: aiohttp.StreamReader):
        self.loop, self.limit, self.content = loop, limit, content
        self.waiting_since: float | None = None
        self._timer = loop.call_later(limit, self._look)

    def _look(self) -> None:
        waited = self.loop.time() - self.waiting_since if self.waiting_since is not None else 0.0
        if waited >= self.limit:
            self.content.set_exception(aiohttp.SocketTimeoutError("Timeout on reading data from socket"))
            return
        self._timer = self.loop.call_later(self.limit - waited, self._look)

    def stop(self) -> None:
        self._timer.cancel()

