"""The console's proxy rows and dashboard against the real services, each built by the production
factory on its own loopback port (one fresh PostgreSQL database): the gateway (tokens, accounts,
the AI core client, admin, the memory endpoints), the memory service, the AI core, the IoT debug
service and the voice service (its OpenAI-compatible engine talking to a local server that speaks
that protocol). The console is pointed at those ports through its service table."""
from __future__ import annotations

from pathlib import Path

import pytest

from console.app import create_console_app
from console.typedefs import PEERS
from gateway.app import create_app
from gateway.context import get_context
from gateway.services import ServiceSpec
from plugins.admin import plugin as admin_plugin
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import auth_plugin, tokens_plugin
from plugins.iot.service import plugin as iot_plugin
from plugins.memory import plugin as memory_plugin
from plugins.memory import proxy_plugin as memory_proxy_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.sessions.contract import CONVERSATIONS
from plugins.voice.service import plugin as voice_plugin
from tests.support.servers import free_port
from tests.voice.fake_speech_provider import FakeSpeechProvider

HELLO_WORLD = Path(__file__).resolve().parents[2] / "bench" / "voice" / "recordings" / "audioeval-en-hello_world.wav"
TABLE = [("memory-service", "memory service"), ("iot-debug-service", "IoT Debug"),
         ("voice-service", "speech-recognition service"), ("ai-core", "AI-Core"),
         ("platform-bridge", "multi-platform bridge"), ("gateway", "Gateway")]


class Stack:
    """The services on their ports, and the console in front of them."""

    def __init__(self, aiohttp_server, aiohttp_client, make_config, database_url):
        self.aiohttp_server = aiohttp_server
        self.aiohttp_client = aiohttp_client
        self.make_config = make_config
        self.database_url = database_url
        self.ports = {service_id: free_port() for service_id, _ in TABLE}
        self.servers: dict = {}
        self.specs = [ServiceSpec(id=service_id, name=name, port=self.ports[service_id]) for service_id, name in TABLE]

    def url(self, service_id: str) -> str:
        return f"http://127.0.0.1:{self.ports[service_id]}"

    def config(self, **overrides):
        peers = {f"peers.{name}_url": self.url(service_id) for name, service_id in (
            ("memory_service", "memory-service"), ("ai_core", "ai-core"), ("iot_service", "iot-debug-service"),
            ("voice_service", "voice-service"), ("gateway", "gateway"))}
        return self.make_config({"database.url": self.database_url, **peers, **overrides})

    async def serve(self, service_id: str, plugins: list, **overrides) -> None:
        app = create_app(service_id, self.config(**overrides), plugins=plugins)
        self.servers[service_id] = await self.aiohttp_server(app, port=self.ports[service_id])

    async def serve_gateway(self, **overrides) -> None:
        await self.serve("gateway", [tokens_plugin, auth_plugin, ai_core_client_plugin, sessions_plugin, admin_plugin,
                                     memory_proxy_plugin], **overrides)

    async def stop(self, service_id: str) -> None:
        await self.servers.pop(service_id).close()

    async def console(self, **overrides):
        app = create_console_app(self.make_config(overrides), specs=self.specs)
        return await self.aiohttp_client(app)


@pytest.fixture
async def stack(aiohttp_server, aiohttp_client, make_config, database_url):
    built = Stack(aiohttp_server, aiohttp_client, make_config, database_url)
    await built.serve("memory-service", [tokens_plugin, memory_plugin])
    await built.serve("ai-core", [tokens_plugin, ai_core_plugin], **{"plugins.ai_core": {"timezone": "UTC"}})
    await built.serve_gateway()
    return built


async def error_of(response, status: int, error_type: str) -> dict:
    body = await response.json()
    assert response.status == status, body
    assert body["errorType"] == error_type and body["error"] and body["hint"], body
    return body


