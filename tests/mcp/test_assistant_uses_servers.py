"""The assistant uses MCP servers (docs/mcp.md): the administrator adds a server, its tools join
the assistant's as `<server>__<tool>` (only the allowed ones), a chat turn whose model calls one
gets its answer and leaves a tool-call record; a stdio server that dies is started again; an HTTP
server gets its headers and is reached only where the egress policy allows."""
from __future__ import annotations

import pytest

from tests.ai_core.conftest import configure, read_events, text_of

from .conftest import ADMIN, ALICE, SERVICE, server_state, stdio_server, until_state, url_of

pytestmark = pytest.mark.slow


async def turn(ai_core, text: str = "go") -> list[dict]:
    response = await ai_core.post("/api/v1/chat/stream", headers=SERVICE,
                                  json={"user_id": "user_alice", "session_id": "s1", "text": text})
    return await read_events(response)


async def use_model(ai_core, provider, tool: str, arguments: dict) -> None:
    provider.tool_arguments[tool] = arguments
    await configure(ai_core, provider, {"caller": f"call-{tool}"}, chain=["caller"])


async def test_a_stdio_servers_allowed_tools_join_and_a_turn_calls_one(make_ai_core, provider):
    ai_core = await make_ai_core()
    response = await ai_core.post("/api/v1/mcp-servers", headers=ADMIN, json=stdio_server())
    assert response.status == 201, await response.text()
    server = await until_state(ai_core, "sample", "connected")
    assert server["status"]["tools"] == ["sample__add", "sample__setting", "sample__stop"]
    assert server["env"] == {"COLOR": "****"}  # secrets are not shown
    listed = {tool["name"] for tool in (await (await ai_core.get("/api/v1/tools", headers=ALICE)).json())["tools"]}
    assert {"sample__add", "sample__setting"} <= listed and "sample__secret" not in listed

    await use_model(ai_core, provider, "sample__add", {"a": 2, "b": 3})
    events = await turn(ai_core)
    assert "The tool said:" in text_of(events) and "5" in text_of(events), events
    calls = await (await ai_core.get("/api/v1/tools/calls", params={"tool_name": "sample__add"},
                                     headers=ADMIN)).json()
    assert calls["calls"][0]["status"] == "completed" and calls["calls"][0]["arguments"] == {"a": 2, "b": 3}
    assert calls["calls"][0]["user_id"] == "user_alice"

    # The environment the administrator gave reaches the process; a masked value sent back keeps it.
    body = {**stdio_server(), "env": server["env"], "timeout_seconds": 20}
    response = await ai_core.put("/api/v1/mcp-servers/sample", headers=ADMIN, json=body)
    assert response.status == 200, await response.text()
    await until_state(ai_core, "sample", "connected")
    await use_model(ai_core, provider, "sample__setting", {"name": "COLOR"})
    assert "blue" in text_of(await turn(ai_core))

    response = await ai_core.delete("/api/v1/mcp-servers/sample", headers=ADMIN)
    assert response.status == 200, await response.text()
    listed = {tool["name"] for tool in (await (await ai_core.get("/api/v1/tools", headers=ALICE)).json())["tools"]}
    assert not any(name.startswith("sample__") for name in listed), listed


async def test_a_stdio_server_that_dies_is_started_again(make_ai_core, provider):
    ai_core = await make_ai_core()
    response = await ai_core.post("/api/v1/mcp-servers", headers=ADMIN, json=stdio_server())
    assert response.status == 201, await response.text()
    await until_state(ai_core, "sample", "connected")

    await use_model(ai_core, provider, "sample__stop", {})
    await turn(ai_core)  # the process exits in the middle of the call
    calls = await (await ai_core.get("/api/v1/tools/calls", params={"tool_name": "sample__stop"},
                                     headers=ADMIN)).json()
    assert calls["calls"][0]["status"] == "failed"
    server = await until_state(ai_core, "sample", "connected", restarts=1)
    assert server["status"]["tools"] == ["sample__add", "sample__setting", "sample__stop"]

    await use_model(ai_core, provider, "sample__add", {"a": 20, "b": 22})
    assert "42" in text_of(await turn(ai_core))


