"""The console's proxy routes (spec/console.md, "Proxy routes"): each passes a request to one
service and its answer back. The method, the query string (byte for byte) and the body pass
through unchanged; the service's status and body come back as it sent them. The gateway's
administrator API is called with the console's administrator token (console/peers.py), every
other service with the service credential. A service that cannot be reached is a 502 in the
console's error body naming it (`service_unreachable`).

Bodies sent to the gateway are read first (bounded by `console.proxy_max_body_bytes`), so that a
call the gateway refuses with 401 (its signing key changed, the token was revoked) can be sent
again once with a fresh token; bodies to other services (an upload to transcribe) stream through,
counted against the same bound."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import AsyncIterator, Awaitable, Callable

import aiohttp
from aiohttp import web

from gateway.errors import ApiError, NotFound
from gateway.openapi import api_doc
from gateway.peers import PeerTimeout

from .peers import GATEWAY, PeerError, Peers
from .typedefs import PEERS, PROXY_MAX_BODY

HEALTH_TIMEOUT = PeerTimeout(connect=None, total=5.0)
CHUNK = 64 * 1024
# Request headers a proxied call carries; the caller's credential (for the console) never does.
FORWARDED_REQUEST_HEADERS = ("Content-Type", "Accept", "Accept-Language", "Range", "If-None-Match",
                             "If-Modified-Since", "X-Request-Id")
# Answer headers passed back; the body is re-framed (and decompressed) by the console.
FORWARDED_RESPONSE_HEADERS = ("Content-Type", "Content-Disposition", "Content-Range", "Accept-Ranges", "ETag",
                              "Last-Modified", "Cache-Control", "Retry-After", "X-Request-Id",
                              "X-Content-Type-Options", "Content-Security-Policy")
TAIL = {"tail": {"pattern": "^.+$", "description": "The rest of the target path, passed as it is."}}
PASSED = {"description": "The service's answer, status and body as it sent them (its own document describes them)."}
ANSWER = {"application/json": PASSED, "*/*": {"type": "string", "description": PASSED["description"]}}


@dataclass(frozen=True)
class ProxyRow:
    console_prefix: str  # what the console's path starts with
    service: str
    target_prefix: str  # what replaces it on the service
    admin: bool = False  # the gateway administrator's token instead of the service credential
    methods: tuple[str, ...] = ("GET", "POST", "PUT", "PATCH", "DELETE")  # each documented
    with_tail: bool = True  # also the paths below the prefix
    exact: bool = True  # also the prefix itself
    summary: str = ""


ROWS = (
    ProxyRow("/api/memory", GATEWAY, "/api/v1/memory", admin=True,
             summary="Memories, through the gateway (`/api/v1/memory*`, docs/memory.md)"),
    ProxyRow("/api/sessions", GATEWAY, "/api/v1/admin/sessions", admin=True,
             summary="Live sessions, through the gateway's admin API (`/api/v1/admin/sessions*`, docs/admin.md)"),
    ProxyRow("/api/clients", GATEWAY, "/api/v1/admin/clients", admin=True,
             summary="Known clients and their notes, through the gateway's admin API (`/api/v1/admin/clients*`)"),
    ProxyRow("/api/model-config", GATEWAY, "/api/v1/admin/models", admin=True, exact=False,
             summary="Providers, models and routing, through the gateway's admin API (`/api/v1/admin/models/*`)"),
    ProxyRow("/api/mcp-servers", GATEWAY, "/api/v1/admin/mcp-servers", admin=True,
             methods=("GET", "POST", "PUT", "DELETE"),
             summary="The MCP servers the assistant uses, through the gateway's admin API "
                     "(`/api/v1/admin/mcp-servers*`, docs/mcp.md)"),
    ProxyRow("/api/people", GATEWAY, "/api/v1/admin/users", admin=True, methods=("GET", "POST", "PATCH", "DELETE"),
             summary="The people of the household, through the gateway's admin API (`/api/v1/admin/users*`, "
                     "docs/auth.md)"),
    ProxyRow("/api/api-keys", GATEWAY, "/api/v1/auth/api-keys", admin=True, methods=("GET", "DELETE"),
             summary="Every personal API key (`?all=true`) and revoking one, through the gateway "
                     "(`/api/v1/auth/api-keys*`, docs/auth.md)"),
    ProxyRow("/api/iot/devices", "iot-debug-service", "/api/v1/devices",
             summary="Simulated devices of the IoT debug service (`/api/v1/devices*`, docs/iot.md)"),
    ProxyRow("/api/tool-calls", "ai-core", "/api/v1/tools/calls",
             summary="Tool-call records and statistics of the AI core (`/api/v1/tools/calls*`, docs/ai-core.md)"),
    ProxyRow("/api/voice/status", "voice-service", "/api/v1/status", methods=("GET",), with_tail=False,
             summary="The speech engines' state (voice service `/api/v1/status`, docs/voice.md)"),
    ProxyRow("/api/voice/transcribe", "voice-service", "/api/v1/transcribe", methods=("POST",), with_tail=False,
             summary="Transcribe an upload (voice service `/api/v1/transcribe`; multipart streams through)"),
    ProxyRow("/api/v1/thinking", "memory-service", "/api/v1/thinking",
             summary="The autonomous-thinking log of the memory service (`/api/v1/thinking*`, docs/memory.md)"),
    ProxyRow("/api/thinking-status", GATEWAY, "/api/v1/thinking-status", admin=True, methods=("GET",),
             with_tail=False, summary="Whether the gateway's thinking job has a language model to think with "
                                      "(`/api/v1/thinking-status`, docs/memory.md)"),
    ProxyRow("/api/memory-timeline", "memory-service", "/api/v1/timeline", methods=("GET",), with_tail=False,
             summary="Memories and thinking entries merged, newest first (memory service `/api/v1/timeline`)"),
    ProxyRow("/api/chat-platforms", "platform-bridge", "/api/v1", exact=False,
             summary="Chat-platform bots and their message logs (platform bridge `/api/v1/*`, "
                     "docs/platform-bridge.md)"),
)


def _peers(request: web.Request) -> Peers:
    return request.app[PEERS]


def target_path(row: ProxyRow, request: web.Request) -> str:
    """The service's path for this request: the prefix swapped, the rest of the path and the
    query string kept exactly as they came (still percent-encoded)."""
    rest = request.rel_url.raw_path[len(row.console_prefix):]
    query = request.rel_url.raw_query_string
    return row.target_prefix + rest + (f"?{query}" if query else "")


def _too_large(limit: int) -> ApiError:
    return ApiError(f"The request body is larger than the console passes on ({limit} bytes).",
                    "payload_too_large", "Send a smaller body, or raise console.proxy_max_body_bytes.", status=413)


class BoundedBody:
    """The request's body as it arrives, ended with 413 past `limit` bytes. The client session
    wraps what a body's iterator raises into a connection error, so `exceeded` tells afterwards."""

    def __init__(self, request: web.Request, limit: int):
        self.request = request
        self.limit = limit
        self.exceeded = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        sent = 0
        async for chunk in self.request.content.iter_chunked(CHUNK):
            sent += len(chunk)
            if sent > self.limit:
                self.exceeded = True
                raise _too_large(self.limit)
            yield chunk


