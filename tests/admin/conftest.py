"""Fixtures of the admin tests: the real ai-core service on a loopback port (its model tables
in a fresh PostgreSQL database), the gateway built with the token, AI core client and admin
plugins pointed at it, the fake OpenAI-compatible provider (tests/support), and administrator and
user credentials minted by the real token service."""
from __future__ import annotations

import socket

import pytest
from aiohttp.abc import AbstractResolver

from gateway.app import create_app
from gateway.context import get_context
from gateway.fetch import RESOLVER
from gateway.identity import Identity
from gateway.plugins import Plugin
from plugins.admin import plugin as admin_plugin
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from plugins.auth.contract import TOKENS
from tests.support.fake_openai import serve_fake_provider

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


@pytest.fixture
async def listing_provider(aiohttp_server):
    """The fake provider, whose model list answers only to PROVIDER_KEY."""
    return await serve_fake_provider(aiohttp_server, api_key=PROVIDER_KEY)


@pytest.fixture
def make_gateway(aiohttp_server, aiohttp_client, make_config, database_url):
    """The ai-core service on a loopback port and a gateway whose admin plugin talks to it.
    `allow_private` is the operator's fetch setting (loopback providers need it, or model_hosts)."""
    async def build(*extra_plugins, allow_private: bool = True, ai_core_url: str | None = None):
        if ai_core_url is None:
            ai_config = make_config({"database.url": database_url, "fetch.allow_private": allow_private,
                                     "fetch.model_hosts": ["127.0.0.1"] if allow_private else [],
                                     "plugins.ai_core": {"timezone": "UTC"}})
            ai_core = await aiohttp_server(create_app("ai-core", ai_config,
                                                      plugins=[tokens_plugin, ai_core_plugin, ResolverPlugin()]))
            ai_core_url = f"http://127.0.0.1:{ai_core.port}"
        config = make_config({"peers.ai_core_url": ai_core_url,
                              "plugins.admin": {"health_check_timeout": 2, "fetch_models_timeout": 2}})
        app = create_app("gateway", config, plugins=[tokens_plugin, ai_core_client_plugin, admin_plugin, *extra_plugins])
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
