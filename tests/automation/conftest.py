"""Gateways with the automation plugin on real PostgreSQL, built by the production factory."""
from __future__ import annotations

import asyncio

import pytest

from gateway.app import create_app
from gateway.context import get_context
from gateway.identity import Identity
from plugins.auth import tokens_plugin
from plugins.auth.contract import TOKENS
from plugins.automation import plugin as automation_plugin
from plugins.notifications import plugin as notifications_plugin
from plugins.sessions import plugin as sessions_plugin

API = "/api/v1/automation"
ALICE = Identity("user_alice", "alice")
BOB = Identity("user_bob", "bob")
ADMIN = Identity("admin", "admin", is_admin=True)


def bearer(app, identity: Identity) -> dict:
    token, _ = get_context(app).contracts.require(TOKENS).issue_access(identity)
    return {"Authorization": f"Bearer {token}"}


class Gateway:
    """One gateway instance: its app, a test client, and the three people's headers."""

    def __init__(self, app, client):
        self.app, self.client = app, client
        self.alice, self.bob, self.admin = bearer(app, ALICE), bearer(app, BOB), bearer(app, ADMIN)

    async def create_rule(self, headers: dict, **body) -> dict:
        response = await self.client.post(f"{API}/rules", headers=headers, json=body)
        assert response.status == 201, await response.text()
        return (await response.json())["rule"]

    async def runs(self, headers: dict, rule_id: str) -> list[dict]:
        response = await self.client.get(f"{API}/rules/{rule_id}/runs", headers=headers)
        assert response.status == 200, await response.text()
        return (await response.json())["runs"]

    async def finished_runs(self, headers: dict, rule_id: str, count: int = 1, timeout: float = 10.0) -> list[dict]:
        """The rule's runs once `count` of them have finished (runs of triggers are spawned)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            runs = [run for run in await self.runs(headers, rule_id) if run["status"] != "running"]
            if len(runs) >= count:
                return runs
            assert asyncio.get_running_loop().time() < deadline, f"only {len(runs)} runs: {runs}"
            await asyncio.sleep(0.05)


@pytest.fixture
def make_gateway(aiohttp_client, make_config, database_url):
    async def build(*plugins, **overrides) -> Gateway:
        config = make_config({"database.url": database_url, **overrides})
        app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, notifications_plugin,
                                                     *plugins, automation_plugin])
        return Gateway(app, await aiohttp_client(app))
    return build
