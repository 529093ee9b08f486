"""The assistant's automation tools (`automation_tools` in the AI core): the offline agent's
phrases in English and Chinese, which must not take the devices' or the built-in tools'
phrases, and the tools working through a real AI core asking a real gateway."""
from __future__ import annotations

import asyncio
import re

import pytest

from tests.automation.conftest import API


def offline_tools():
    """The AI core's built-in tools, the device tools, search_knowledge and the automation tools,
    as the offline agent sees them."""
    from plugins.ai_core.builtin_tools import register_builtin_tools
    from plugins.ai_core.tools import ToolRegistry
    from plugins.automation.assistant import add_automation_tools
    from plugins.iot.assistant import add_device_tools
    from plugins.knowledge.assistant import add_search_knowledge
    from plugins.reminders.assistant import add_reminder_tools

    registry = ToolRegistry()
    register_builtin_tools(registry, "UTC")
    add_search_knowledge(registry)
    add_device_tools(registry)
    add_reminder_tools(registry)
    add_automation_tools(registry)
    return registry.all()


@pytest.mark.parametrize("text, intent, arguments", [
    ("list my automations", "tool:list_automations", {}),
    ("What automations do I have?", "tool:list_automations", {}),
    ("show my automation rules", "tool:list_automations", {}),
    ("我有哪些自动化", "tool:list_automations", {}),
    ("列出我的自动化规则", "tool:list_automations", {}),
    ("run the movie night scene", "tool:run_scene", {"name": "movie night"}),
    ("Please activate the Good Morning scene", "tool:run_scene", {"name": "Good Morning"}),
    ("run the scene called reading time", "tool:run_scene", {"name": "reading time"}),
    ("start the “movie night” scene", "tool:run_scene", {"name": "movie night"}),
    ("执行回家模式", "tool:run_scene", {"name": "回家模式"}),
    ("启动离家模式", "tool:run_scene", {"name": "离家模式"}),
    ("执行场景：晚安", "tool:run_scene", {"name": "晚安"}),
    ("帮我开启睡眠模式", "tool:run_scene", {"name": "睡眠模式"}),
])
def test_the_offline_agent_understands_the_automation_phrases(text, intent, arguments):
    from plugins.ai_core.agent import best_match
    from plugins.automation.assistant import parse_run_arguments

    match = best_match(text, offline_tools())
    assert match is not None and match.intent == intent, match
    if intent == "tool:run_scene":
        assert parse_run_arguments(text) == arguments


@pytest.mark.parametrize("text, intent", [
    ("turn on the living room light", "tool:operate_device"),
    ("打开客厅的灯", "tool:operate_device"),
    ("把空调调到制冷模式", "tool:operate_device"),
    ("list my devices", "tool:list_devices"),
    ("我有哪些设备", "tool:list_devices"),
    ("what is the temperature in the bedroom", "tool:read_device"),
    ("what time is it", "tool:get_current_time"),
    ("search my notes for the boiler", "tool:search_knowledge"),
])
def test_other_tools_keep_their_phrases(text, intent):
    from plugins.ai_core.agent import best_match

    match = best_match(text, offline_tools())
    assert match is not None and match.intent == intent, match


@pytest.mark.parametrize("text", ["remind me to turn on the oven at 6", "提醒我明天早上九点给妈妈打电话",
                                  "every weekday at 7:30 remind me to take my pills", "二十分钟后提醒我关火",
                                  "list my reminders", "我有哪些提醒"])
def test_reminder_phrases_stay_the_reminders(text):
    from plugins.ai_core.agent import best_match

    match = best_match(text, offline_tools())
    assert match is not None and match.intent.startswith("tool:") and "reminder" in match.intent, match


@pytest.mark.parametrize("text, later", [
    ("every day at 7 run the good morning scene", "every"),
    ("run the movie night scene at 8pm", "at 8pm"),
    ("activate the party scene when I get home", "when"),
    ("明天早上七点执行起床模式", "明天"),
    ("如果下雨就执行关窗模式", "如果"),
])
def test_a_scene_asked_for_later_is_not_run_now(text, later):
    """run_scene acts now: words that put the scene off make it explain how to schedule it."""
    from plugins.ai_core.agent import best_match
    from plugins.automation.assistant import parse_run_arguments, summarize_run

    match = best_match(text, offline_tools())
    assert match is not None and match.intent == "tool:run_scene", match
    arguments = parse_run_arguments(text)
    assert arguments["later"] == later and arguments["name"]
    answer = summarize_run({"status": "not_now", "name": arguments["name"], "later": later},
                           "zh" if later in ("明天", "如果") else "en")
    assert "automation rule" in answer or "自动化规则" in answer


@pytest.mark.parametrize("text", ["remind me to run the movie night scene at 8", "提醒我八点执行回家模式"])
def test_a_reminder_about_a_scene_is_a_reminder(text):
    """Both tools match at full score; automation_tools registers after reminder_tools (its
    optional_depends), and the offline agent gives the tie to the first (docs/automation.md)."""
    from plugins.ai_core.agent import best_match

    match = best_match(text, offline_tools())
    assert match is not None and match.intent == "tool:create_reminder", match


