"""The frontend service's doorway to the gateway: `/api/v1/*` and `/ws/chat` passed through on
the frontend's own origin, so the browser talks to one origin only (CSP `connect-src 'self'`)
and the gateway's Origin checks stay as strict as they are (the proxy refuses cross-site
requests itself and calls the gateway as a non-browser client).

The refresh token never reaches the page's JavaScript: the answers of login, register, refresh,
accepting an invitation and changing the password have it taken out of the body and put into an
HttpOnly, SameSite=Strict cookie scoped to `/api/v1/auth/`; refresh and logout get it put back
into their bodies (docs/web-client.md)."""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import AsyncIterator

import aiohttp
from aiohttp import web

from gateway.errors import ApiError, BadGateway, Forbidden
from gateway.forwarding import Network, forwarded_client, vouch_headers

REFRESH_COOKIE = "assistant_refresh"
COOKIE_PATH = "/api/v1/auth/"
COOKIE_MAX_AGE = 30 * 24 * 3600
# Answers carrying a new refresh token: accepting an invitation and changing the password sign in too.
TOKEN_ENDPOINTS = {"auth/login", "auth/register", "auth/refresh", "auth/invitation", "auth/password"}
# A second refresh presenting the same (just spent) token within this many seconds gets the
# first one's answer instead of tripping the gateway's reuse detection: two tabs of one browser
# share the cookie and may both renew at the same moment.
REFRESH_GRACE = 20.0
# Either end of the proxied chat socket: the browser's, or the gateway's.
WebSocket = web.WebSocketResponse | aiohttp.ClientWebSocketResponse

# Request headers a browser's call may carry on to the gateway; everything else (cookies, Origin,
# hop-by-hop headers) stays here.
FORWARDED_REQUEST_HEADERS = ("Authorization", "Content-Type", "Accept", "Accept-Language", "Range",
                             "If-None-Match", "If-Modified-Since", "If-Range", "User-Agent", "X-Request-Id")
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade", "set-cookie", "server", "date"}


@dataclass
class ProxyState:
    gateway_url: str
    max_body_bytes: int
    read_timeout: float
    max_frame_bytes: int
    service_token: str = ""
    trusted_proxies: list[Network] = field(default_factory=list)
    http: aiohttp.ClientSession | None = None
    refreshes: dict[str, tuple[float, asyncio.Future]] = field(default_factory=dict)


