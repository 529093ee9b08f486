"""The function-calling loop with a model: tool-call fragments joined, the tool run with
progress events, the result sent back to the model, and every call recorded for the console;
the search_messages tool asking a real gateway for the person's stored messages."""
import pytest

from gateway.app import create_app
from gateway.context import get_context
from plugins.auth import tokens_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.sessions.contract import CONVERSATIONS
from tests.ai_core.conftest import ADMIN, ALICE, SERVICE, configure, read_events, text_of
from tests.ai_core.tool_plugin import LampToolsPlugin
from tests.support.servers import free_port


async def test_a_tool_call_loop_runs_the_tool_and_records_it(ai_core, provider):
    await configure(ai_core, provider, {"toolsy": "tools"}, chain=["toolsy"])
    response = await ai_core.post("/api/v1/chat/stream", headers=SERVICE, json={
        "user_id": "user_alice", "session_id": "s-42", "text": "what time is it in Shanghai?"})
    events = await read_events(response)
    progress = [e for e in events if e["type"] == "tool_progress"]
    assert [(p["tool_name"], p["status"]) for p in progress] == [
        ("get_current_time", "started"), ("get_current_time", "completed")]
    assert progress[-1]["progress"] == 1.0 and progress[0]["call_id"] == "call_time1"
    # What the person reads: the tool's own words in their language, never its name.
    assert [p["message"] for p in progress] == ["Checking the time…", "Checking the time… done"]
    first, second = provider.requests
    assert {t["function"]["name"] for t in first["body"]["tools"]} >= {"get_current_time", "search_messages"}
    assistant, tool_message = second["body"]["messages"][-2:]
    assert assistant["tool_calls"][0]["function"] == {"name": "get_current_time",
                                                     "arguments": '{"timezone": "Asia/Shanghai"}'}
    assert tool_message["tool_call_id"] == "call_time1"
    assert "+08:00" in tool_message["content"]
    assert text_of(events).startswith("In Shanghai it is ") and events[-1]["model"] == "toolsy"

    calls = await (await ai_core.get("/api/v1/tools/calls", headers=ADMIN)).json()
    assert calls["total"] == 1 and calls["page"] == 1
    record = calls["calls"][0]
    assert record["tool_name"] == "get_current_time" and record["status"] == "completed"
    assert record["arguments"] == {"timezone": "Asia/Shanghai"}
    assert record["result"]["timezone"] == "Asia/Shanghai" and record["error"] is None
    assert (record["session_id"], record["user_id"], record["model"]) == ("s-42", "user_alice", "toolsy")
    assert record["duration_ms"] >= 0 and record["created_at"]


async def test_a_model_that_keeps_calling_tools_is_stopped_in_plain_words(make_ai_core, ai_settings, provider):
    client = await make_ai_core(overrides={"plugins.ai_core": {**ai_settings, "max_tool_rounds": 1}})
    await configure(client, provider, {"toolsy": "tools"}, chain=["toolsy"])
    events = await read_events(await client.post("/api/v1/chat/stream", headers=ALICE, json={"text": "现在上海几点？"}))
    progress = [e["message"] for e in events if e["type"] == "tool_progress"]
    assert progress == ["正在看时间…", "正在看时间… 完成"]
    notice, = [e for e in events if e["type"] == "system_info"]
    assert notice["message"] == "回答用了太多步骤，在第 1 步停下了。" and events[-1]["finish_reason"] == "tool_limit"


