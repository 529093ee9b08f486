"""The assistant as an MCP server (docs/mcp.md): the SDK's own client, over streamable HTTP, at
the gateway's `/mcp` with a person's access token. A real gateway (devices, reminders, knowledge),
the real IoT service and the AI core with the tools, each on a loopback port: the client lists
the tools, switches a light, creates a reminder and searches a knowledge base, as that person
only; a second person sees none of it."""
from __future__ import annotations

import contextlib
import json
from typing import AsyncIterator

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.app import create_app
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core.mcp_gateway import plugin as mcp_plugin
from plugins.auth import tokens_plugin
from plugins.files import files_plugin
from plugins.iot.assistant import tools_plugin as device_tools_plugin
from plugins.iot.gateway import plugin as devices_plugin
from plugins.knowledge import plugin as knowledge_plugin
from plugins.knowledge.assistant import tools_plugin as knowledge_tools_plugin
from plugins.notifications import plugin as notifications_plugin
from plugins.reminders import plugin as reminders_plugin
from plugins.reminders.assistant import tools_plugin as reminder_tools_plugin
from tests.devices.conftest import ALICE, BOB, FAST_FEED, SERVICE, following, make_iot_service  # noqa: F401
from tests.support.servers import free_port

from .conftest import ADMIN, url_of

pytestmark = pytest.mark.slow
PERSON_TOOLS = {"operate_device", "read_device", "list_devices", "create_reminder", "list_reminders",
                "search_knowledge"}


@pytest.fixture
async def deployment(make_iot_service, make_ai_core, aiohttp_client, make_config, database_url):
    """Clients of the gateway and the AI core; the IoT service, the AI core and the gateway ask
    each other."""
    iot = await make_iot_service()
    gateway_port = free_port()
    ai_core = await make_ai_core(device_tools_plugin, reminder_tools_plugin, knowledge_tools_plugin,
                                 overrides={"peers.gateway_url": f"http://127.0.0.1:{gateway_port}"})
    config = make_config({"database.url": database_url, "peers.ai_core_url": url_of(ai_core),
                          "peers.iot_service_url": url_of(iot), "auth.chat_for_all_users": True,
                          "plugins.devices": FAST_FEED})
    app = create_app("gateway", config, plugins=[tokens_plugin, files_plugin, ai_core_client_plugin, devices_plugin,
                                                 notifications_plugin, reminders_plugin, knowledge_plugin, mcp_plugin])
    gateway = await aiohttp_client(app, server_kwargs={"port": gateway_port})
    await following(gateway)
    return gateway, ai_core


@contextlib.asynccontextmanager
async def mcp_client(gateway, person: dict) -> AsyncIterator[Client]:
    """The SDK's client at the gateway's /mcp, as an MCP host configured with a bearer token."""
    async with httpx2.AsyncClient(headers=person, timeout=httpx2.Timeout(60.0)) as http:
        async with Client(streamable_http_client(url_of(gateway) + "/mcp", http_client=http)) as client:
            yield client


def structured(result) -> dict:
    assert not result.is_error, result
    assert result.structured_content == json.loads(result.content[0].text)
    return result.structured_content


async def test_a_person_lists_and_uses_their_tools_and_another_sees_none_of_it(deployment):
    gateway, ai_core = deployment
    async with mcp_client(gateway, ALICE) as client:
        assert client.server_info.name == "assistant"
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert PERSON_TOOLS <= set(tools), sorted(tools)
        assert tools["create_reminder"].input_schema["required"] == ["title"]
        assert tools["operate_device"].annotations.destructive_hint is True

        switched = structured(await client.call_tool("operate_device", {
            "device": "living_room_light", "action": "switch", "value": True}))
        assert switched["status"] == "done" and switched["device"]["id"] == "living_room_light"
        reminder = structured(await client.call_tool("create_reminder", {
            "title": "water the plants", "remind_at": "2099-01-02T09:00:00+00:00"}))
        base = await gateway.post("/api/v1/knowledge/bases", headers=ALICE, json={"name": "Garden"})
        assert base.status == 201, await base.text()
        note = await gateway.post(f"/api/v1/knowledge/bases/{(await base.json())['id']}/documents", headers=ALICE,
                                  json={"title": "Tomatoes", "content": "Tomatoes want water every second morning."})
        assert note.status == 201, await note.text()
        found = structured(await client.call_tool("search_knowledge", {"query": "how often to water tomatoes"}))
        assert "every second morning" in json.dumps(found), found

        failed = await client.call_tool("operate_device", {"device": "the moon", "action": "switch", "value": True})
        assert failed.is_error or structured(failed)["status"] != "done"

    light = await gateway.get("/api/v1/devices/living_room_light", headers=ALICE)
    assert (await light.json())["device"]["state"]["on"] is True
    listed = await (await gateway.get("/api/v1/reminders", headers=ALICE)).json()
    assert "water the plants" in json.dumps(listed), (listed, reminder)

    async with mcp_client(gateway, BOB) as client:  # Bob: his own (empty) world
        reminders = structured(await client.call_tool("list_reminders", {}))
        assert "water the plants" not in json.dumps(reminders), reminders
        nothing = await client.call_tool("search_knowledge", {"query": "how often to water tomatoes"})
        assert "every second morning" not in json.dumps(nothing.model_dump()), nothing
    bobs_light = await gateway.get("/api/v1/devices/living_room_light", headers=BOB)
    assert (await bobs_light.json())["device"]["state"]["on"] is False

    records = await (await ai_core.get("/api/v1/tools/calls", headers=ADMIN, params={"user_id": "user_alice"})).json()
    recorded = {(call["tool_name"], call["model"]) for call in records["calls"]}
    assert {("operate_device", "mcp-client"), ("create_reminder", "mcp-client")} <= recorded, recorded


async def test_mcp_needs_a_persons_credential_and_speaks_json_rpc(deployment):
    gateway, _ = deployment
    response = await gateway.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert response.status == 401 and (await response.json())["errorType"]
    response = await gateway.post("/mcp", headers=SERVICE, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status == 403
    assert (await gateway.get("/mcp", headers=ALICE)).status == 405

    async def rpc(message) -> tuple[int, dict | None]:
        answer = await gateway.post("/mcp", headers=ALICE, json=message)
        return answer.status, (await answer.json() if answer.status == 200 else None)

    assert await rpc({"jsonrpc": "2.0", "method": "notifications/initialized"}) == (202, None)
    status, body = await rpc({"jsonrpc": "2.0", "id": 7, "method": "server/discover"})
    assert status == 200 and body["error"]["code"] == -32601 and body["id"] == 7
    status, body = await rpc([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert body["error"]["code"] == -32600
    status, body = await rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope"}})
    assert body["error"]["code"] == -32602
    status, body = await rpc({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": "x"})
    assert body["error"]["code"] == -32602
    status, body = await rpc({"jsonrpc": "2.0", "id": 4, "method": "initialize",
                              "params": {"protocolVersion": "1999-01-01"}})
    assert body["result"]["protocolVersion"] == "2025-11-25"
    bad = await gateway.post("/mcp", headers={**ALICE, "Content-Type": "application/json"}, data=b"{nope")
    assert bad.status == 400 and (await bad.json())["errorType"]
