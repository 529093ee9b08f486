"""Fixtures of the IoT service's tests: the iot-debug-service built by the production factory on
a fresh real PostgreSQL database, on a loopback port, with credentials minted per the token
contract (tests/ai_core/conftest.py)."""
from __future__ import annotations

import pytest

from gateway.app import create_app
from plugins.auth import tokens_plugin
from plugins.iot.service import plugin as iot_plugin
from tests.ai_core.conftest import SERVICE, access_token, bearer

ALICE = bearer(access_token("user_alice", "alice"))
BOB = bearer(access_token("user_bob", "bob"))
ADMIN = bearer(access_token("admin", "admin", admin=True))
__all__ = ["SERVICE", "ALICE", "BOB", "ADMIN"]


@pytest.fixture
def iot_config(make_config, database_url):
    """The service's configuration; `settings` are `[plugins.iot]` keys."""
    def build(settings: dict | None = None, overrides: dict | None = None):
        return make_config({"database.url": database_url, "plugins": {"iot": dict(settings or {})},
                            **(overrides or {})})
    return build


@pytest.fixture
def make_iot_service(aiohttp_client, iot_config):
    """The iot-debug-service as a test client; `settings` are `[plugins.iot]` keys."""
    async def build(settings: dict | None = None, overrides: dict | None = None):
        return await aiohttp_client(create_app("iot-debug-service", iot_config(settings, overrides),
                                               plugins=[tokens_plugin, iot_plugin]))
    return build


@pytest.fixture
async def iot_service(make_iot_service):
    # A tick far away: the tests that want drift ask for it.
    return await make_iot_service({"tick_seconds": 3600})


async def operate(client, device_id: str, body: dict, headers=ALICE, expect: int = 200, **query) -> dict:
    response = await client.post(f"/api/v1/devices/{device_id}/operate", headers=headers, json=body,
                                 params=query)
    answer = await response.json()
    assert response.status == expect, answer
    return answer


async def device(client, device_id: str, headers=ALICE, **query) -> dict:
    response = await client.get(f"/api/v1/devices/{device_id}", headers=headers, params=query)
    answer = await response.json()
    assert response.status == 200, answer
    return answer["device"]
