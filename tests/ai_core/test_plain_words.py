"""The assistant speaks to people in plain words: a table of what people say (English and
Chinese; every kind of tool, help, greetings, questions it cannot answer; as the administrator
and as another person), said over /ws/chat to a real gateway in front of a real AI core (with
the device, reminder, automation and knowledge tools; the IoT service behind the gateway), once
with no language model and once with one (a local server speaking the OpenAI protocol that calls
the tools). Each reply, each progress line, each notice and each stored message must hold no
tool machinery: no tool's name, no argument's name, no "ISO 8601", no setting's variable name,
no `backticks`."""
from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass

import pytest
from aiohttp import web

from gateway.app import create_app
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.ai_core.agent import best_match
from plugins.ai_core.tools import ToolRegistry
from plugins.auth import auth_plugin, tokens_plugin
from plugins.automation import plugin as automation_plugin
from plugins.automation.assistant import add_automation_tools
from plugins.automation.assistant import tools_plugin as automation_tools_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.iot.assistant import add_device_tools
from plugins.iot.assistant import tools_plugin as device_tools_plugin
from plugins.iot.gateway import plugin as devices_plugin
from plugins.iot.service import plugin as iot_plugin
from plugins.knowledge.assistant import add_search_knowledge
from plugins.knowledge.assistant import tools_plugin as knowledge_tools_plugin
from plugins.notifications import plugin as notifications_plugin
from plugins.reminders import plugin as reminders_plugin
from plugins.reminders.assistant import add_reminder_tools
from plugins.reminders.assistant import tools_plugin as reminder_tools_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.webhooks import plugin as webhooks_plugin
from tests.devices.conftest import ADMIN, ALICE, SERVICE, following
from tests.support.fake_openai import route_to_model
from tests.support.servers import free_port

HELP, TOOL, ASK, CHAT, UNKNOWN = "help", "tool", "ask", "chat", "unknown"


@dataclass(frozen=True)
class Row:
    text: str
    kind: str            # what the reply is: help, a tool's answer, a question back, small talk, unknown
    expect: str = ""     # words the offline agent's reply holds


# Per person and language, said in this order in one session of their own.
TABLE: dict[tuple[str, str], list[Row]] = {
    ("person", "en"): [
        Row("help", HELP, "Lights and devices"), Row("what can you do?", HELP, "Reminders"),
        Row("hello", CHAT, "Hello"), Row("thanks", CHAT, "welcome"),
        Row("what time is it", TOOL, "It is"), Row("what day is it today", TOOL, "It is"),
        Row("turn on the living room light", TOOL, "living room"), Row("set the bedroom AC to 24 degrees", TOOL, "24"),
        Row("is the front door locked?", TOOL, "door"), Row("list my devices", TOOL, "device"),
        Row("turn off all the lights", TOOL, "light"), Row("open the curtains", TOOL, "urtain"),
        Row("what's the temperature in the bedroom", TOOL, "°C"), Row("what is the humidity in the bedroom", TOOL, "%"),
        Row("lock the front door", TOOL, "ock"), Row("hi", CHAT, "Hello"),
        Row("how humid is it in the bedroom", TOOL, "%"),
        Row("remind me to call mom tomorrow at 9am", TOOL, "call mom"),
        Row("every weekday remind me to stretch at 3pm", TOOL, "stretch"),
        Row("what are my reminders", TOOL, "call mom"), Row("cancel the reminder to call mom", TOOL, "call mom"),
        Row("show me my reminders", TOOL, "stretch"),
        Row("list my automations", TOOL), Row("run the movie night scene", TOOL, "movie night"),
        Row("search my notes for the warranty", TOOL), Row("search my messages for curtains", TOOL, "curtains"),
        Row("set a reminder", ASK, "for example"),
        Row("write me a poem about the sea", UNKNOWN), Row("what is the capital of France", UNKNOWN),
    ],
    ("person", "zh"): [
        Row("帮助", HELP, "灯和设备"), Row("你能做什么", HELP, "提醒"), Row("你好", CHAT, "你好"), Row("谢谢", CHAT, "不客气"),
        Row("现在几点", TOOL, "现在是"), Row("今天星期几", TOOL, "星期"),
        Row("打开客厅的灯", TOOL, "客厅"), Row("把卧室空调调到24度", TOOL, "24"), Row("门锁了吗", TOOL, "门"),
        Row("我有哪些设备", TOOL, "设备"), Row("窗帘拉开一半", TOOL, "窗帘"), Row("卧室温度多少", TOOL, "°C"),
        Row("锁门", TOOL, "锁"), Row("嗨", CHAT, "你好"), Row("列出我的设备", TOOL, "设备"),
        Row("明天早上九点提醒我给妈妈打电话", TOOL, "给妈妈打电话"), Row("每天晚上十点提醒我吃药", TOOL, "吃药"),
        Row("我有哪些提醒", TOOL, "给妈妈打电话"), Row("取消给妈妈打电话的提醒", TOOL, "给妈妈打电话"),
        Row("看看我的提醒", TOOL, "吃药"),
        Row("我有哪些自动化", TOOL), Row("执行回家模式", TOOL, "回家模式"),
        Row("在知识库里找保修期", TOOL), Row("搜索我的消息：窗帘", TOOL, "窗帘"),
        Row("给我写一首关于大海的诗", UNKNOWN), Row("法国的首都是哪里", UNKNOWN),
    ],
    ("admin", "en"): [
        Row("help", HELP, "Time and date"), Row("write me a poem about the sea", UNKNOWN),
        Row("tell me a joke", UNKNOWN), Row("turn on the bedroom light", TOOL, "bedroom"),
        Row("what time is it", TOOL, "It is"), Row("show my reminders", TOOL),
    ],
    ("admin", "zh"): [
        Row("帮助", HELP, "时间和日期"), Row("讲个笑话", UNKNOWN), Row("天空为什么是蓝的", UNKNOWN),
        Row("关掉卧室的灯", TOOL, "卧室"), Row("湿度多少", TOOL), Row("今天几号", TOOL, "现在是"),
        Row("谢谢你", CHAT, "不客气"),
    ],
}
HEADERS = {"person": ALICE, "admin": ADMIN}
ANYTHING = {"en": "Or just ask me anything.", "zh": "也可以直接问我任何问题。"}
MODEL_SAYS = {"en": "All set.", "zh": "好了。"}
MODEL_CHATS = {"en": "Happy to help with that.", "zh": "乐意帮忙。"}