async def test_gateway_rows_log_in_once_and_pass_everything_through(stack):
    console = await stack.console()
    sessions = await console.get("/api/sessions")
    assert sessions.status == 200 and await sessions.json() == {"sessions": [], "total": 0}
    active = await (await console.get("/api/sessions/active")).json()
    assert active == {"users": {}, "total_users": 0, "total_sessions": 0}
    assert (await console.get("/api/clients")).status == 200
    missing = await console.get("/api/sessions/nope")
    assert missing.status == 404 and (await missing.json())["errorType"] == "session_not_found"

    # Memories: created and read back for a user the administrator names; the query string
    # reaches the gateway byte for byte (percent-encoded UTF-8 and a repeated space).
    created = await console.post("/api/memory", json={"content": "Alice drinks café au lait", "user_id": "user_alice"})
    assert created.status in (200, 201), await created.text()
    listed = await (await console.get("/api/memory?user_id=user_alice")).json()
    assert [memory["content"] for memory in listed["memories"]] == ["Alice drinks café au lait"]
    found = await console.get("/api/memory/search?q=caf%C3%A9%20%20au+lait&user_id=user_alice&mode=lexical")
    body = await found.json()
    assert found.status == 200 and body["query"] == "café  au lait", body
    assert body["memories"][0]["content"] == "Alice drinks café au lait"

    # Model configuration: the gateway's validation error comes back as it sent it.
    providers = await console.get("/api/model-config/providers")
    assert providers.status == 200
    bad = await console.post("/api/model-config/providers/local", json={"base_url": "ftp://nowhere"})
    assert bad.status == 400 and "base_url" in (await bad.json())["fields"]
    saved = await console.post("/api/model-config/providers/local", json={"base_url": "http://127.0.0.1:9/v1"})
    assert saved.status in (200, 201), await saved.text()
    assert any(p["name"] == "local" for p in (await (await console.get("/api/model-config/providers")).json())["providers"])

    # The caller's own Authorization is not passed on (the console's credential is its own).
    assert (await console.get("/api/sessions", headers={"Authorization": "Bearer someone-else"})).status == 200
    # One login served every call; the token appears in no answer.
    assert console.app[PEERS].logins == 1


async def test_the_token_is_renewed_after_a_401_and_before_it_expires(stack):
    console = await stack.console()
    assert (await console.get("/api/sessions")).status == 200
    assert console.app[PEERS].logins == 1

    # The gateway restarts with another signing key: the console's token no longer verifies.
    await stack.stop("gateway")
    await stack.serve_gateway(**{"auth.jwt_secret": "another-secret-" + "y" * 40})
    again = await console.get("/api/sessions/active")
    assert again.status == 200, await again.text()
    assert console.app[PEERS].logins == 2
    # A body sent to the gateway is sent again, whole, after the 401.
    await stack.stop("gateway")
    await stack.serve_gateway(**{"auth.jwt_secret": "third-secret-" + "z" * 40})
    saved = await console.post("/api/model-config/providers/again", json={"base_url": "http://127.0.0.1:9/v1"})
    assert saved.status in (200, 201), await saved.text()
    assert console.app[PEERS].logins == 3

    # Tokens that live less than the renewal margin (60 s) are renewed before each use, with the
    # refresh token (no login, which the gateway limits to 5 a minute per address).
    await stack.stop("gateway")
    await stack.serve_gateway(**{"auth.access_token_lifetime": 30})
    assert (await console.get("/api/clients")).status == 200  # a 401 first: the new key
    assert console.app[PEERS].logins == 4
    for renewals in range(1, 8):
        assert (await console.get("/api/clients")).status == 200
        assert console.app[PEERS].renewals == renewals and console.app[PEERS].logins == 4


async def test_a_service_that_is_down_is_a_502_naming_it(stack):
    console = await stack.console()
    await stack.stop("gateway")
    down = await error_of(await console.get("/api/sessions"), 502, "service_unreachable")
    assert down["service"] == "gateway" and "Gateway" in down["error"]
    assert "POST /api/services/gateway/start" in down["hint"]
    # The bridge is not running in this test: its rows answer the same way.
    bridge = await error_of(await console.get("/api/chat-platforms/bots?limit=5"), 502, "service_unreachable")
    assert bridge["service"] == "platform-bridge"
    health = await error_of(await console.get("/api/proxy/gateway/health"), 502, "service_unreachable")
    assert health["service"] == "gateway"
    await error_of(await console.get("/api/proxy/nope/health"), 404, "unknown_service")

    # A console whose administrator password is not the gateway's.
    await stack.serve_gateway()
    wrong = await stack.console(**{"auth.admin_password": "not-the-gateways"})
    refused = await error_of(await wrong.get("/api/clients"), 502, "gateway_login_failed")
    assert refused["service"] == "gateway" and "ADMIN_PASSWORD" in refused["hint"]
    # A console whose service credential is not the services': never a 401 passed back.
    stranger = await stack.console(**{"auth.service_token": "not-the-services"})
    refused = await error_of(await stranger.get("/api/memory-timeline"), 502, "credential_refused")
    assert refused["service"] == "memory-service" and "SERVICE_TOKEN" in refused["hint"]


