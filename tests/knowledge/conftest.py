"""A gateway with the real token, files and knowledge plugins on real PostgreSQL, the core's
embedded vector index (Qdrant's engine in DATA_DIR) and the offline embedding model, and a
loopback web server for `url` documents."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from gateway.app import create_app
from gateway.context import get_context
from gateway.identity import Identity
from plugins.auth import tokens_plugin
from plugins.auth.contract import TOKENS
from plugins.files import files_plugin
from plugins.knowledge import plugin as knowledge_plugin
from tests.support.servers import free_port

from . import samples

API = "/api/v1"
ALICE = Identity("user_alice", "alice", nickname="Alice")
BOB = Identity("user_bob", "bob", nickname="Bob")
ADMIN = Identity("admin", "admin", is_admin=True, nickname="Administrator")


@dataclass
class KnowledgeApp:
    client: TestClient
    headers: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def app(self) -> web.Application:
        return self.client.server.app

    async def call(self, method: str, path: str, who: str = "alice", status: int = 200, **options) -> dict:
        headers = {**self.headers[who], **options.pop("headers", {})}
        response = await self.client.request(method, API + path, headers=headers, **options)
        body = await response.json()
        assert response.status == status, (response.status, body)
        return body

    async def error(self, method: str, path: str, status: int, error_type: str, who: str = "alice",
                    **options) -> dict:
        body = await self.call(method, path, who, status, **options)
        assert body["errorType"] == error_type, body
        assert body["error"] and "hint" in body
        return body

    async def base(self, name: str = "Notes", who: str = "alice") -> dict:
        return await self.call("POST", "/knowledge/bases", who, 201, json={"name": name})

    async def note(self, kb_id: str, title: str, content: str, who: str = "alice", status: int = 201) -> dict:
        return await self.call("POST", f"/knowledge/bases/{kb_id}/documents", who, status,
                               json={"title": title, "content": content})

    async def search(self, query: str, who: str = "alice", **body) -> dict:
        return await self.call("POST", "/knowledge/search", who, 200, json={"query": query, **body})


def bearer(app: web.Application, identity: Identity) -> dict[str, str]:
    token, _ = get_context(app).contracts.require(TOKENS).issue_access(identity)
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def make_knowledge_app(aiohttp_client, make_config, database_url):
    """Builds the gateway; `settings` are `[plugins.knowledge]` keys, `overrides` other config."""
    async def build(settings: dict | None = None, overrides: dict | None = None) -> KnowledgeApp:
        config = make_config({"database.url": database_url, "plugins.knowledge": dict(settings or {}),
                              **(overrides or {})})
        app = create_app("gateway", config, plugins=[tokens_plugin, files_plugin, knowledge_plugin])
        client = await aiohttp_client(app)
        headers = {name: bearer(app, identity) for name, identity in
                   (("alice", ALICE), ("bob", BOB), ("admin", ADMIN))}
        return KnowledgeApp(client, headers)
    return build


@pytest.fixture
async def knowledge(make_knowledge_app) -> KnowledgeApp:
    return await make_knowledge_app()


@pytest.fixture
async def web_server(aiohttp_server):
    """A loopback site: an article, a text file, a PDF, an image, a 404 and redirects out of the
    allowed endpoint (to a cloud-metadata address, and to another loopback port)."""
    app = web.Application()
    routes = web.RouteTableDef()
    closed_port = free_port()

    @routes.get("/article.html")
    async def article(request: web.Request) -> web.Response:
        return web.Response(text=samples.ARTICLE_HTML, content_type="text/html", charset="utf-8")

    @routes.get("/notes.txt")
    async def notes(request: web.Request) -> web.Response:
        return web.Response(text="Plain notes from the web.\n\nThe spare key is under the blue flowerpot.",
                            content_type="text/plain")

    @routes.get("/report.pdf")
    async def report(request: web.Request) -> web.Response:
        return web.Response(body=samples.pdf_bytes(), content_type="application/pdf")

    @routes.get("/bomb.docx")
    async def bomb(request: web.Request) -> web.Response:
        return web.Response(body=samples.docx_bomb(), content_type=samples.DOCX)

    @routes.get("/photo.png")
    async def photo(request: web.Request) -> web.Response:
        return web.Response(body=samples.PNG, content_type="image/png")

    @routes.get("/to-metadata")
    async def to_metadata(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data/")

    @routes.get("/to-loopback")
    async def to_loopback(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://127.0.0.1:{closed_port}/secret")

    @routes.get("/moved")
    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound("/article.html")

    app.add_routes(routes)
    server = await aiohttp_server(app)
    return server
