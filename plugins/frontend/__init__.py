"""The `frontend` service (port 5173): the web chat client, plain ES modules from `static/`
served under a strict Content-Security-Policy, and a proxy that carries `/api/v1/*` and
`/ws/chat` to the gateway on this origin (docs/web-client.md)."""
from __future__ import annotations

import asyncio
import hashlib
import json
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator

import aiohttp
import marshmallow
from aiohttp import web

from gateway.context import Context
from gateway.errors import NotFound
from gateway.forwarding import parse_trusted_proxies
from gateway.openapi import api_doc
from gateway.plugin_settings import PluginSettings, setting
from gateway.plugins import Plugin, PluginError, Registrar

from .proxy import ProxyState, proxy_api, proxy_chat_socket

STATIC = Path(__file__).parent / "static"
PROXY: web.AppKey[ProxyState] = web.AppKey("frontend_proxy", ProxyState)

# What the page may do: its own scripts, styles, images (thumbnails come through the proxy as
# same-origin URLs; pasted images are blob: URLs), and connections to this origin only.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' blob: data:",
    "media-src 'self' blob:", "connect-src 'self'", "font-src 'self'", "manifest-src 'self'", "worker-src 'self'",
    "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
])
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), geolocation=(), microphone=(self)",
}
CONTENT_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css",
                 ".svg": "image/svg+xml", ".json": "application/json", ".png": "image/png",
                 ".webmanifest": "application/manifest+json", ".html": "text/html"}

routes = web.RouteTableDef()

# The service worker's source: served at /sw.js (so its scope is the whole site) with the
# shell's version and file list put before it, never as a static file.
SERVICE_WORKER = "sw.js"
NOT_IN_SHELL = (SERVICE_WORKER,)
NOT_IN_SHELL_SUFFIXES = (".LICENSE",)


@dataclass(frozen=True, kw_only=True)
class FrontendSettings(PluginSettings):
    max_body_bytes: int = setting(marshmallow.fields.Integer(load_default=25 * 1024 * 1024, validate=marshmallow.validate.Range(
        min=1024), metadata={"description": "Largest request body the proxy carries to the gateway (uploads are "
                                             "20 MB at the gateway)."}))
    read_timeout: float = setting(marshmallow.fields.Float(load_default=300.0, validate=marshmallow.validate.Range(min=1), metadata={
        "description": "Seconds a proxied answer may stay silent before the proxy gives up on it."}))
    max_frame_bytes: int = setting(marshmallow.fields.Integer(load_default=16 * 1024 * 1024, validate=marshmallow.validate.Range(
        min=1024), metadata={"description": "Largest WebSocket frame carried either way on /ws/chat."}))
    trusted_proxies: list[str] = setting(marshmallow.fields.List(marshmallow.fields.String(), load_default=list, metadata={
        "description": "Reverse proxies in front of the frontend (addresses or CIDR ranges) whose "
                       "X-Forwarded-For names the client the frontend vouches for to the gateway."}))


def shell_files(static: Path) -> list[Path]:
    """What the service worker keeps for opening offline: every static file but the licences
    and the worker itself."""
    return sorted(path for path in static.rglob("*") if path.is_file() and path.name not in NOT_IN_SHELL
                  and not path.name.endswith(NOT_IN_SHELL_SUFFIXES))


def shell_version(static: Path) -> tuple[str, list[str]]:
    """A hash of the shell's names and contents (a new deployment or an edited file gives a new
    one, and so a new cache), and the shell's URLs."""
    digest = hashlib.sha256()
    urls = ["/"]
    for path in shell_files(static):
        name = path.relative_to(static).as_posix()
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
        urls.append(f"/static/{name}")
    return digest.hexdigest()[:16], urls


class ServiceWorkerSource:
    """/sw.js: the shell's version and URLs, then static/sw.js. Built again only when a static
    file changed (by name, size or modification time), in an executor (it reads every file)."""

    def __init__(self, static: Path) -> None:
        self.static = static
        self.signature: tuple = ()
        self.body = b""

    def current_signature(self) -> tuple:
        return tuple((str(path), path.stat().st_mtime_ns, path.stat().st_size)
                     for path in sorted(self.static.rglob("*")) if path.is_file())

    def build(self) -> bytes:
        signature = self.current_signature()
        if signature != self.signature:
            version, urls = shell_version(self.static)
            prelude = f"const VERSION = {json.dumps(version)};\nconst SHELL = {json.dumps(urls)};\n"
            self.body = prelude.encode() + (self.static / SERVICE_WORKER).read_bytes()
            self.signature = signature
        return self.body


