"""The offline default agent, in English and Chinese: greetings, the time and date, help, tools
that plugins registered with example phrases, and a plain notice when it cannot help."""
import re

import pytest

from tests.ai_core.conftest import ALICE, read_events, text_of
from tests.ai_core.tool_plugin import LampToolsPlugin


async def ask(client, text):
    events = await read_events(await client.post("/api/v1/chat/stream", headers=ALICE,
                                                 json={"text": text, "session_id": "s"}))
    assert events[-1]["type"] == "done" and events[-1]["model"] == "offline-agent"
    assert events[-1]["text"] == text_of(events)
    return events


@pytest.mark.parametrize("text, expected", [
    ("Hello!", "Hello! I'm your assistant"),
    ("hi there", "Hello! I'm your assistant"),
    ("你好", "你好！我是你的助手"),
    ("thank you so much", "You're welcome"),
    ("谢谢你", "不客气"),
])
async def test_greetings_and_thanks(ai_core, text, expected):
    events = await ask(ai_core, text)
    assert events[-1]["text"].startswith(expected)
    assert not any(e["type"] == "system_info" for e in events)


@pytest.mark.parametrize("text, pattern", [
    ("What time is it?", r"^It is \d\d:\d\d on \w+day, \d{4}-\d\d-\d\d \(UTC\)\.$"),
    ("what's the date today", r"^It is \d\d:\d\d on \w+day"),
    ("现在几点了？", r"^现在是 \d{4}年\d+月\d+日 星期.，\d\d:\d\d（UTC）。$"),
    ("今天星期几", r"^现在是 \d{4}年"),
])
async def test_time_and_date_through_the_time_tool(ai_core, text, pattern):
    events = await ask(ai_core, text)
    assert re.match(pattern, events[-1]["text"]), events[-1]["text"]
    assert [e["status"] for e in events if e["type"] == "tool_progress"] == ["started", "completed"]
    calls = await (await ai_core.get("/api/v1/tools/calls", headers={"Authorization": "Bearer test-service-token"})).json()
    assert calls["calls"][0]["model"] == "offline-agent" and calls["calls"][0]["user_id"] == "user_alice"


async def test_help_lists_what_the_registered_tools_offer(make_ai_core):
    client = await make_ai_core(LampToolsPlugin())
    english = (await ask(client, "what can you do?"))[-1]["text"]
    assert "Switch on the lamp in a room" in english and "what time is it" in english
    chinese = (await ask(client, "你能做什么"))[-1]["text"]
    assert chinese.startswith("我是内置的离线助手") and "开灯" in chinese


async def test_plugin_tools_are_used_with_their_example_phrases(make_ai_core):
    client = await make_ai_core(LampToolsPlugin())
    assert (await ask(client, "please turn on the lamp in the bedroom"))[-1]["text"] == "The lamp in the bedroom is on."
    assert (await ask(client, "打开在卧室的灯"))[-1]["text"] == "卧室的灯已打开。"
    # Without the argument it asks, instead of guessing.
    asked = (await ask(client, "switch on the light"))[-1]["text"]
    assert "room" in asked and not any(e["type"] == "tool_progress" for e in await ask(client, "switch on the light"))


@pytest.mark.parametrize("text, language_marker", [
    ("Write me a poem about the sea", "No language model is configured"),
    ("给我写一首关于大海的诗", "尚未配置语言模型"),
])
async def test_what_it_cannot_do_it_says_plainly(ai_core, text, language_marker):
    events = await ask(ai_core, text)
    notice = next(e for e in events if e["type"] == "system_info")
    assert notice["level"] == "warning" and notice["action"] == "configure_model"
    assert language_marker in notice["message"] and "OPENAI_BASE_URL" in notice["message"]
    assert events[-1]["finish_reason"] == "no_model"
    assert text not in events[-1]["text"]  # not an echo
