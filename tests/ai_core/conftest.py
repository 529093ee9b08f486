"""Fixtures of the AI core tests: the service built by the production factory with the token
plugin, the fake OpenAI-compatible provider, and credentials minted per the token contract."""
from __future__ import annotations

import time
import uuid

import jwt
import pytest

from gateway.app import create_app
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from tests.support.fake_openai import FakeProvider, serve_fake_provider
from tests.support.servers import free_port

SERVICE_TOKEN = "test-service-token"
JWT_SECRET = "test-jwt-secret-" + "x" * 32


# Modules make their tokens as they are imported, when pytest collects every test: they must
# outlast the whole run (ten minutes did not, on a slow day: the voice tests, run last, were
# refused with `token_expired`).
TEST_TOKEN_LIFETIME = 6 * 3600


def access_token(user_id: str = "user_alice", username: str = "alice", admin: bool = False,
                 typ: str = "access") -> str:
    now = int(time.time())
    return jwt.encode({"sub": user_id, "username": username, "nickname": username, "adm": admin,
                       "typ": typ, "iat": now, "exp": now + TEST_TOKEN_LIFETIME, "jti": uuid.uuid4().hex},
                      JWT_SECRET, algorithm="HS256")


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


SERVICE = bearer(SERVICE_TOKEN)
ADMIN = bearer(access_token("admin", "admin", admin=True))
ALICE = bearer(access_token())


@pytest.fixture
async def provider(aiohttp_server):
    fake = await serve_fake_provider(aiohttp_server)
    yield fake
    fake.release.set()


@pytest.fixture
def ai_settings() -> dict:
    return {"first_token_timeout": 1.0, "idle_timeout": 3, "tool_timeout": 3, "timezone": "UTC"}


# The operator's choice these tests make besides tests/conftest.py's (loopback model providers).
OPERATOR_SETTINGS = {"auth.chat_for_all_users": True}


@pytest.fixture
def make_ai_core(aiohttp_client, make_config, database_url, ai_settings):
    """The ai-core service with extra plugins (for example one that adds tools) or settings."""
    async def build(*extra_plugins, overrides: dict | None = None):
        config = make_config({"database.url": database_url, "plugins.ai_core": ai_settings,
                              **OPERATOR_SETTINGS, **(overrides or {})})
        app = create_app("ai-core", config, plugins=[tokens_plugin, ai_core_plugin, *extra_plugins])
        return await aiohttp_client(app)
    return build


@pytest.fixture
async def ai_core(make_ai_core):
    return await make_ai_core()


async def configure(client, provider: FakeProvider, models: dict[str, str], chain: list[str] | None = None,
                    required: bool = False, purpose: str = "chat", tags: list[str] | None = None) -> None:
    """Providers named after behaviours, one model per entry of `models` (id -> behaviour)."""
    for model_id, behaviour in models.items():
        base_url = (f"http://127.0.0.1:{free_port()}/v1" if behaviour == "refused"
                    else f"{provider.url}/{behaviour}/v1")
        response = await client.post(f"/api/v1/models/providers/p-{model_id}", headers=SERVICE,
                                     json={"base_url": base_url, "api_key": f"key-{model_id}"})
        assert response.status == 200, await response.text()
        response = await client.post(f"/api/v1/models/models/{model_id}", headers=SERVICE, json={
            "name": f"upstream-{model_id}", "provider": f"p-{model_id}", "tags": tags or ["chat"]})
        assert response.status == 200, await response.text()
    if chain is not None:
        response = await client.post(f"/api/v1/models/routing/{purpose}", headers=SERVICE,
                                     json={"fallback_chain": chain, "required": required})
        assert response.status == 200, await response.text()


async def read_events(response) -> list[dict]:
    """The typed events of an SSE chat call, in order."""
    import json

    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events, name = [], None
    async for raw in response.content:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: "):
            event = json.loads(line[len("data: "):])
            assert event["type"] == name
            events.append(event)
    return events


def text_of(events: list[dict]) -> str:
    return "".join(e["content"] for e in events if e["type"] == "delta")