SERVICE_WORKER_SOURCE: web.AppKey[ServiceWorkerSource] = web.AppKey("frontend_service_worker", ServiceWorkerSource)


def static_file(name: str) -> web.FileResponse:
    path = (STATIC / name).resolve()
    if not path.is_relative_to(STATIC.resolve()) or not path.is_file() or name == SERVICE_WORKER:
        raise NotFound("No such file", "not_found")
    content_type = CONTENT_TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    response = web.FileResponse(path, headers={**PAGE_HEADERS, "Content-Type": content_type,
                                               "Cache-Control": "no-cache"})
    return response


@routes.get("/", name="frontend.index")
@api_doc("The web client's page", auth="none", produces="text/html", tags=("frontend",))
async def index(request: web.Request) -> web.StreamResponse:
    return static_file("index.html")


@routes.get("/sw.js", name="frontend.service_worker")
@api_doc("The web client's service worker (its scope is the whole site): keeps the app shell for opening "
         "offline; its first line names the shell's version", auth="none", produces="text/javascript",
         tags=("frontend",))
async def service_worker(request: web.Request) -> web.StreamResponse:
    source = request.config_dict[SERVICE_WORKER_SOURCE]
    body = await asyncio.get_running_loop().run_in_executor(None, source.build)
    return web.Response(body=body, headers={**PAGE_HEADERS, "Content-Type": "text/javascript",
                                            "Cache-Control": "no-cache"})


@routes.get("/static/{name:.+}", name="frontend.static")
@api_doc("The web client's scripts, styles and vendored libraries", auth="none", produces="application/octet-stream",
         errors=(404,), tags=("frontend",), path={"name": {"type": "string"}})
async def static(request: web.Request) -> web.StreamResponse:
    return static_file(request.match_info["name"])


@api_doc("Any gateway API call, carried to the gateway", auth="optional", produces="application/octet-stream",
         errors=(403, 413, 502), tags=("frontend",), body_required=False, path={"tail": {"type": "string"}},
         description="Carried to the gateway's same path (its answer passed back unchanged). Login, register, "
                     "refresh, invitation and password answers have the refresh token moved into an HttpOnly "
                     "cookie.")
async def proxy(request: web.Request) -> web.StreamResponse:
    return await proxy_api(request.app[PROXY], request)


for _method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
    routes.route(_method, "/api/v1/{tail:.+}", name=f"frontend_proxy_{_method.lower()}")(proxy)


@routes.get("/ws/chat", name="frontend.chat_socket")
@api_doc("The gateway's chat WebSocket, carried both ways", auth="optional", produces="application/octet-stream",
         responses={101: None}, errors=(401, 403, 502), tags=("frontend",))
async def chat_socket(request: web.Request) -> web.StreamResponse:
    return await proxy_chat_socket(request.app[PROXY], request)


class FrontendPlugin(Plugin):
    name = "frontend"
    description = "The web chat client, and its proxy to the gateway on the same origin"
    settings_class = FrontendSettings

    def setup(self, registrar: Registrar[FrontendSettings]) -> None:
        settings = registrar.settings
        # Found as every caller finds a service: GATEWAY_URL, else the gateway's port of the table.
        gateway_url = registrar.context.peer_url("gateway")
        try:
            trusted = parse_trusted_proxies(settings.trusted_proxies, "plugins.frontend.trusted_proxies")
        except ValueError as error:
            raise PluginError(str(error)) from None
        state = ProxyState(gateway_url=gateway_url, max_body_bytes=settings.max_body_bytes,
                           read_timeout=settings.read_timeout, max_frame_bytes=settings.max_frame_bytes,
                           service_token=registrar.config.settings.auth.service_token,
                           trusted_proxies=trusted)
        registrar.app_state(PROXY, state)
        registrar.app_state(SERVICE_WORKER_SOURCE, ServiceWorkerSource(STATIC))
        registrar.routes(routes)

        async def client_session(context: Context) -> AsyncIterator[None]:
            # Its own session: bodies pass byte for byte (no decompression), no total timeout.
            state.http = aiohttp.ClientSession(auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
                                               timeout=aiohttp.ClientTimeout(total=None, connect=10))
            try:
                yield
            finally:
                await state.http.close()

        registrar.lifespan(client_session)


plugin = FrontendPlugin()
