"""The bridge tests run the real chain (each fixture names its database before the server that
uses it, so the server stops first): the bridge service, the gateway (sessions, chat,
webhooks) and the AI core on loopback ports, the AI core answered by tests/support/fake_openai.py,
and each platform a local server speaking its real API (tests/support/fake_telegram.py)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from gateway.app import create_app
from gateway.context import get_context
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.platform_bridge import plugin as bridge_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.sessions.contract import CONVERSATIONS
from plugins.webhooks import plugin as webhooks_plugin
from tests.support.fake_openai import serve_fake_provider, route_to_model
from tests.support.fake_discord import serve_fake_discord
from tests.support.fake_telegram import serve_fake_telegram
from tests.support.servers import free_port

SERVICE = {"Authorization": "Bearer test-service-token"}
TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"


@pytest.fixture
async def provider(aiohttp_server):
    return await serve_fake_provider(aiohttp_server)


@pytest.fixture
async def ai_core_url(postgres_server, provider, make_config, aiohttp_server):
    """The AI core, its one model the fake provider's `slow` behaviour (the answer word by word)."""
    name = postgres_server.create_database()
    config = make_config({"database.url": postgres_server.database_url(name)})
    server = await aiohttp_server(create_app("ai-core", config, plugins=[tokens_plugin, ai_core_plugin]))
    url = str(server.make_url("")).rstrip("/")
    await route_to_model(url, f"{provider.url}/slow/v1", SERVICE)
    yield url
    await server.close()
    postgres_server.drop_database(name)


@pytest.fixture
def chat_for_all_users() -> bool:
    """The gateway's `[auth] chat_for_all_users`: the bridge's people are users, so on; a module
    that tests the rule overrides this fixture."""
    return True


@pytest.fixture
async def gateway(database_url, ai_core_url, discord, make_config, aiohttp_server, chat_for_all_users):
    """The gateway with the webhooks plugin (the bridge's turn route) and what it stands on."""
    config = make_config({"database.url": database_url, "peers.ai_core_url": ai_core_url,
                          "auth.chat_for_all_users": chat_for_all_users,
                          "plugins.webhooks": {"discord_api_url": discord.url, "discord_defer_after": 0.2}})
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, ai_core_client_plugin,
                                                 chat_plugin, webhooks_plugin])
    server = await aiohttp_server(app)
    server.conversations = get_context(app).contracts.require(CONVERSATIONS)
    return server


@pytest.fixture
async def discord(aiohttp_server):
    return await serve_fake_discord(aiohttp_server)


@pytest.fixture
async def telegram(aiohttp_server):
    return await serve_fake_telegram(aiohttp_server, TOKEN)


@dataclass
class Bridge:
    client: Any
    app: Any

    async def add_bot(self, **body) -> dict:
        body.setdefault("name", "Family")
        body.setdefault("platform", "telegram")
        if body["platform"] == "telegram":
            body.setdefault("config", {"bot_token": TOKEN})
        response = await self.client.post("/api/v1/bots", headers=SERVICE, json=body)
        assert response.status == 201, await response.text()
        return await response.json()

    async def log(self, bot_id: str, **query) -> list[dict]:
        response = await self.client.get(f"/api/v1/bots/{bot_id}/messages", headers=SERVICE, params=query)
        assert response.status == 200, await response.text()
        return (await response.json())["messages"]


@pytest.fixture
def make_bridge(request, database_url, make_config, telegram, aiohttp_client):
    """`await make_bridge(overrides, **settings)`: the bridge service, pointed at the gateway and
    the fake Telegram; `[plugins.platform_bridge]` settings as keywords, other configuration as
    dotted `overrides`."""
    async def build(overrides: dict | None = None, **settings) -> Bridge:
        options = {"telegram_api_url": telegram.url, "poll_timeout": 1, "edit_interval": 0.1,
                   "retry_delay": 0.1, **settings}
        # The gateway (and the AI core behind it) only for the tests that talk to it.
        gateway_url = (str(request.getfixturevalue("gateway").make_url("")) if "gateway" in request.fixturenames
                       else f"http://127.0.0.1:{free_port()}")
        config = make_config({"database.url": database_url, "peers.gateway_url": gateway_url,
                              "plugins.platform_bridge": options, **(overrides or {})})
        app = create_app("platform-bridge", config, plugins=[tokens_plugin, bridge_plugin])
        return Bridge(await aiohttp_client(app), app)
    return build




async def stored_messages(conversations, user_id: str, session_id: str, count: int, timeout: float = 10.0) -> list[dict]:
    """The session's messages once `count` are stored: a platform may show the whole reply
    (streamed) a moment before the gateway has stored it."""
    async with asyncio.timeout(timeout):
        while len(messages := await conversations.list_messages(user_id, session_id)) < count:
            await asyncio.sleep(0.02)
    return messages
