"""The offline default agent, in English and Chinese: greetings, the time and date, help, tools
that plugins registered with example phrases, and a plain notice when it cannot help; its
matching (linear, off the event loop) and the AI core's bound on a message's length."""
import random
import re
import threading

import pytest

from gateway.plugins import Plugin
from plugins.ai_core.agent import coverage
from plugins.ai_core.contract import TOOLS
from tests.ai_core.conftest import ADMIN, ALICE, read_events, text_of
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
    assert english.startswith("Here is what you can ask me:")
    assert "- Lamps: “turn on the lamp in the kitchen”" in english and "“what time is it”" in english
    # The words for a model (descriptions, names) are not the person's; a tool that says nothing
    # of itself to people (`overheat`) is not listed; with no model there is no "ask me anything".
    assert "Switch on the lamp in a room" not in english and "switch_lamp" not in english
    assert "heat the house" not in english and "ask me anything" not in english
    assert "Kettle" not in english  # its `available` check says not now
    chinese = (await ask(client, "你能做什么"))[-1]["text"]
    assert chinese.startswith("你可以这样跟我说") and "- 台灯：“打开在厨房的灯”" in chinese
    assert not any(e["type"] in ("tool_progress", "system_info") for e in await ask(client, "帮助"))


async def test_a_tool_shows_its_progress_in_the_persons_words(make_ai_core):
    client = await make_ai_core(LampToolsPlugin())
    progress = [e for e in await ask(client, "please turn on the lamp in the bedroom") if e["type"] == "tool_progress"]
    assert [(e["status"], e["tool_name"], e["message"]) for e in progress] == [
        ("started", "switch_lamp", "Switching on the lamp in the bedroom…"),
        ("running", "switch_lamp", "switching the lamp in the bedroom"),
        ("completed", "switch_lamp", "Switching on the lamp in the bedroom… done")]
    progress = [e for e in await ask(client, "打开在卧室的灯") if e["type"] == "tool_progress"]
    assert [e["message"] for e in progress if e["status"] != "running"] == ["正在打开卧室的灯…", "正在打开卧室的灯… 完成"]
    # A tool without words of its own: a general phrase, never its name.
    failed = [e for e in await ask(client, "heat the house") if e["type"] == "tool_progress"]
    assert [(e["status"], e["message"]) for e in failed] == [("started", "Working on it…"),
                                                             ("failed", "Working on it… that did not work")]


async def test_plugin_tools_are_used_with_their_example_phrases(make_ai_core):
    client = await make_ai_core(LampToolsPlugin())
    assert (await ask(client, "please turn on the lamp in the bedroom"))[-1]["text"] == "The lamp in the bedroom is on."
    assert (await ask(client, "打开在卧室的灯"))[-1]["text"] == "卧室的灯已打开。"
    # Without the argument it asks, in the person's words (not the parameter's name), instead of guessing.
    events = await ask(client, "switch on the light")
    assert events[-1]["text"] == "Tell me a little more, for example: “turn on the lamp in the kitchen”."
    assert not any(e["type"] == "tool_progress" for e in events)


@pytest.mark.parametrize("text, reply", [
    ("Write me a poem about the sea", "Sorry, I can't answer that yet: your administrator can connect a language "
                                      "model. Say “help” to see what I can do."),
    ("给我写一首关于大海的诗", "抱歉，我暂时回答不了这个问题：管理员连接语言模型之后就可以了。说“帮助”看看我能做什么。"),
])
async def test_what_it_cannot_do_it_says_in_one_sentence(ai_core, text, reply):
    events = await ask(ai_core, text)
    assert events[-1]["text"] == reply and events[-1]["finish_reason"] == "no_model"
    assert not any(e["type"] == "system_info" for e in events)  # a person cannot connect a model


async def ask_as_admin(client, text, session_id):
    events = await read_events(await client.post("/api/v1/chat/stream", headers=ADMIN,
                                                 json={"text": text, "session_id": session_id}))
    assert events[-1]["type"] == "done" and events[-1]["finish_reason"] == "no_model"
    return events[-1]["text"], [e for e in events if e["type"] == "system_info"]