def test_next_runs_are_shown_in_the_persons_zone():
    from plugins.automation.assistant import local_time, summarize_list

    assert local_time("2026-11-25T23:00:00.000Z", "Asia/Shanghai") == "2026-11-26 07:00"
    assert local_time(None, "UTC") is None
    result = {"status": "listed", "timezone": "Asia/Shanghai", "scenes": [],
              "rules": [{"name": "Wake up", "trigger_type": "time", "enabled": True,
                         "next_run_local": "2026-11-26 07:00"},
                        {"name": "Door", "trigger_type": "device_state", "enabled": False, "next_run_local": None}]}
    assert summarize_list(result, "en") == ("You have 2 automation rules and 0 scenes:\n"
                                            "- Wake up (at set times, next 2026-11-26 07:00)\n"
                                            "- Door (on a device's state, disabled)")


def test_scenes_are_found_by_the_name_as_said():
    from plugins.automation.assistant import find_scene

    scenes = [{"name": "Movie night"}, {"name": "回家模式"}, {"name": "Good morning"}, {"name": "Good night"}]
    assert find_scene(scenes, "movie night") == scenes[0]
    assert find_scene(scenes, "Movie Night scene") == scenes[0]
    assert find_scene(scenes, "回家") == scenes[1]
    assert find_scene(scenes, "回家模式") == scenes[1]
    assert find_scene(scenes, "good") is None      # two scenes: ask, do not guess
    assert find_scene(scenes, "party") is None


def token_of(headers: dict) -> str:
    return headers["Authorization"].split(" ", 1)[1]


async def ask(gateway, headers: dict, text: str) -> str:
    """The assistant's reply to one message over /ws/chat."""
    async with gateway.client.ws_connect(f"/ws/chat?token={token_of(headers)}&session_id=assistant") as ws:
        await ws.send_json({"type": "message", "content": text})
        while True:
            frame = await asyncio.wait_for(ws.receive_json(), 30)
            if frame["type"] == "stream_end":
                return frame["text"]


async def test_the_assistant_lists_automations_and_runs_a_scene_by_name(make_stack):
    stack = await make_stack()
    gateway = stack.gateway
    client = gateway.client
    await gateway.create_rule(gateway.alice, name="Wake up", trigger_type="time",
                              trigger_config={"repeat": "daily", "time": "07:00"},
                              actions=[{"type": "notify", "title": "Good morning"}])
    for name, brightness in (("Movie night", 15), ("回家模式", 90)):
        response = await client.post(f"{API}/scenes", headers=gateway.alice, json={"name": name, "actions": [
            {"type": "device", "device_id": "living_room_light", "action": "set",
             "properties": {"on": True, "brightness": brightness}}]})
        assert response.status == 201

    reply = await ask(gateway, gateway.alice, "list my automations")
    assert reply.startswith("You have 1 automation rule and 2 scenes:")
    # The next run in the person's zone (UTC here: this gateway has no profiles).
    assert re.search(r"- Wake up \(at set times, next \d{4}-\d\d-\d\d 07:00\)", reply), reply
    assert "- scene: Movie night" in reply
    reply = await ask(gateway, gateway.alice, "我有哪些自动化")
    assert reply.startswith("你有 1 条自动化规则、2 个场景"), reply
    assert re.search(r"- Wake up（定时，下次 \d{4}-\d\d-\d\d 07:00）", reply), reply

    reply = await ask(gateway, gateway.alice, "run the movie night scene")
    assert reply == "Ran the scene “Movie night”: 1 of 1 action succeeded."
    light = await (await client.get("/api/v1/devices/living_room_light", headers=gateway.alice)).json()
    assert light["device"]["state"]["brightness"] == 15
    reply = await ask(gateway, gateway.alice, "执行回家模式")
    assert reply == "已执行场景「回家模式」：1 个动作，成功 1 个。"
    light = await (await client.get("/api/v1/devices/living_room_light", headers=gateway.alice)).json()
    assert light["device"]["state"]["brightness"] == 90

    reply = await ask(gateway, gateway.alice, "every day at 7 run the movie night scene")
    assert reply.startswith("I can only run a scene right now."), reply
    light = await (await client.get("/api/v1/devices/living_room_light", headers=gateway.alice)).json()
    assert light["device"]["state"]["brightness"] == 90   # not run

    reply = await ask(gateway, gateway.alice, "run the party scene")
    assert reply.startswith("You have no scene called “party”.") and "Movie night" in reply
    # Bob has none of Alice's.
    reply = await ask(gateway, gateway.bob, "list my automations")
    assert reply == "You have no automation rules or scenes yet."


async def test_a_scene_that_sends_a_web_request_runs_only_when_the_person_confirms(make_stack):
    """A scene with an `http` action (`automation.http`, docs/ai-core.md "Confirmation"): asked
    first, sent once on "yes"; "no" sends nothing."""
    stack = await make_stack()
    gateway = stack.gateway
    response = await gateway.client.post(f"{API}/scenes", headers=gateway.alice, json={
        "name": "Tell the neighbour", "actions": [{"type": "http", "url": f"{stack.site_url}/knock"}]})
    assert response.status == 201, await response.text()
    host = "127.0.0.1"
    asked = await ask(gateway, gateway.alice, "run the tell the neighbour scene")
    assert asked.startswith(f"Run the scene “Tell the neighbour”, which sends a web request to {host}? "), asked
    assert await ask(gateway, gateway.alice, "no") == \
        f"OK, cancelled. Not done: Run the scene “Tell the neighbour”, which sends a web request to {host}."
    assert stack.site_hits == []
    await ask(gateway, gateway.alice, "run the tell the neighbour scene")
    assert await ask(gateway, gateway.alice, "yes") == "Ran the scene “Tell the neighbour”: 1 of 1 action succeeded."
    assert [hit["path"] for hit in stack.site_hits] == ["/knock"]