def test_the_table_is_long_enough():
    assert sum(len(rows) for rows in TABLE.values()) >= 60


def offline_tools() -> ToolRegistry:
    """The same tools, to script the model (it calls what the person asked for)."""
    registry = ToolRegistry()
    add_device_tools(registry)
    add_reminder_tools(registry)
    add_automation_tools(registry)
    add_search_knowledge(registry)
    from plugins.ai_core.builtin_tools import register_builtin_tools
    register_builtin_tools(registry, "UTC")
    return registry


def machinery(registry: ToolRegistry) -> re.Pattern:
    """What no person should read: a tool's or an argument's name made of words joined by _,
    ISO 8601, a setting's variable name (OPENAI_BASE_URL), a pair of backticks."""
    names = {tool.name for tool in registry.all() if "_" in tool.name}  # not `remember`, a word as well
    names |= {argument for tool in registry.all() for argument in tool.parameters.get("properties", {})
              if "_" in argument}
    words = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    return re.compile(rf"\b(?:{words})\b|ISO ?8601|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|`[^`\n]*`")


class ToolCallingModel:
    """A model on the OpenAI protocol: to the person's words it calls the tool the offline agent
    would choose, with the arguments it would read; to a tool's result it answers in a short
    sentence; to anything else it chats."""

    def __init__(self, registry: ToolRegistry):
        self.registry = registry
        self.url = ""
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.completions)
        self.calls = 0

    @staticmethod
    def chunk(delta: dict, finish_reason: str | None = None) -> bytes:
        payload = {"id": "chatcmpl-words", "object": "chat.completion.chunk", "created": 1, "model": "words",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        messages = body["messages"]
        user = next(m for m in reversed(messages) if m["role"] == "user")["content"]
        language = "zh" if re.search(r"[\u4e00-\u9fff]", user) else "en"
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        match = best_match(user, self.registry.all())
        if messages[-1]["role"] == "user" and match is not None and match.tool is not None and body.get("tools"):
            arguments = match.tool.parse_arguments(user) if match.tool.parse_arguments else {}
            self.calls += 1
            await response.write(self.chunk({"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": f"call_{self.calls}", "type": "function",
                 "function": {"name": match.tool.name, "arguments": json.dumps(arguments, ensure_ascii=False)}}]}))
            await response.write(self.chunk({}, "tool_calls"))
        else:
            said = MODEL_SAYS if messages[-1]["role"] == "tool" else MODEL_CHATS
            await response.write(self.chunk({"role": "assistant", "content": said[language]}))
            await response.write(self.chunk({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


@pytest.fixture
async def stack(aiohttp_server, aiohttp_client, make_config, database_url):
    """The IoT service, the gateway (chat, devices, reminders, automation; no knowledge plugin:
    a search of notes is answered as not available) and the AI core with those tools."""
    iot = await aiohttp_server(create_app("iot-debug-service", make_config({
        "database.url": database_url, "plugins.iot": {"tick_seconds": 3600.0}}), plugins=[tokens_plugin, iot_plugin]))
    gateway_port = free_port()
    ai_core = await aiohttp_server(create_app("ai-core", make_config({
        "database.url": database_url, "peers.gateway_url": f"http://127.0.0.1:{gateway_port}",
        "auth.chat_for_all_users": True,
        "plugins.ai_core": {"first_token_timeout": 10, "idle_timeout": 20, "tool_timeout": 20, "timezone": "UTC"}}),
        plugins=[tokens_plugin, ai_core_plugin, device_tools_plugin, reminder_tools_plugin, automation_tools_plugin,
                 knowledge_tools_plugin]))
    ai_core_url = str(ai_core.make_url("")).rstrip("/")
    config = make_config({
        "database.url": database_url, "peers.iot_service_url": str(iot.make_url("")).rstrip("/"),
        "peers.ai_core_url": ai_core_url, "auth.chat_for_all_users": True,
        "plugins.devices": {"feed_lease_seconds": 0.6, "feed_retry_min": 0.05, "feed_retry_max": 0.3,
                            "timeout": 3.0}})
    gateway_app = create_app("gateway", config, plugins=[
        tokens_plugin, auth_plugin, sessions_plugin, files_plugin, notifications_plugin, ai_core_client_plugin,
        chat_plugin, devices_plugin, webhooks_plugin, automation_plugin, reminders_plugin])
    gateway = await aiohttp_client(await aiohttp_server(gateway_app, port=gateway_port))
    await following(gateway)
    return gateway, ai_core_url


async def say(ws, text: str) -> list[dict]:
    """The frames of one turn, up to its stream_end."""
    await ws.send_json({"type": "message", "content": text})
    frames = []
    while True:
        frame = await asyncio.wait_for(ws.receive_json(), 30)
        frames.append(frame)
        assert frame["type"] != "error", frame
        if frame["type"] == "stream_end":
            return frames


def token_of(headers: dict) -> str:
    return headers["Authorization"].split(" ", 1)[1]


@pytest.mark.parametrize("with_model", [False, True], ids=["no model", "a model"])
async def test_every_reply_is_in_plain_words(stack, with_model, aiohttp_server):
    gateway, ai_core_url = stack
    registry = offline_tools()
    forbidden = machinery(registry)
    if with_model:
        model = ToolCallingModel(registry)
        server = await aiohttp_server(model.app)
        await route_to_model(ai_core_url, str(server.make_url("/v1")).rstrip("/"), SERVICE, "words")
    failures: list[str] = []

    def check(condition: bool, row: Row, who: str, what: str) -> None:
        if not condition:
            failures.append(f"[{who}] {row.text!r}: {what}")

    for (person, language), rows in TABLE.items():
        who = f"{person}/{language}"
        session_id = f"words-{person}-{language}"
        headers = HEADERS[person]
        told = 0
        ws = await gateway.ws_connect(f"/ws/chat?token={token_of(headers)}&session_id={session_id}&client_id=c")
        try:
            for row in rows:
                frames = await say(ws, row.text)
                reply = frames[-1]["text"]
                progress = [f["tool_progress"] for f in frames if f["type"] == "tool_progress"]
                notices = [f["system_info"] for f in frames if f["type"] == "system_info"]
                for said in [reply, *(p["message"] for p in progress), *(n["message"] for n in notices)]:
                    found = forbidden.search(said)
                    check(found is None, row, who, f"{found and found.group(0)!r} in {said!r}")
                check(bool(reply.strip()), row, who, "an empty reply")
                for line in progress:
                    check(bool(line["message"]) and line["tool_name"] in {t.name for t in registry.all()}, row, who,
                          f"progress {line}")
                if row.kind == HELP:
                    check(reply.startswith("Here is what you can ask me:" if language == "en" else "你可以这样跟我说"),
                          row, who, f"help reads {reply!r}")
                    check((ANYTHING[language] in reply) == with_model, row, who, "ask-me-anything only with a model")
                    # Only what works now: this gateway runs devices, reminders and automation,
                    # and no knowledge bases.
                    offered = ["Lights and devices", "Reminders", "Scenes and automations"] if language == "en" \
                        else ["灯和设备", "提醒", "场景和自动化"]
                    check(all(topic in reply for topic in offered), row, who, f"help lacks a topic: {reply!r}")
                    check(("Your documents and notes" if language == "en" else "文档和笔记") not in reply, row, who,
                          "help offers the knowledge bases this gateway does not have")
                    check(not progress and not notices, row, who, "help ran a tool or told something")
                if row.kind == TOOL:
                    check(bool(progress) and progress[0]["status"] == "started", row, who, "no progress line")
                    check(all(p["status"] != "failed" for p in progress), row, who, f"a tool failed: {progress}")
                    if language == "zh":
                        check(all(re.search(r"[\u4e00-\u9fff]", p["message"]) for p in progress), row, who,
                              f"progress not in Chinese: {progress}")
                if with_model:
                    if row.kind in (TOOL,):
                        check(reply == MODEL_SAYS[language], row, who, f"the model's reply is {reply!r}")
                    check(not notices, row, who, f"notices with a model: {notices}")
                    continue
                if row.expect:
                    check(row.expect in reply, row, who, f"{row.expect!r} not in {reply!r}")
                if row.kind == ASK:
                    check(not progress, row, who, "a question back ran a tool")
                if row.kind == UNKNOWN:
                    check(frames[-1]["finish_reason"] == "no_model", row, who, "not finished as no_model")
                    check(reply.count("。" if language == "zh" else ". ") <= 2 and len(reply) < 160, row, who,
                          f"not short: {reply!r}")
                    if person == "admin":
                        told += len(notices)
                        check(all("/model-config" in n["message"] and n["action"] == "configure_model"
                                  for n in notices), row, who, f"the notice has no link: {notices}")
                    else:
                        check(not notices, row, who, f"a person was told how to configure: {notices}")
                        check(("administrator" if language == "en" else "管理员") in reply, row, who,
                              "a person is not told to ask the administrator")
                elif not with_model:
                    check(not notices, row, who, f"notices: {notices}")
            if person == "admin" and not with_model:
                assert told == 1, f"[{who}] the administrator was told {told} times in one session"
        finally:
            await ws.close()
        # What the session keeps: no machinery either.
        response = await gateway.get(f"/api/v1/sessions/{session_id}/messages", headers=headers,
                                     params={"limit": 200})
        assert response.status == 200, await response.text()
        stored = (await response.json())["messages"]
        assert len(stored) >= 2 * len(rows), f"[{who}] {len(stored)} messages stored"
        for message in stored:
            found = forbidden.search(message["content"] or "")
            if found:
                failures.append(f"[{who}] stored {message['role']} message holds {found.group(0)!r}: "
                                f"{message['content']!r}")
    assert not failures, "\n".join(failures)


def test_every_tool_of_the_project_says_what_it_does_in_both_languages():
    """What a person reads of a tool is its owner's: a topic, things to say and progress words,
    in English and Chinese, for every tool the feature plugins register."""
    from plugins.memory.settings import MemoryAssistantSettings
    from plugins.memory.tools import add_memory_tools

    registry = offline_tools()
    add_memory_tools(registry, None, MemoryAssistantSettings(), "memory_assistant")  # type: ignore[arg-type]
    forbidden = machinery(registry)
    for tool in registry.all():
        assert set(tool.topic) >= {"en", "zh"}, tool.name
        assert callable(tool.progress) or set(tool.progress) >= {"en", "zh"}, tool.name
        for language in ("en", "zh"):
            words = tool.progress_words({}, language)
            assert words and forbidden.search(words) is None, (tool.name, words)
            for example in tool.help.get(language, []):
                assert forbidden.search(example) is None, (tool.name, example)
    with_help = {tool.name for tool in registry.all() if tool.help.get("en") and tool.help.get("zh")}
    assert len(with_help) >= len(registry.all()) - 1  # completing a reminder is shown with cancelling it
