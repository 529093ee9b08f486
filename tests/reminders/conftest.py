"""A gateway with the real auth, notifications and reminders plugins on real PostgreSQL (Alice
and Bob registered, the deployment's default time zone Asia/Shanghai), a manual clock
(`context.clock`) the tests move, and a WebSocket endpoint for a person's devices."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gateway.app import create_app
from gateway.clock import ManualClock
from gateway.context import get_context
from gateway.identity import Identity
from plugins.auth import auth_plugin, tokens_plugin
from plugins.notifications import plugin as notifications_plugin
from plugins.reminders import plugin as reminders_plugin
from tests.notifications.devices import DevicePlugin, bearer, until

API = "/api/v1"
ALICE = Identity("user_alice", "alice")
BOB = Identity("user_bob", "bob")
ADMIN = Identity("admin", "admin", is_admin=True)
UTC = timezone.utc
# Tuesday 24 November 2026, 06:00 UTC = 14:00 in Shanghai.
START = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


@dataclass
class Gateway:
    client: TestClient
    clock: ManualClock

    @property
    def app(self) -> web.Application:
        return self.client.server.app

    def headers(self, who: str) -> dict[str, str]:
        identity = {"alice": ALICE, "bob": BOB, "admin": ADMIN}[who]
        return bearer(self.app, identity)

    async def call(self, method: str, path: str, who: str = "alice", status: int = 200, **options) -> dict:
        headers = {**self.headers(who), **options.pop("headers", {})}
        response = await self.client.request(method, API + path, headers=headers, **options)
        body = await response.json()
        assert response.status == status, (response.status, body)
        return body

    async def error(self, method: str, path: str, status: int, error_type: str, who: str = "alice", **options) -> dict:
        body = await self.call(method, path, who, status, **options)
        assert body["errorType"] == error_type, body
        assert body["error"] and body.get("hint")
        return body

    async def create(self, who: str = "alice", **fields) -> dict:
        body = {"title": "Call mom", "remind_at": "2026-11-25T09:00:00+08:00", **fields}
        return (await self.call("POST", "/reminders", who, 201, json=body))["reminder"]

    async def reminder(self, reminder_id: str, who: str = "alice") -> dict:
        return (await self.call("GET", f"/reminders/{reminder_id}", who))["reminder"]

    async def until_reminder(self, reminder_id: str, condition, who: str = "alice") -> dict:
        seen: dict = {}

        async def check() -> bool:
            seen.update(await self.reminder(reminder_id, who))
            return bool(condition(seen))
        await until(check)
        return seen

    def ws(self, who: str = "alice", client_id: str = ""):
        return self.client.ws_connect(f"/ws/device?client_id={client_id}", headers=self.headers(who))


def build_app(config, clock: ManualClock) -> web.Application:
    app = create_app("gateway", config, plugins=[tokens_plugin, auth_plugin, notifications_plugin, reminders_plugin,
                                                 DevicePlugin()])
    get_context(app).clock = clock
    return app


@pytest.fixture
def reminder_settings() -> dict:
    return {"grace_seconds": 3600}


AUTH = {"auth.registration_enabled": True,
        "plugins.auth": {"default_timezone": "Asia/Shanghai", "bcrypt_rounds": 4, "rate_limit_per_minute": 1000}}


async def register(client: TestClient, username: str) -> None:
    response = await client.post(f"{API}/auth/register", json={
        "username": username, "password": "secret-pass", "email": f"{username}@example.org",
        "nickname": username, "verify_code": "ABC123"})
    assert response.status in (201, 409), await response.text()  # 409: a second instance on the same database


@pytest.fixture
async def make_gateway(make_config, database_url, reminder_settings):
    """Builds a gateway instance; instances built with the same `clock` and `overrides` share it."""
    clients: list[TestClient] = []

    async def build(clock: ManualClock | None = None, overrides: dict | None = None, **settings) -> Gateway:
        clock = clock or ManualClock(START)
        config = make_config({"database.url": database_url, **AUTH,
                              "plugins.reminders": {**reminder_settings, **settings}, **(overrides or {})})
        client = TestClient(TestServer(build_app(config, clock)))
        await client.start_server()
        clients.append(client)
        for username in ("alice", "bob"):
            await register(client, username)
        return Gateway(client, clock)

    yield build
    for client in clients:
        await client.close()  # a second close (a test stopped it already) does nothing


@pytest.fixture
async def gateway(make_gateway) -> Gateway:
    return await make_gateway()