async def test_the_administrator_is_told_once_a_session_how_to_connect_a_model(ai_core):
    reply, notices = await ask_as_admin(ai_core, "Write me a poem about the sea", "evening")
    assert reply == "Sorry, I can't answer that without a language model. Say “help” to see what I can do."
    assert notices == [{"type": "system_info", "level": "info", "action": "configure_model", "message":
                        "No language model is connected, so I can only do what “help” lists. Connect one on the "
                        "console's Model Config page: http://127.0.0.1:9090/model-config"}]
    assert (await ask_as_admin(ai_core, "And one about the mountains?", "evening"))[1] == []
    reply, notices = await ask_as_admin(ai_core, "给我写一首诗", "morning")  # another session: told again
    assert reply == "抱歉，没有语言模型我回答不了这个问题。说“帮助”看看我能做什么。"
    assert [n["message"] for n in notices] == [
        "还没有连接语言模型，所以我只能做“帮助”里列出的事。可以在控制台的“模型配置”页连接一个：http://127.0.0.1:9090/model-config"]


async def test_the_console_address_is_the_configured_one(make_ai_core, ai_settings):
    client = await make_ai_core(overrides={"plugins.ai_core": {**ai_settings,
                                                               "console_url": "https://console.example:9443/"}})
    notices = (await ask_as_admin(client, "Write me a poem", "s"))[1]
    assert notices[0]["message"].endswith("Model Config page: https://console.example:9443/model-config")


def longest_common_subsequence(a: list[str], b: list[str]) -> int:
    """The plain dynamic-programming table, for comparison."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for index, y in enumerate(b):
            current.append(previous[index] + 1 if x == y else max(previous[index + 1], current[-1]))
        previous = current
    return previous[-1]


def test_the_phrase_matcher_is_the_longest_common_subsequence():
    """The bit-parallel matcher (linear in the message, a C-speed pass per phrase word) agrees
    with the quadratic table it replaced."""
    chance = random.Random(7)
    for _ in range(2000):
        example = [chance.choice("abcd") for _ in range(chance.randint(1, 8))]
        text = [chance.choice("abcde") for _ in range(chance.randint(0, 40))]
        assert coverage(example, text) == pytest.approx(longest_common_subsequence(example, text) / len(example))
    assert coverage(["打", "开", "灯"], list("请打开卧室的灯")) == 1.0
    assert coverage("what is it".split(), "is it what".split()) == pytest.approx(2 / 3)


async def test_matching_a_message_runs_off_the_event_loop(make_ai_core):
    """The phrases are compared with the message, and its arguments read, on a worker thread:
    a long message never stalls the AI core's other requests."""
    threads: list[int] = []

    class RecordingExamples(dict):
        def values(self):
            threads.append(threading.get_ident())
            return super().values()

    class WatchedTools(Plugin):
        name = "watched_tools"
        depends = ("ai_core",)

        def setup(self, registrar):
            async def water(arguments, call):
                return "watered"

            def parse(text):
                threads.append(threading.get_ident())
                return {}

            registrar.context.contracts.require(TOOLS).add(
                "water_plants", "Water the plants", {"type": "object", "properties": {}}, water,
                owner=self.name, parse_arguments=parse, examples=RecordingExamples(en=["water the plants"]))

    client = await make_ai_core(WatchedTools())
    long_message = "Here is my long diary of the week. " * 800 + "Now please water the plants."
    events = await ask(client, long_message)
    assert events[-1]["text"] == "watered"
    assert len(threads) == 2 and threading.get_ident() not in threads


async def test_a_message_past_the_limit_is_413_message_too_long_at_both_doors(ai_core):
    long_text = "x" * 100_000
    response = await ai_core.post("/api/v1/chat/stream", headers=ALICE, json={"text": long_text})
    body = await response.json()
    assert response.status == 413 and body["errorType"] == "message_too_long"
    assert "32000" in body["error"] and "max_message_chars" in body["hint"]

    for messages in ([{"role": "user", "content": long_text}],
                     [{"role": "user", "content": [{"type": "text", "text": long_text}]}],
                     [{"role": "system", "content": "y" * 30_000}] +
                     [{"role": "assistant" if i % 2 else "user", "content": "z" * 30_000} for i in range(13)]):
        response = await ai_core.post("/v1/chat/completions", headers=ALICE, json={"messages": messages})
        body = await response.json()
        assert response.status == 413 and body["errorType"] == "message_too_long", body
    # Just under: answered (by the offline agent here).
    response = await ai_core.post("/v1/chat/completions", headers=ALICE,
                                  json={"messages": [{"role": "user", "content": "hello " * 5000}]})
    assert response.status == 200