async def test_service_rows_use_the_service_credential(stack):
    await stack.serve("iot-debug-service", [tokens_plugin, iot_plugin], **{"plugins.iot": {"tick_seconds": 3600}})
    console = await stack.console()

    devices = await console.get("/api/iot/devices?user_id=user_alice")
    assert devices.status == 200, await devices.text()
    listed = (await devices.json())["devices"]
    assert len(listed) == 8
    light = next(device for device in listed if device["type"] == "light")
    operated = await console.post(f"/api/iot/devices/{light['id']}/operate?user_id=user_alice",
                                  json={"action": "switch", "value": True})
    assert operated.status == 200, await operated.text()
    history = await console.get(f"/api/iot/devices/{light['id']}/history?user_id=user_alice")
    assert history.status == 200

    assert (await console.get("/api/tool-calls")).status == 200
    assert (await console.get("/api/tool-calls/stats")).status == 200

    remembered = await console.post("/api/memory", json={"content": "Bob keeps bees", "user_id": "user_bob"})
    assert remembered.status in (200, 201)
    thinking = await console.get("/api/v1/thinking?user_id=user_bob")
    assert thinking.status == 200 and (await thinking.json())["entries"] == []
    timeline = await (await console.get("/api/memory-timeline?user_id=user_bob")).json()
    assert [item["type"] for item in timeline["items"]] == ["memory"]
    assert timeline["items"][0]["memory"]["content"] == "Bob keeps bees"

    health = await console.get("/api/proxy/memory-service/health")
    assert health.status == 200 and (await health.json())["service"] == "memory-service"


async def test_the_bare_iot_call_shows_the_administrators_eight_simulated_devices(stack):
    """spec/console.md: `GET /api/iot/devices`, as written, lists the simulation's eight devices."""
    await stack.serve("iot-debug-service", [tokens_plugin, iot_plugin], **{"plugins.iot": {"tick_seconds": 3600}})
    console = await stack.console()

    devices = await console.get("/api/iot/devices")
    assert devices.status == 200, await devices.text()
    listed = (await devices.json())["devices"]
    assert len(listed) == 8 and {device["adapter"] for device in listed} == {"simulation"}
    operated = await console.post("/api/iot/devices/front_door_lock/operate", json={"action": "switch", "value": False})
    assert operated.status == 200, await operated.text()
    assert (await operated.json())["operation"]["user_id"] == "admin"
    mine = await (await console.get("/api/iot/devices/front_door_lock?user_id=admin")).json()
    assert mine["device"]["state"] == {"locked": False}
    alices = await (await console.get("/api/iot/devices/front_door_lock?user_id=user_alice")).json()
    assert alices["device"]["state"] == {"locked": True}


async def test_an_upload_streams_through_to_the_voice_service(stack, aiohttp_server):
    import aiohttp

    provider = FakeSpeechProvider()
    provider_server = await aiohttp_server(provider.app)
    await stack.serve("voice-service", [tokens_plugin, voice_plugin], **{"plugins.voice_engines": {
        "stt_engines": ["openai"], "tts_engines": ["openai"], "openai_base_url": str(provider_server.make_url("/v1")),
        "openai_api_key": "provider-key", "openai_stt_model": "whisper-large", "openai_tts_model": "tts-hd",
        "openai_voices": ["nova"], "tts_default_voices": {"en": "openai:nova"}}})
    console = await stack.console(**{"console.proxy_max_body_bytes": 100_000})

    status = await console.get("/api/voice/status")
    assert status.status == 200, await status.text()

    form = aiohttp.FormData()
    form.add_field("audio", HELLO_WORLD.read_bytes(), filename="hello.wav", content_type="audio/wav")
    form.add_field("language", "en")
    answer = await console.post("/api/voice/transcribe", data=form)
    assert answer.status == 200, await answer.text()
    assert provider.requests[0]["fields"]["language"] == "en" and provider.requests[0]["seconds"] > 1

    form = aiohttp.FormData()
    form.add_field("audio", b"\0" * 200_000, filename="big.wav", content_type="audio/wav")
    await error_of(await console.post("/api/voice/transcribe", data=form), 413, "payload_too_large")

    async def chunks():  # no Content-Length: the bound is counted while the body streams
        for _ in range(20):
            yield b"\0" * 10_000
    await error_of(await console.post("/api/voice/transcribe", data=chunks(),
                                      headers={"Content-Type": "multipart/form-data; boundary=x"}),
                   413, "payload_too_large")


