"""The `frontend` service (port 5173). The web chat client is not built yet; until it is,
this plugin answers `/` with a page that says so and links to the gateway's health, so the
console's eighth service runs and tells the truth about itself."""
from __future__ import annotations

import html

from aiohttp import web

from gateway.context import get_context
from gateway.openapi import api_doc
from gateway.plugins import Plugin, Registrar

routes = web.RouteTableDef()

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Assistant: web client not built yet</title>
<style>
  body {{ font-family: system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem;
         line-height: 1.5; color: #222; }}
  code {{ background: #f2f2f2; padding: 0 .25rem; }}
</style>
</head>
<body>
<h1>The web client is not built yet</h1>
<p>This is the <code>frontend</code> service. The web chat client it will serve has not been
written yet, so there is nothing to chat with here for now.</p>
<p>The backend is running: see the <a href="{health}">gateway health</a>
(<code>{health}</code>). Phone, desktop and chat-platform clients talk to the gateway's API.</p>
</body>
</html>
"""


@routes.get("/", name="frontend_placeholder")
@api_doc("The web client's page (a placeholder until it is built)", auth="none", produces="text/html")
async def placeholder(request: web.Request) -> web.Response:
    config = get_context(request).config
    gateway_url = (config.get("peers.gateway_url") or "http://127.0.0.1:8080").rstrip("/")
    page = PAGE.format(health=html.escape(gateway_url + "/api/v1/health", quote=True))
    return web.Response(text=page, content_type="text/html",
                        headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
                                 "X-Content-Type-Options": "nosniff"})


class FrontendPlugin(Plugin):
    name = "frontend"
    description = "Placeholder page until the web chat client is built"

    def setup(self, registrar: Registrar) -> None:
        registrar.routes(routes)


plugin = FrontendPlugin()
