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
    async def build(*plugins, clock=None, **overrides) -> Gateway:
        """`clock`: the scheduler core's clock from the very start (before the due loop's first look).
        Every user may chat (an `assistant` action needs it) unless `auth.chat_for_all_users` says not."""
        config = make_config({"database.url": database_url, "auth.chat_for_all_users": True, **overrides})
        app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, notifications_plugin,
                                                     *plugins, automation_plugin])
        if clock is not None:
            get_context(app).clock = clock
        return Gateway(app, await aiohttp_client(app))
    return build


# ---------------------------------------------------------------- the whole deployment

FAST_FEED = {"feed_lease_seconds": 0.6, "feed_retry_min": 0.05, "feed_retry_max": 0.3, "timeout": 5.0}


class Stack:
    """The IoT service, the AI core (its offline agent, and the automation tools) and gateway
    instances, each a real server on a loopback port, all on one database; a web site on
    loopback for the http action."""

    def __init__(self):
        self.iot_url = ""
        self.ai_core_url = ""
        self.gateways: list[Gateway] = []
        self.site_hits: list[dict] = []
        self.site_url = ""

    @property
    def gateway(self) -> Gateway:
        return self.gateways[0]


@pytest.fixture
def make_stack(aiohttp_server, aiohttp_client, make_config, database_url):
    from aiohttp import web

    from plugins.ai_core import client_plugin as ai_core_client_plugin
    from plugins.ai_core import plugin as ai_core_plugin
    from plugins.automation.assistant import tools_plugin as automation_tools_plugin
    from plugins.chat import plugin as chat_plugin
    from plugins.iot.gateway import plugin as devices_plugin
    from plugins.iot.service import plugin as iot_plugin
    from plugins.webhooks import plugin as webhooks_plugin
    from tests.support.servers import free_port

    async def build(*, instances: int = 1, tick_seconds: float = 3600.0, shared: dict | None = None,
                    automation: dict | None = None) -> Stack:
        stack = Stack()

        async def hook(request: web.Request) -> web.Response:
            stack.site_hits.append({"method": request.method, "path": request.path,
                                    "headers": dict(request.headers), "body": await request.text()})
            if request.path == "/broken":
                return web.json_response({"error": "nope"}, status=500)
            return web.json_response({"received": True})

        site = web.Application()
        site.router.add_route("*", "/{tail:.*}", hook)
        site_server = await aiohttp_server(site)
        stack.site_url = f"http://127.0.0.1:{site_server.port}"

        iot = await aiohttp_server(create_app("iot-debug-service", make_config({
            "database.url": database_url, "plugins.iot": {"tick_seconds": tick_seconds}}),
            plugins=[tokens_plugin, iot_plugin]))
        stack.iot_url = str(iot.make_url("")).rstrip("/")
        gateway_ports = [free_port() for _ in range(instances)]
        ai_core = await aiohttp_server(create_app("ai-core", make_config({
            "database.url": database_url, "peers.gateway_url": f"http://127.0.0.1:{gateway_ports[0]}",
            "plugins.ai_core": {"first_token_timeout": 10, "idle_timeout": 20, "tool_timeout": 20,
                                "timezone": "UTC"}}),
            plugins=[tokens_plugin, ai_core_plugin, automation_tools_plugin]))
        stack.ai_core_url = str(ai_core.make_url("")).rstrip("/")
        for port in gateway_ports:
            config = make_config({
                "database.url": database_url, "peers.iot_service_url": stack.iot_url,
                "peers.ai_core_url": stack.ai_core_url, "auth.chat_for_all_users": True,
                "plugins.devices": FAST_FEED, "plugins.automation": automation or {},
                # The operator lets automations (and nothing else) reach the test site on loopback.
                "plugins.automation.http_hosts": [f"127.0.0.1:{site_server.port}"],
                **(shared or {})})
            app = create_app("gateway", config, plugins=[
                tokens_plugin, sessions_plugin, notifications_plugin, ai_core_client_plugin, chat_plugin,
                devices_plugin, webhooks_plugin, automation_plugin])
            server = await aiohttp_server(app, port=port)
            stack.gateways.append(Gateway(app, await aiohttp_client(server)))
        return stack
    return build


async def frames_until(ws, wanted: str, count: int = 1, timeout: float = 10.0) -> list[dict]:
    """Every frame a device's socket receives until the `count`-th of type `wanted`."""
    frames: list[dict] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while sum(1 for frame in frames if frame.get("type") == wanted) < count:
        frames.append(await asyncio.wait_for(ws.receive_json(),
                                             max(0.01, deadline - asyncio.get_running_loop().time())))
    return frames


def of_type(frames: list[dict], wanted: str) -> list[dict]:
    return [frame for frame in frames if frame.get("type") == wanted]


async def feed_followed(stack: Stack) -> None:
    """One of the instances follows the IoT service's changes (the devices plugin's feed)."""
    from plugins.iot.gateway import FEED

    for _ in range(200):
        if any(gateway.app[FEED].following.is_set() for gateway in stack.gateways):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no gateway instance follows the IoT service's changes")