async def test_an_http_server_gets_its_headers_through_the_egress_policy(make_ai_core, provider,
                                                                         http_sample_server):
    body = {"name": "remote", "transport": "http", "url": f"http://127.0.0.1:{http_sample_server}/mcp",
            "headers": {"X-Team": "blue-team"}, "allowed_tools": ["header", "add"]}
    refused = await make_ai_core()  # loopback is not allowed by default
    ai_core = await make_ai_core(overrides={"plugins.ai_core.mcp_hosts": [f"127.0.0.1:{http_sample_server}"]})
    response = await refused.post("/api/v1/mcp-servers", headers=ADMIN, json=body)
    assert response.status == 201, await response.text()
    server = await until_state(refused, "remote", "failed")
    assert "loopback" in server["status"]["last_error"], server
    assert server["status"]["tools"] == []

    # Another instance on the same table follows what the first one saved.
    server = await until_state(ai_core, "remote", "connected")
    assert server["status"]["tools"] == ["remote__add", "remote__header"]
    assert server["headers"] == {"X-Team": "****team"}  # masked: the last four characters
    await use_model(ai_core, provider, "remote__header", {"name": "x-team"})
    assert "blue-team" in text_of(await turn(ai_core))


async def test_the_gateway_publishes_the_admin_routes_with_the_spec_errors(make_ai_core, make_gateway):
    ai_core = await make_ai_core()
    gateway = await make_gateway(url_of(ai_core))
    path = "/api/v1/admin/mcp-servers"
    for bad in ({}, {"name": "Bad Name", "transport": "stdio", "command": "x"},
                {"name": "a__b", "transport": "stdio", "command": "x"},
                {"name": "ok", "transport": "stdio"}, {"name": "ok", "transport": "http", "url": "file:///etc"},
                {"name": "ok", "transport": "carrier-pigeon"},
                {"name": "ok", "transport": "http", "url": "http://x.example", "headers": {"X": "a\r\nb"}}):
        response = await gateway.post(path, headers=ADMIN, json=bad)
        answer = await response.json()
        assert response.status == 400 and answer["errorType"] and answer["hint"] is not None, (bad, answer)
    assert (await gateway.get(path, headers=ALICE)).status == 403
    assert (await gateway.get(path)).status == 401

    disabled = stdio_server("off", enabled=False)
    response = await gateway.post(path, headers=ADMIN, json=disabled)
    assert response.status == 201, await response.text()
    again = await gateway.post(path, headers=ADMIN, json=disabled)
    assert again.status == 409 and (await again.json())["errorType"] == "mcp_server_exists"
    state = await server_state(gateway, "off", path=path)
    assert state["status"]["state"] == "disabled" and state["transport"] == "stdio"

    mismatch = await gateway.put(path + "/other", headers=ADMIN, json=disabled)
    assert mismatch.status == 400
    assert (await gateway.delete(path + "/off", headers=ADMIN)).status == 200
    missing = await gateway.delete(path + "/off", headers=ADMIN)
    assert missing.status == 404 and (await missing.json())["errorType"] == "mcp_server_not_found"
    assert (await (await gateway.get(path, headers=ADMIN)).json())["total"] == 0


async def test_the_operator_names_the_programs_a_stdio_server_may_start(make_ai_core):
    ai_core = await make_ai_core(overrides={"plugins.ai_core": {"timezone": "UTC", "mcp_commands": ["true"]}})
    response = await ai_core.post("/api/v1/mcp-servers", headers=ADMIN, json=stdio_server())
    answer = await response.json()
    assert response.status == 400 and answer["errorType"] == "mcp_command_not_allowed", answer
    assert "true" in answer["hint"]
    response = await ai_core.post("/api/v1/mcp-servers", headers=ADMIN, json=stdio_server(command="true"))
    assert response.status == 201, await response.text()
    server = await until_state(ai_core, "sample", "failed")  # `true` exits at once: no MCP server
    assert server["status"]["last_error"]