async def _body(request: web.Request, row: ProxyRow) -> bytes | BoundedBody | None:
    if not request.body_exists:
        return None
    limit = request.app[PROXY_MAX_BODY]
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    body = BoundedBody(request, limit)
    if row.admin:
        data = bytearray()
        async for chunk in body:
            data.extend(chunk)
        return bytes(data)
    return body


async def forward(request: web.Request, row: ProxyRow) -> web.StreamResponse:
    peers = _peers(request)
    client = peers.client(row.service)
    path = target_path(row, request)
    body = await _body(request, row)
    base_headers = {name: request.headers[name] for name in FORWARDED_REQUEST_HEADERS if name in request.headers}
    refused: dict[str, str] | None = None
    for attempt in (1, 2):
        # The service credential is the client's own; a gateway row's administrator token replaces it.
        credential = await peers.admin_headers(refused) if row.admin else {}
        try:
            upstream = await client.open(request.method, path, headers={**base_headers, **credential},
                                         data=body.__aiter__() if isinstance(body, BoundedBody) else body, quoted=True)
        except ApiError:  # no answer (the client's 502), or the body's own 413 the session wrapped
            if isinstance(body, BoundedBody) and body.exceeded:
                raise _too_large(body.limit) from None
            raise
        if upstream.status == 401:
            upstream.release()
            if row.admin and attempt == 1:
                refused = credential  # renew once: the gateway may have a new signing key, or revoked it
                continue
            raise credential_refused(peers, row)
        try:
            return await _answer(request, upstream)
        finally:
            upstream.release()
    raise AssertionError("unreachable")  # pragma: no cover