def own_origin(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def refuse_cross_site(request: web.Request) -> None:
    """The same rule as the console's: a browser's unsafe request or upgrade must come from this
    origin. Requests with neither header (curl, scripts) pass, as they do at the gateway."""
    if request.headers.get("Sec-Fetch-Site", "") in ("cross-site", "same-site"):
        raise Forbidden("Cross-site requests are refused", "cross_site_request",
                        "Open the web client itself at this address")
    origin = request.headers.get("Origin")
    if origin is not None and origin != own_origin(request):
        raise Forbidden("Cross-site requests are refused", "cross_site_request",
                        "Open the web client itself at this address")


def forwarded_headers(state: ProxyState, request: web.Request) -> dict[str, str]:
    """What the gateway gets besides the browser's allowed headers: who the client is, vouched
    for with the service credential (the gateway's login limits count per client, and believe
    no address merely because this proxy calls from loopback), and the usual X-Forwarded-*."""
    headers = {name: request.headers[name] for name in FORWARDED_REQUEST_HEADERS if name in request.headers}
    peer = request.remote or ""
    previous = request.headers.get("X-Forwarded-For")
    headers["X-Forwarded-For"] = f"{previous}, {peer}" if previous else peer
    headers["X-Forwarded-Proto"] = request.scheme
    headers["X-Forwarded-Host"] = request.host
    headers.update(vouch_headers(forwarded_client(request, state.trusted_proxies), state.service_token))
    return headers


async def bounded_body(request: web.Request, limit: int) -> AsyncIterator[bytes]:
    received = 0
    async for chunk in request.content.iter_chunked(256 * 1024):
        received += len(chunk)
        if received > limit:
            raise ApiError(f"The request body is larger than {limit} bytes", "request_too_large",
                           "Send a smaller file", status=413)
        yield chunk


def _unreachable(error: BaseException) -> BadGateway:
    return BadGateway("The gateway cannot be reached", "gateway_unreachable",
                      f"Is the gateway service running? ({type(error).__name__})")


def _cookie_secure(request: web.Request) -> bool:
    return request.scheme == "https" or request.headers.get("X-Forwarded-Proto") == "https"


def set_refresh_cookie(response: web.StreamResponse, request: web.Request, token: str | None) -> None:
    if token:
        response.set_cookie(REFRESH_COOKIE, token, max_age=COOKIE_MAX_AGE, path=COOKIE_PATH, httponly=True,
                            samesite="Strict", secure=_cookie_secure(request))
    else:
        response.del_cookie(REFRESH_COOKIE, path=COOKIE_PATH, samesite="Strict",
                            secure=_cookie_secure(request))


async def _call_gateway(state: ProxyState, request: web.Request, tail: str,
                        body: bytes | None) -> tuple[int, dict[str, str], bytes]:
    assert state.http is not None
    url = f"{state.gateway_url}/api/v1/{tail}"
    try:
        async with state.http.request(request.method, url, params=request.rel_url.query,
                                      headers=forwarded_headers(state, request), data=body,
                                      allow_redirects=False) as answer:
            content = await answer.read()
            headers = {name: value for name, value in answer.headers.items()
                       if name.lower() not in HOP_BY_HOP and name.lower() != "content-length"}
            return answer.status, headers, content
    except (aiohttp.ClientError, asyncio.TimeoutError) as error:
        raise _unreachable(error) from error


async def token_call(state: ProxyState, request: web.Request, tail: str) -> web.Response:
    """login, register, refresh, invitation, password and logout: small JSON bodies, the refresh token moved between
    the body and the cookie."""
    raw = await request.read()
    if len(raw) > 64 * 1024:
        raise ApiError("The request body is too large", "request_too_large", status=413)
    cookie = request.cookies.get(REFRESH_COOKIE)
    keeps_this_login = False  # a logout of the other devices only: this one's cookie stays
    if tail in ("auth/refresh", "auth/logout") and cookie:
        try:
            payload = json.loads(raw) if raw.strip() else {}
        except ValueError:
            payload = None
        keeps_this_login = isinstance(payload, dict) and payload.get("others") is True and not payload.get("all")
        if isinstance(payload, dict) and not payload.get("refresh_token"):
            payload["refresh_token"] = cookie
            raw = json.dumps(payload).encode()
    if tail == "auth/refresh" and cookie:
        status, headers, content = await _coalesced_refresh(state, request, tail, raw, cookie)
    else:
        status, headers, content = await _call_gateway(state, request, tail, raw)
    new_token: str | None = None
    if tail in TOKEN_ENDPOINTS and status < 300:
        with contextlib.suppress(ValueError):
            document = json.loads(content)
            if isinstance(document, dict) and "refresh_token" in document:
                new_token = document.pop("refresh_token")
                document["refresh_token_cookie"] = True
                content = json.dumps(document).encode()
                headers["Content-Type"] = "application/json; charset=utf-8"
    response = web.Response(status=status, body=content, headers=headers)
    response.headers["Cache-Control"] = "no-store"
    if new_token:
        set_refresh_cookie(response, request, new_token)
    elif (tail == "auth/logout" and not (keeps_this_login and status < 300)) or \
            (tail == "auth/refresh" and status == 401):
        set_refresh_cookie(response, request, None)
    return response


async def _coalesced_refresh(state: ProxyState, request: web.Request, tail: str, raw: bytes,
                             cookie: str) -> tuple[int, dict[str, str], bytes]:
    key = hashlib.sha256(cookie.encode()).hexdigest()
    now = time.monotonic()
    for stale in [k for k, (at, _) in state.refreshes.items() if now - at > REFRESH_GRACE]:
        del state.refreshes[stale]
    if key in state.refreshes:
        return await asyncio.shield(state.refreshes[key][1])
    future: asyncio.Future = asyncio.get_running_loop().create_future()
    state.refreshes[key] = (now, future)
    try:
        result = await _call_gateway(state, request, tail, raw)
    except BaseException as error:
        state.refreshes.pop(key, None)
        if isinstance(error, asyncio.CancelledError):
            future.cancel()
        else:
            future.set_exception(error)
            future.exception()  # marked as retrieved: a lone caller needs no second reader
        raise
    future.set_result(result)
    if result[0] >= 300:
        state.refreshes.pop(key, None)
    return result


async def pass_through(state: ProxyState, request: web.Request, tail: str) -> web.StreamResponse:
    """Any other API call: the body streamed both ways (uploads, downloads, exports), bounded."""
    assert state.http is not None
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        refuse_cross_site(request)
    if request.content_length is not None and request.content_length > state.max_body_bytes:
        raise ApiError(f"The request body is larger than {state.max_body_bytes} bytes", "request_too_large",
                       "Send a smaller file", status=413)
    body = bounded_body(request, state.max_body_bytes) if request.body_exists else None
    url = f"{state.gateway_url}/api/v1/{tail}"
    response: web.StreamResponse | None = None
    try:
        async with state.http.request(request.method, url, params=request.rel_url.query,
                                      headers=forwarded_headers(state, request), data=body, allow_redirects=False,
                                      timeout=aiohttp.ClientTimeout(total=None, connect=10,
                                                                    sock_read=state.read_timeout)) as answer:
            response = web.StreamResponse(status=answer.status)
            for name, value in answer.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    response.headers.add(name, value)
            await response.prepare(request)
            async for chunk in answer.content.iter_chunked(256 * 1024):
                await response.write(chunk)
            await response.write_eof()
            return response
    except (aiohttp.ClientError, asyncio.TimeoutError) as error:
        if response is not None and response.prepared:
            # Half an answer went out already: all that is left is to cut the connection.
            raise ConnectionResetError("the gateway's answer broke off") from error
        raise _unreachable(error) from error


async def proxy_api(state: ProxyState, request: web.Request) -> web.StreamResponse:
    tail = request.match_info["tail"]
    if tail in TOKEN_ENDPOINTS or tail == "auth/logout":
        if request.method != "POST":
            return await pass_through(state, request, tail)
        refuse_cross_site(request)
        return await token_call(state, request, tail)
    return await pass_through(state, request, tail)


async def _pump(source: WebSocket, target: WebSocket, default_close: int) -> None:
    """Frames from one side to the other until the source closes; then the other side closes
    with the source's code."""
    async for message in source:
        if message.type == aiohttp.WSMsgType.TEXT:
            await target.send_str(message.data)
        elif message.type == aiohttp.WSMsgType.BINARY:
            await target.send_bytes(message.data)
    await target.close(code=source.close_code or default_close)


async def proxy_chat_socket(state: ProxyState, request: web.Request) -> web.StreamResponse:
    """`/ws/chat` both ways: the gateway's handshake answer (401, 403) is passed back as it is;
    once open, text and binary frames and the closing code cross unchanged."""
    assert state.http is not None
    refuse_cross_site(request)
    query = request.query_string
    url = f"{state.gateway_url}/ws/chat" + (f"?{query}" if query else "")
    headers = forwarded_headers(state, request)
    try:
        upstream = await state.http.ws_connect(url, headers=headers, max_msg_size=state.max_frame_bytes,
                                               autoping=True, heartbeat=None)
    except aiohttp.WSServerHandshakeError as error:
        raise ApiError("The gateway refused the chat connection", "chat_refused",
                       "Sign in again", status=error.status if error.status >= 400 else 502) from error
    except (aiohttp.ClientError, asyncio.TimeoutError) as error:
        raise _unreachable(error) from error
    browser = web.WebSocketResponse(max_msg_size=state.max_frame_bytes, heartbeat=30, compress=True)
    try:
        await browser.prepare(request)

        tasks = [asyncio.create_task(_pump(browser, upstream, aiohttp.WSCloseCode.OK)),
                 asyncio.create_task(_pump(upstream, browser, aiohttp.WSCloseCode.GOING_AWAY))]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError, ConnectionError):
                    await task
    finally:
        await upstream.close()
        if not browser.closed and browser.prepared:
            await browser.close(code=aiohttp.WSCloseCode.GOING_AWAY)
    return browser
