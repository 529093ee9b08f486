"""Fixtures of the device tests: the real IoT service (iot-debug-service, its simulated homes, on
real PostgreSQL), the gateway with its `devices` plugin and the chat channel, and the AI core with
the device tools, each a real server on a loopback port and each the others' peer, built by the
production factory. Two gateways share Redis as two instances of one deployment do."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import aiohttp
import pytest

from gateway.app import create_app
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.iot.assistant import tools_plugin as device_tools_plugin
from plugins.iot.gateway import FEED
from plugins.iot.gateway import plugin as devices_plugin
from plugins.iot.service import plugin as iot_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.ai_core.conftest import SERVICE, access_token, bearer
from tests.support.servers import free_port

ALICE = bearer(access_token("user_alice", "alice"))
BOB = bearer(access_token("user_bob", "bob"))
ADMIN = bearer(access_token("admin", "admin", admin=True))
__all__ = ["SERVICE", "ALICE", "BOB", "ADMIN"]

# Short waits, so that tests of the feed's hand-over and reconnection take a second, not a minute.
FAST_FEED = {"feed_lease_seconds": 0.6, "feed_retry_min": 0.05, "feed_retry_max": 0.3, "timeout": 3.0}


def url_of(server) -> str:
    return str(server.make_url("")).rstrip("/")


def token_of(headers: dict) -> str:
    return headers["Authorization"].split(" ", 1)[1]


@dataclass
class Home:
    """The servers of one test and where each answers."""
    iot_url: str
    gateways: list = field(default_factory=list)    # aiohttp test clients of the gateway instances
    ai_core_url: str = ""

    @property
    def gateway(self):
        return self.gateways[0]


@pytest.fixture
def make_iot_service(aiohttp_server, make_config, database_url):
    """The IoT service on a loopback port (`port`: a fixed one, to restart it there)."""
    async def build(settings: dict | None = None, port: int | None = None):
        config = make_config({"database.url": database_url,
                              "plugins.iot": {"tick_seconds": 3600.0, **(settings or {})}})
        return await aiohttp_server(create_app("iot-debug-service", config, plugins=[tokens_plugin, iot_plugin]),
                                    port=port or 0)
    return build


@pytest.fixture
def make_gateway(aiohttp_client, aiohttp_server, make_config, database_url):
    """A gateway instance (tokens, sessions, files, chat, devices) asking the IoT service at
    `iot_url` (and the AI core at `ai_core_url`); `port` pins its loopback port."""
    async def build(iot_url: str, *, ai_core_url: str = "", port: int | None = None, overrides: dict | None = None,
                    settings: dict | None = None, extra_plugins: tuple = ()):
        config = make_config({"database.url": database_url, "peers.iot_service_url": iot_url,
                              "peers.ai_core_url": ai_core_url or f"http://127.0.0.1:{free_port()}",
                              "auth.chat_for_all_users": True, "plugins.devices": {**FAST_FEED, **(settings or {})},
                              **(overrides or {})})
        app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, files_plugin,
                                                      ai_core_client_plugin, chat_plugin, devices_plugin,
                                                      *extra_plugins])
        server = await aiohttp_server(app, port=port or 0)
        return await aiohttp_client(server)
    return build


@pytest.fixture
def make_ai_core(aiohttp_server, make_config, database_url):
    """The AI core with the device tools (and `extra_plugins`), asking the gateway at `gateway_url`;
    `settings`: more `[plugins.ai_core]` keys."""
    async def build(gateway_url: str, *, extra_plugins: tuple = (), settings: dict | None = None):
        config = make_config({"database.url": database_url, "peers.gateway_url": gateway_url,
                              "auth.chat_for_all_users": True,
                              "plugins.ai_core": {"first_token_timeout": 10, "idle_timeout": 20, "tool_timeout": 20,
                                                  "timezone": "UTC", **(settings or {})}})
        return await aiohttp_server(create_app("ai-core", config, plugins=[tokens_plugin, ai_core_plugin,
                                                                            device_tools_plugin, *extra_plugins]))
    return build


@pytest.fixture
async def home(make_iot_service, make_gateway) -> Home:
    """The IoT service and one gateway in front of it, its feed following the service."""
    iot = await make_iot_service()
    result = Home(url_of(iot))
    result.gateways.append(await make_gateway(result.iot_url))
    await following(result.gateway)
    return result


@pytest.fixture
async def assistant_home(make_iot_service, make_gateway, make_ai_core) -> Home:
    """The IoT service, a gateway and the AI core with the device tools (no model: the offline agent)."""
    iot = await make_iot_service()
    gateway_port = free_port()
    ai_core = await make_ai_core(f"http://127.0.0.1:{gateway_port}")
    result = Home(url_of(iot), ai_core_url=url_of(ai_core))
    result.gateways.append(await make_gateway(result.iot_url, ai_core_url=result.ai_core_url, port=gateway_port))
    await following(result.gateway)
    return result


async def following(*gateways, timeout: float = 10.0) -> None:
    """Until one of `gateways` holds the feed's lease and has the IoT service's stream open."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not any(gateway.server.app[FEED].following.is_set() for gateway in gateways):
        assert asyncio.get_running_loop().time() < deadline, "no gateway instance follows the IoT service"
        await asyncio.sleep(0.02)


async def chat_socket(gateway, user: dict, session_id: str = "devices", client_id: str = "phone"):
    return await gateway.ws_connect(f"/ws/chat?token={token_of(user)}&session_id={session_id}&client_id={client_id}")


async def frames_of_type(ws, kind: str, count: int = 1, timeout: float = 10.0) -> list[dict]:
    """The next `count` frames of type `kind` (others skipped)."""
    found: list[dict] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(found) < count:
        frame = await asyncio.wait_for(ws.receive_json(), max(0.0, deadline - loop.time()))
        if frame.get("type") == kind:
            found.append(frame)
    return found


async def nothing_of_type(ws, kind: str, wait: float = 0.5) -> None:
    """No frame of type `kind` arrives within `wait` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        left = deadline - loop.time()
        if left <= 0:
            return
        try:
            frame = await asyncio.wait_for(ws.receive_json(), left)
        except asyncio.TimeoutError:
            return
        assert frame.get("type") != kind, frame


async def operate(gateway, device_id: str, body: dict, headers: dict = ALICE, expect: int = 200, **params) -> dict:
    response = await gateway.post(f"/api/v1/devices/{device_id}/operate", json=body, headers=headers, params=params)
    answer = await response.json()
    assert response.status == expect, answer
    return answer


async def service_history(iot_url: str, device_id: str, user_id: str) -> list[dict]:
    async with aiohttp.ClientSession(headers=SERVICE) as session:
        async with session.get(f"{iot_url}/api/v1/devices/{device_id}/history", params={"user_id": user_id}) as r:
            assert r.status == 200, await r.text()
            return (await r.json())["operations"]
