"""Every service answers `GET /api/v1/introspection` (the service credential only) with what it
really loaded: each plugin with its routes, WebSocket types, jobs, contracts, migrations and the
sections other plugins report for it (the AI core's tools), and what it skipped and why."""
from __future__ import annotations

import asyncio

import marshmallow

from gateway.app import create_app
from gateway.contracts import ContractKey
from gateway.introspection import Introspection
from gateway.plugins import Plugin
from gateway.services import ServiceSpec, get_service

PEER = {"Authorization": "Bearer test-service-token"}
ECHO: ContractKey[str] = ContractKey("echo.greeting", "a greeting")


class Frame(marshmallow.Schema):
    text = marshmallow.fields.String()


class EchoPlugin(Plugin):
    """Registers one of each thing the introspection reports."""
    name = "echo_example"
    depends = ("auth_tokens",)

    def setup(self, registrar) -> None:
        registrar.ws_message("echo_ping", Frame())(self.on_ping)
        registrar.ws_server_message("echo_pong", Frame, "The answer to a ping.")
        registrar.job("idle", self.idle)
        registrar.provide(ECHO, "hello")
        registrar.report("gadgets", lambda: {"weather_example": ["barometer"], "echo_example": ["bell"]})

    async def on_ping(self, connection, message) -> None:
        pass

    async def idle(self, context) -> None:
        await asyncio.Event().wait()


async def test_a_service_reports_what_it_loaded_and_skipped(aiohttp_client, make_config):
    from gateway.plugins import installed_plugins

    spec = ServiceSpec(id="mixed", name="Mixed", port=0, plugins=("auth_tokens", "weather_example", "frontend",
                                                                  "hologram"), planned=("hologram",))
    config = make_config({"plugins.frontend": {"enabled": False}})
    client = await aiohttp_client(create_app("mixed", config, spec=spec))
    assert (await client.get("/api/v1/introspection")).status == 401
    refused = await client.get("/api/v1/introspection", headers={"Authorization": "Bearer nope"})
    assert refused.status == 401 and (await refused.json())["errorType"] == "unauthorized"

    answer = await client.get("/api/v1/introspection", headers=PEER)
    assert answer.status == 200
    body = Introspection().load(await answer.json())  # exactly the documented shape
    assert body["service"] == "mixed" and body["name"] == "Mixed" and body["migrations_error"] is None
    weather = next(plugin for plugin in body["plugins"] if plugin["name"] == "weather_example")
    assert weather["distribution"] == "gateway-weather-plugin-example" and weather["version"] == "0.3.1"
    assert weather["routes"] == [{"method": "GET", "path": "/api/v1/weather-example", "name": "weather_example"}]
    assert weather["settings_section"] == "plugins.weather_example" and weather["settings_keys"] == ["enabled"]
    assert [plugin["name"] for plugin in body["plugins"]] == ["auth_tokens", "weather_example"]
    assert body["skipped"] == [
        {"name": "frontend", "reason": "disabled by configuration ([plugins.frontend] enabled = false)"},
        {"name": "hologram", "reason": "planned: not built yet"}]

    # Inline plugins: WebSocket types both ways, jobs, contracts and a reported section.
    tokens = installed_plugins(["auth_tokens"])["auth_tokens"]
    inline = await aiohttp_client(create_app("inline", make_config(), plugins=[tokens, EchoPlugin()]))
    body = await (await inline.get("/api/v1/introspection", headers=PEER)).json()
    echo = next(plugin for plugin in body["plugins"] if plugin["name"] == "echo_example")
    assert (echo["ws_types"], echo["ws_server_types"], echo["jobs"]) == (["echo_ping"], ["echo_pong"], ["idle"])
    assert echo["provides"] == ["echo.greeting"] and echo["depends"] == ["auth_tokens"]
    assert echo["reported"] == {"gadgets": ["bell"]} and echo["distribution"] == ""


async def test_the_ai_core_reports_its_tools_and_applied_migrations(aiohttp_client, config):
    client = await aiohttp_client(create_app("ai-core", config, spec=get_service("ai-core")))
    body = await (await client.get("/api/v1/introspection", headers=PEER)).json()
    plugins = {plugin["name"]: plugin for plugin in body["plugins"]}
    assert plugins["ai_core"]["migrations"][:3] == ["001_create_model_tables", "002_create_tool_calls",
                                                    "003_drop_conversation_turns"]
    assert {"get_current_time", "search_messages"} <= set(plugins["ai_core"]["reported"]["tools"])
    assert plugins["knowledge_tools"]["reported"]["tools"] == ["search_knowledge"]
    assert plugins["reminder_tools"]["reported"]["tools"]
