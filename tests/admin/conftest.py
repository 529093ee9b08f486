"""Fixtures of the admin tests: the real ai-core service on a loopback port (its model tables
in a fresh PostgreSQL database), the gateway built with the token and admin plugins pointed at
it, a small OpenAI-compatible provider that lists its models, and administrator and user
credentials minted by the real token service."""
from __future__ import annotations

import socket

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver

from gateway.app import create_app
from gateway.context import get_context
from gateway.fetch import RESOLVER
from gateway.identity import Identity
from gateway.plugins import Plugin
from plugins.admin import plugin as admin_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from plugins.auth.contract import TOKENS

PROVIDER_KEY = "sk-live-provider-key-0123456789"


class TableResolver(AbstractResolver):
    """DNS answers from a table: `metadata.test` is what a hostile DNS server could answer."""

    TABLE = {"metadata.test": "169.254.169.254", "provider.test": "127.0.0.1"}

    async def resolve(self, host, port=0, family=socket.AF_INET):
        if host not in self.TABLE:
            raise OSError(f"unknown host {host}")
        return [{"hostname": host, "host": self.TABLE[host], "port": port, "family": socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST}]

    async def close(self):
        pass


class ResolverPlugin(Plugin):
    name = "test_resolver"

    def setup(self, registrar):
        registrar.provide(RESOLVER, TableResolver())


class ListingProvider:
    """An OpenAI-compatible provider: `/live/v1` lists its models (with the right key),
    `/nolist/v1` has no model list but completes, `/moved/v1` redirects to the metadata address."""

    def __init__(self):
        self.requests: list[dict] = []
        self.app = web.Application()
        self.app.router.add_get("/live/v1/models", self.models)
        self.app.router.add_get("/ollama/api/tags", self.tags)
        self.app.router.add_post("/nolist/v1/chat/completions", self.completion)
        self.app.router.add_get("/moved/v1/models", self.moved)
        self.app.router.add_get("/text/v1/models", self.text)

    def record(self, request):
        self.requests.append({"path": request.path, "authorization": request.headers.get("Authorization")})

    async def models(self, request):
        self.record(request)
        if request.headers.get("Authorization") != f"Bearer {PROVIDER_KEY}":
            return web.json_response({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}},
                                     status=401)
        return web.json_response({"object": "list", "data": [
            {"id": "gpt-small", "object": "model", "created": 1700000000, "owned_by": "fake"},
            {"id": "gpt-large", "object": "model", "created": 1700000001, "owned_by": "fake"}]})

    async def tags(self, request):
        self.record(request)
        return web.json_response({"models": [{"name": "llama3:8b"}, {"name": "qwen2:7b"}]})

    async def completion(self, request):
        self.record(request)
        body = await request.json()
        assert body["max_tokens"] == 1
        return web.json_response({"id": "c1", "object": "chat.completion", "model": body["model"],
                                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "p"},
                                               "finish_reason": "length"}]})

    async def moved(self, request):
        self.record(request)
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data/")

    async def text(self, request):
        return web.Response(text="not json")


@pytest.fixture
async def listing_provider(aiohttp_server):
    provider = ListingProvider()
    server = await aiohttp_server(provider.app)
    provider.url = f"http://127.0.0.1:{server.port}"
    provider.port = server.port
    return provider


@pytest.fixture
def make_gateway(aiohttp_server, aiohttp_client, make_config, database_url):
    """The ai-core service on a loopback port and a gateway whose admin plugin talks to it.
    `allow_private` is the operator's fetch setting (loopback providers need it)."""
    async def build(*extra_plugins, allow_private: bool = True, ai_core_url: str | None = None):
        if ai_core_url is None:
            ai_config = make_config({"database.url": database_url, "fetch.allow_private": allow_private,
                                     "plugins.ai_core": {"timezone": "UTC"}})
            ai_core = await aiohttp_server(create_app("ai-core", ai_config,
                                                      plugins=[tokens_plugin, ai_core_plugin, ResolverPlugin()]))
            ai_core_url = f"http://127.0.0.1:{ai_core.port}"
        config = make_config({"peers.ai_core_url": ai_core_url,
                              "plugins.admin": {"health_check_timeout": 2, "fetch_models_timeout": 2}})
        app = create_app("gateway", config, plugins=[tokens_plugin, admin_plugin, *extra_plugins])
        client = await aiohttp_client(app)
        tokens = get_context(app).contracts.require(TOKENS)
        client.admin = {"Authorization": f"Bearer {tokens.issue_access(Identity('admin', 'admin', is_admin=True))[0]}"}
        client.alice = {"Authorization": f"Bearer {tokens.issue_access(Identity('user_alice', 'alice'))[0]}"}
        return client
    return build


@pytest.fixture
async def gateway(make_gateway):
    return await make_gateway()


async def error_of(response, status: int, error_type: str) -> dict:
    assert response.status == status, await response.text()
    body = await response.json()
    assert body["errorType"] == error_type, body
    assert body["error"]
    return body
