"""The function-calling loop with a model: tool-call fragments joined, the tool run with
progress events, the result sent back to the model, and every call recorded for the console."""
from tests.ai_core.conftest import ADMIN, ALICE, SERVICE, configure, read_events, text_of
from tests.ai_core.tool_plugin import LampToolsPlugin


async def test_a_tool_call_loop_runs_the_tool_and_records_it(ai_core, provider):
    await configure(ai_core, provider, {"toolsy": "tools"}, chain=["toolsy"])
    response = await ai_core.post("/api/v1/chat/stream", headers=SERVICE, json={
        "user_id": "user_alice", "session_id": "s-42", "text": "what time is it in Shanghai?"})
    events = await read_events(response)
    progress = [e for e in events if e["type"] == "tool_progress"]
    assert [(p["tool_name"], p["status"]) for p in progress] == [
        ("get_current_time", "started"), ("get_current_time", "completed")]
    assert progress[-1]["progress"] == 1.0 and progress[0]["call_id"] == "call_time1"
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


async def test_records_filter_page_and_statistics(make_ai_core):
    client = await make_ai_core(LampToolsPlugin())
    for text in ["turn on the lamp in the kitchen", "turn on the lamp in the hall", "heat the house"]:
        events = await read_events(await client.post("/api/v1/chat/stream", headers=ALICE, json={"text": text}))
        assert events[-1]["model"] == "offline-agent"
    failed = events
    assert [(e["status"]) for e in failed if e["type"] == "tool_progress"] == ["started", "failed"]
    assert "the heater is on fire" in text_of(failed)

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
    assert {t["name"] for t in tools["tools"]} == {"get_current_time", "search_messages", "switch_lamp", "overheat"}


async def test_reasoning_streams_as_thinking(ai_core, provider):
    await configure(ai_core, provider, {"deep": "thinker"}, chain=["deep"])
    events = await read_events(await ai_core.post("/api/v1/chat/stream", headers=ALICE, json={"text": "hm"}))
    assert events[0] == {"type": "thinking", "status": "thinking", "content": "Let me think."}
    assert events[-1]["text"] == "Thought it through."


async def test_search_messages_finds_the_users_own_past_words(ai_core):
    for text in ["I love pizza with olives", "hello there"]:
        await read_events(await ai_core.post("/api/v1/chat/stream", headers=ALICE, json={"text": text}))
    await read_events(await ai_core.post("/api/v1/chat/stream", headers=SERVICE,
                                         json={"user_id": "user_bob", "text": "pizza is overrated"}))
    events = await read_events(await ai_core.post("/api/v1/chat/stream", headers=ALICE,
                                                  json={"text": "search my messages for pizza"}))
    answer = events[-1]["text"]
    assert "I love pizza with olives" in answer and "overrated" not in answer