def credential_refused(peers: Peers, row: ProxyRow) -> PeerError:
    """The service refused the console's own credential: a 401 passed back would read as the
    console asking its caller for one."""
    name = peers.spec(row.service).name
    if row.admin:
        return PeerError(row.service, f"The {name} refused the console's administrator token, even a fresh one.",
                         "credential_refused", hint="Check the gateway's log; its administrator account may be "
                                                    "disabled or renamed (ADMIN_USERNAME).")
    return PeerError(row.service, f"The {name} refused the console's service credential.", "credential_refused",
                     hint="The console and the services must share SERVICE_TOKEN (or one DATA_DIR, where it is "
                          "generated).")


async def _answer(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    for name in FORWARDED_RESPONSE_HEADERS:
        if name in upstream.headers:
            response.headers[name] = upstream.headers[name]
    await response.prepare(request)
    try:
        async for chunk in upstream.content.iter_chunked(CHUNK):
            await response.write(chunk)
    except (aiohttp.ClientError, asyncio.TimeoutError):
        # Too late for an error body: the status is sent. Ending early tells the caller.
        if request.transport is not None:
            request.transport.close()
        return response
    await response.write_eof()
    return response


def _route_handler(row: ProxyRow, method: str,
                   path: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """One handler per documented operation (each carries its own `api_doc`)."""
    async def handler(request: web.Request) -> web.StreamResponse:
        return await forward(request, row)

    tail = path.endswith("}")
    has_body = method in ("POST", "PUT", "PATCH")
    handler.__name__ = f"proxy_{method.lower()}_{path}"
    target = row.target_prefix + ("/{tail}" if tail else "")
    # Whatever status the service answers comes back (a 404 of an unknown id, a 409...): "default".
    return api_doc(f"{row.summary}: {method} {target}", responses={200: ANSWER, "default": ANSWER},
                   errors=(413, 502) if has_body else (502,), auth="console", path=TAIL if tail else None,
                   body={"description": "Passed on unchanged."} if has_body else None, body_required=False,
                   content_type="*/*")(handler)


def add_proxy_routes(app: web.Application) -> None:
    routes = web.RouteTableDef()
    for row in ROWS:
        paths = ([row.console_prefix] if row.exact else []) + (
            [row.console_prefix + "/{tail:.+}"] if row.with_tail else [])
        for path in paths:
            for method in row.methods:
                routes.route(method, path)(_route_handler(row, method, path))
    routes.get("/api/proxy/{id}/health", name="proxy_health")(service_health)
    app.router.add_routes(routes)


@api_doc("A service's own health check, passed through (no credential needed by the service)",
         responses={200: ANSWER, "default": ANSWER}, errors=(404, 502), auth="console")
async def service_health(request: web.Request) -> web.StreamResponse:
    service_id = request.match_info["id"]
    peers = _peers(request)
    spec = peers.specs.get(service_id)
    if spec is None:
        raise NotFound(f"Unknown service {service_id!r}.", error_type="unknown_service",
                       hint=f"The service table lists: {', '.join(peers.specs)}.")
    upstream = await peers.client(service_id, credential=False).open("GET", spec.health, timeout=HEALTH_TIMEOUT)
    try:
        return await _answer(request, upstream)
    finally:
        upstream.release()