async def test_the_dashboard_reports_each_source_and_survives_one_being_down(stack):
    conversations = get_context(stack.servers["gateway"].app).contracts.require(CONVERSATIONS)
    await conversations.create_session("user_carol", "morning")
    await conversations.create_session("user_dan", "evening")
    for text in ("hello", "hi there"):
        await conversations.add_message("morning", "user_carol", "user", text)
    await conversations.add_message("evening", "user_dan", "user", "good evening")
    console = await stack.console()
    assert (await console.post("/api/memory", json={"content": "Carol likes tea", "user_id": "user_carol"})).status \
        in (200, 201)
    board = await console.get("/api/dashboard")
    body = await board.json()
    assert board.status == 200
    assert set(body) == {"services", "performance", "sessions", "memory", "database", "system"}
    assert body["services"]["total"] == len(TABLE) and body["services"]["running"] == 0
    assert body["sessions"] == {"available": True, "activeSessions": 0, "activeUsers": 0,
                                "sessionTotal": 2, "messageTotal": 3}
    # The Sessions panel's history of a stored session, through the admin API.
    history = await (await console.get("/api/sessions/morning/messages?user_id=user_carol&limit=1&offset=1")).json()
    assert [m["content"] for m in history["messages"]] == ["hi there"] and history["user_id"] == "user_carol"
    assert body["memory"] == {"available": True, "total": 1}
    assert body["database"]["available"] is True and len(body["database"]["ports"]) == 5
    assert body["system"]["memory"]["totalBytes"] > 0 and body["system"]["cpuCount"] >= 1

    await stack.stop("memory-service")
    await stack.stop("gateway")
    await asyncio_sleep_past_the_shared_answer()
    body = await (await console.get("/api/dashboard")).json()
    assert body["memory"]["available"] is False and body["memory"]["errorType"] == "service_unreachable"
    assert body["sessions"]["available"] is False and "gateway" in body["sessions"]["error"]
    assert body["system"]["cpuCount"] >= 1


async def asyncio_sleep_past_the_shared_answer() -> None:
    import asyncio

    from console.dashboard import SOURCE_TTL
    await asyncio.sleep(SOURCE_TTL + 0.1)


async def test_chat_platform_rows_reach_the_platform_bridge(stack):
    from plugins.platform_bridge import plugin as bridge_plugin

    await stack.serve("platform-bridge", [tokens_plugin, bridge_plugin])
    console = await stack.console()
    created = await console.post("/api/chat-platforms/bots", json={
        "name": "Family", "platform": "webhook", "enabled": False,
        "config": {"outgoing_url": "https://example.com/hook", "signing_secret": "s" * 24}})
    assert created.status == 201, await created.text()
    bot = await created.json()
    listed = await (await console.get("/api/chat-platforms/bots")).json()
    assert [b["id"] for b in listed["bots"]] == [bot["id"]]
    renamed = await console.patch(f"/api/chat-platforms/bots/{bot['id']}", json={"name": "Family bot"})
    assert renamed.status == 200 and (await renamed.json())["name"] == "Family bot"
    page = await console.get(f"/api/chat-platforms/bots/{bot['id']}/messages?limit=5")
    assert page.status == 200, await page.text()
    deleted = await console.delete(f"/api/chat-platforms/bots/{bot['id']}")
    assert deleted.status == 204 and await deleted.read() == b""
    await error_of(await console.get(f"/api/chat-platforms/bots/{bot['id']}"), 404, "bot_not_found")


async def test_a_service_elsewhere_is_found_by_its_variable_not_its_table_port(stack, monkeypatch):
    """The console finds a service where every service finds it (gateway/peers.py): its `*_URL`
    variable or `[peers]` setting, else the table's port; and hands that address to its children."""
    from console.typedefs import SUPERVISOR

    monkeypatch.delenv("MEMORY_SERVICE_URL", raising=False)
    elsewhere = stack.url("memory-service")
    specs = [ServiceSpec(id=spec.id, name=spec.name, port=free_port()) if spec.id == "memory-service" else spec
             for spec in stack.specs]  # nothing listens on the table's port
    app = create_console_app(stack.make_config({"peers.memory_service_url": elsewhere}), specs=specs)
    console = await stack.aiohttp_client(app)
    response = await console.get("/api/proxy/memory-service/health")
    assert response.status == 200, await response.text()
    assert app[SUPERVISOR].child_environment()["MEMORY_SERVICE_URL"] == elsewhere
