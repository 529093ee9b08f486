"""The operator's web pages: fifteen panels (the spec's fourteen and People, docs/console.md)
rendered from `templates/` with aiohttp-jinja2, and the static files they load from
`console/static/`.

The pages carry no data: each panel's ES module fetches the console's own REST API and proxies
(same origin, JSON) and listens on `/ws`. Every page and file is served under a strict Content
Security Policy: scripts and styles only from this origin, no inline script or style."""
from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Awaitable, Callable

import aiohttp_jinja2
import jinja2
from aiohttp import web

from gateway.errors import NotFound
from gateway.openapi import api_doc

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
STATIC = Path(__file__).resolve().parent / "static"

CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".png": "image/png"}
STATIC_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*\.(js|css|svg|png)$")


@dataclasses.dataclass(frozen=True)
class Panel:
    slug: str
    title: str
    # Services the panel's data comes from, in start order: while one is not running the panel
    # says so and offers to start it.
    needs: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return "/" if self.slug == "dashboard" else f"/{self.slug}"


PANELS = (
    Panel("dashboard", "Dashboard"),
    Panel("memory", "Memory", ("memory-service", "gateway")),
    Panel("sessions", "Sessions", ("gateway",)),
    Panel("services", "Services"),
    Panel("performance", "Performance"),
    Panel("iot", "IoT Devices", ("iot-debug-service",)),
    Panel("tool-calls", "Tool Calls", ("ai-core",)),
    Panel("stt", "STT", ("voice-service",)),
    Panel("database", "Database"),
    Panel("thinking", "Thinking", ("memory-service",)),
    Panel("timeline", "Timeline", ("memory-service",)),
    Panel("chat-platforms", "Chat Platforms", ("platform-bridge",)),
    Panel("clients", "Clients", ("gateway",)),
    Panel("model-config", "Model Config", ("ai-core", "gateway")),
    Panel("people", "People", ("gateway",)),
)

routes = web.RouteTableDef()


def _page_handler(panel: Panel) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def page(request: web.Request) -> web.Response:
        response = aiohttp_jinja2.render_template(f"{panel.slug}.html", request,
                                                  {"panels": PANELS, "panel": panel})
        response.headers.update(SECURITY_HEADERS)
        return response
    page.__name__ = f"page_{panel.slug.replace('-', '_')}"
    return page


for _panel in PANELS:
    routes.get(_panel.path, name=f"page_{_panel.slug}")(
        api_doc(f"The {_panel.title} panel (an HTML page)", auth="console", produces="text/html")(
            _page_handler(_panel)))


@routes.get("/static/{name}", name="page_static")
@api_doc("A script, style sheet or image of the pages", auth="console", errors=(404,),
         responses={200: {media_type: None for media_type in STATIC_TYPES.values()}},
         path={"name": {"type": "string", "pattern": STATIC_NAME.pattern}})
async def static_file(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    path = STATIC / name
    if not STATIC_NAME.match(name) or not path.is_file():
        raise NotFound(f"No page file {name!r}.", error_type="not_found", hint="The pages load their own files.")
    body = await asyncio.to_thread(path.read_bytes)
    return web.Response(body=body, content_type=STATIC_TYPES[path.suffix], headers=SECURITY_HEADERS)


def setup_pages(app: web.Application) -> None:
    aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                         undefined=jinja2.StrictUndefined)
    app.router.add_routes(routes)