async def test_records_filter_page_and_statistics(make_ai_core):
    client = await make_ai_core(LampToolsPlugin())
    for text in ["turn on the lamp in the kitchen", "turn on the lamp in the hall", "heat the house"]:
        events = await read_events(await client.post("/api/v1/chat/stream", headers=ALICE, json={"text": text}))
        assert events[-1]["model"] == "offline-agent"
    failed = events
    assert [(e["status"]) for e in failed if e["type"] == "tool_progress"] == ["started", "failed"]
    # The error is the record's (and a model's) to read; the person is told it did not work.
    assert "the heater is on fire" not in text_of(failed) and "overheat" not in text_of(failed)
    assert text_of(failed) == "Sorry, I couldn't do that just now."

    record = (await (await client.get("/api/v1/tools/calls?tool_name=overheat", headers=ADMIN)).json())["calls"][0]
    assert "the heater is on fire" in record["error"]

    page = await (await client.get("/api/v1/tools/calls?tool_name=switch_lamp&page_size=1&page=2",
                                   headers=ADMIN)).json()
    assert page["total"] == 2 and len(page["calls"]) == 1
    assert page["calls"][0]["arguments"] == {"room": "kitchen"}  # newest first: page 2 is the older
    stats = await (await client.get("/api/v1/tools/calls/stats", headers=ADMIN)).json()
    by_tool = {t["tool_name"]: t for t in stats["tools"]}
    assert (by_tool["switch_lamp"]["count"], by_tool["switch_lamp"]["failures"]) == (2, 0)
    assert (by_tool["overheat"]["count"], by_tool["overheat"]["failures"]) == (1, 1)
    assert by_tool["switch_lamp"]["p95_duration_ms"] >= by_tool["switch_lamp"]["mean_duration_ms"] * 0.5
    assert stats["total_calls"] == 3 and stats["total_failures"] == 1
    response = await client.get("/api/v1/tools/calls?page=0", headers=ADMIN)
    assert response.status == 400

    tools = await (await client.get("/api/v1/tools", headers=ALICE)).json()
    assert {t["name"] for t in tools["tools"]} == {"get_current_time", "search_messages", "switch_lamp", "overheat",
                                                   "boil_kettle"}


async def test_reasoning_streams_as_thinking(ai_core, provider):
    await configure(ai_core, provider, {"deep": "thinker"}, chain=["deep"])
    events = await read_events(await ai_core.post("/api/v1/chat/stream", headers=ALICE, json={"text": "hm"}))
    assert events[0] == {"type": "thinking", "status": "thinking", "content": "Let me think."}
    assert events[-1]["text"] == "Thought it through."


@pytest.fixture
async def gateway_peer(aiohttp_server, make_config, postgres_server):
    """A gateway (token and sessions plugins) on a loopback port, on a database of its own, and
    the conversations it keeps."""
    name = postgres_server.create_database()
    config = make_config({"database.url": postgres_server.database_url(name)})
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin])
    server = await aiohttp_server(app)
    yield f"http://127.0.0.1:{server.port}", get_context(app).contracts.require(CONVERSATIONS)
    await server.close()
    postgres_server.drop_database(name)


async def test_search_messages_asks_the_gateway_for_the_users_own_words(make_ai_core, gateway_peer):
    gateway_url, conversations = gateway_peer
    await conversations.create_session("user_alice", "s-alice")
    await conversations.add_message("s-alice", "user_alice", "user", "I love pizza with olives")
    await conversations.add_message("s-alice", "user_alice", "assistant", "Olives on pizza, a classic.")
    await conversations.create_session("user_bob", "s-bob")
    await conversations.add_message("s-bob", "user_bob", "user", "pizza is overrated")
    ai_core = await make_ai_core(overrides={"peers.gateway_url": gateway_url})

    events = await read_events(await ai_core.post("/api/v1/chat/stream", headers=ALICE,
                                                  json={"text": "search my messages for pizza"}))
    answer = events[-1]["text"]
    assert "1 message(s)" in answer and "I love pizza with olives" in answer, answer
    assert "overrated" not in answer and "classic" not in answer
    calls = await (await ai_core.get("/api/v1/tools/calls?tool_name=search_messages", headers=ADMIN)).json()
    found = calls["calls"][0]["result"]
    assert found["count"] == 1 and found["messages"][0]["session_id"] == "s-alice"


async def test_search_messages_reports_a_gateway_it_cannot_reach(make_ai_core):
    ai_core = await make_ai_core(overrides={"peers.gateway_url": f"http://127.0.0.1:{free_port()}"})
    events = await read_events(await ai_core.post("/api/v1/chat/stream", headers=ALICE,
                                                  json={"text": "search my messages for pizza"}))
    failed = [e for e in events if e["type"] == "tool_progress" and e["status"] == "failed"]
    assert failed and failed[0]["message"] == "Searching your messages for “pizza”… that did not work"
    assert events[-1]["type"] == "done"
    calls = await (await ai_core.get("/api/v1/tools/calls", headers=ADMIN)).json()
    assert "the gateway cannot be reached" in calls["calls"][0]["error"]  # the record keeps why
