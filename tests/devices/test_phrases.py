"""The offline agent's reading of device requests in English and Chinese: which tool the agent
picks among every tool the ai-core service registers (the built-in ones, knowledge, memory and
the device tools), the arguments read from the words, the device meant among a person's devices,
and the sentence said back. (The same phrases through a real AI core and gateway:
test_assistant.py.)"""
from __future__ import annotations

import pytest

from plugins.ai_core.agent import best_match
from plugins.ai_core.builtin_tools import register_builtin_tools
from plugins.ai_core.tools import ToolRegistry
from plugins.iot.assistant import add_device_tools
from plugins.iot.assistant_words import summarize_list, summarize_operation, summarize_reading
from plugins.iot.device_resolution import resolve
from plugins.iot.phrases import chinese_number, parse_operation, parse_reading
from plugins.knowledge.assistant import add_search_knowledge
from plugins.memory.settings import MemoryAssistantSettings
from plugins.memory.tools import add_memory_tools


@pytest.fixture(scope="module")
def tools() -> ToolRegistry:
    registry = ToolRegistry()
    register_builtin_tools(registry, "UTC")
    add_search_knowledge(registry)
    add_memory_tools(registry, None, MemoryAssistantSettings(), "memory_assistant")  # type: ignore[arg-type]
    add_device_tools(registry)
    return registry


@pytest.mark.parametrize("text, tool", [
    ("turn on the living room light", "operate_device"),
    ("set the bedroom AC to 24 degrees", "operate_device"),
    ("is the front door locked?", "read_device"),
    ("打开客厅的灯", "operate_device"),
    ("把卧室空调调到24度", "operate_device"),
    ("窗帘拉开一半", "operate_device"),
    ("把卧室空调调成制冷模式", "operate_device"),
    ("把空调风速调到高", "operate_device"),
    ("把客厅灯亮度调到百分之三十", "operate_device"),
    ("打开空调调到二十四度", "operate_device"),
    ("turn off the bedroom light", "operate_device"),
    ("关闭卧室的灯", "operate_device"),
    ("what's the temperature in the bedroom", "read_device"),
    ("卧室温度多少", "read_device"),
    ("锁上门", "operate_device"),
    ("open the curtains", "operate_device"),
    ("dim the living room light to 30%", "operate_device"),
    ("turn the living room light on", "operate_device"),
    ("set the temperature in the bedroom to 22", "operate_device"),
    ("门锁了吗", "read_device"),
    ("is the bedroom light on?", "read_device"),
    ("客厅湿度是多少", "read_device"),
    ("list my devices", "list_devices"),
    ("我有哪些设备", "list_devices"),
    # Neighbours that are not about devices keep their own tools.
    ("what time is it", "get_current_time"),
    ("现在几点", "get_current_time"),
    ("what is the date today", "get_current_time"),
    ("search my notes for the door code", "search_knowledge"),
    ("remember that my door code is 1234", "remember"),
])
def test_the_agent_picks_the_device_tool_a_request_asks_for(tools, text, tool):
    match = best_match(text, tools.all())
    assert match is not None and match.intent == f"tool:{tool}", (text, match)


@pytest.mark.parametrize("text", ["remind me to turn on the oven at 6", "提醒我六点打开烤箱",
                                  "remind me to switch on the oven", "what's the weather like"])
def test_requests_about_other_things_do_not_pick_a_device_tool(tools, text):
    match = best_match(text, tools.all())
    assert match is None or match.intent not in ("tool:operate_device", "tool:read_device", "tool:list_devices")


OPERATIONS = [
    ("turn on the living room light", {"room": "living room", "type": "light", "action": "switch", "value": True}),
    ("Turn the bedroom light off", {"room": "bedroom", "type": "light", "action": "switch", "value": False}),
    ("set the bedroom AC to 24 degrees",
     {"room": "bedroom", "type": "air_conditioner", "action": "set", "property": "target_temperature", "value": 24}),
    ("set the living room AC to 22.5°C", {"room": "living room", "type": "air_conditioner", "action": "set",
                                          "property": "target_temperature", "value": 22.5}),
    ("dim the living room light to 30%",
     {"room": "living room", "type": "light", "action": "set", "property": "brightness", "value": 30}),
    ("set the living room light to 3000K",
     {"room": "living room", "type": "light", "action": "set", "property": "color_temp", "value": 3000}),
    ("open the curtains", {"type": "curtain", "action": "set", "property": "position", "value": 100}),
    ("close the curtains", {"type": "curtain", "action": "set", "property": "position", "value": 0}),
    ("lock the front door", {"type": "lock", "action": "switch", "value": True}),
    ("unlock the door", {"type": "lock", "action": "switch", "value": False}),
    ("set the living room AC to cool mode at 22", {"room": "living room", "type": "air_conditioner", "action": "set",
                                                   "properties": {"target_temperature": 22, "mode": "cool"}}),
    ("打开客厅的灯", {"room": "客厅", "type": "light", "action": "switch", "value": True}),
    ("关闭卧室的灯", {"room": "卧室", "type": "light", "action": "switch", "value": False}),
    ("把卧室空调调到24度",
     {"room": "卧室", "type": "air_conditioner", "action": "set", "property": "target_temperature", "value": 24}),
    ("打开空调调到二十四度", {"type": "air_conditioner", "action": "set",
                            "properties": {"on": True, "target_temperature": 24}}),
    ("把卧室空调调成制冷模式", {"room": "卧室", "type": "air_conditioner", "action": "set", "property": "mode",
                             "value": "cool"}),
    ("窗帘拉开一半", {"type": "curtain", "action": "set", "property": "position", "value": 50}),
    ("把客厅灯亮度调到百分之三十", {"room": "客厅", "type": "light", "action": "set", "property": "brightness",
                                 "value": 30}),
    ("把空调风速调到高", {"type": "air_conditioner", "action": "set", "property": "fan", "value": "high"}),
    ("锁上门", {"type": "lock", "action": "switch", "value": True}),
    ("把门锁上", {"type": "lock", "action": "switch", "value": True}),
    ("turn off all the lights", {"type": "light", "all": True, "action": "switch", "value": False}),
    ("turn on the lights in the bedroom", {"room": "bedroom", "type": "light", "all": True, "action": "switch",
                                           "value": True}),
    ("关掉所有的灯", {"type": "light", "all": True, "action": "switch", "value": False}),
    ("把灯都关了", {"type": "light", "all": True, "action": "switch", "value": False}),
]


@pytest.mark.parametrize("text, arguments", OPERATIONS)
def test_an_operation_is_read_from_the_words(tools, text, arguments):
    assert parse_operation(text) == arguments
    match = best_match(text, tools.all())
    assert match is not None and match.intent == "tool:operate_device", (text, match)


READINGS = [
    ("is the front door locked?", {"type": "lock", "property": "locked"}),
    ("what's the temperature in the bedroom", {"room": "bedroom", "property": "temperature"}),
    ("卧室温度多少", {"room": "卧室", "property": "temperature"}),
    ("卧室空调温度多少", {"room": "卧室", "type": "air_conditioner", "property": "temperature"}),
    ("门锁了吗", {"type": "lock", "property": "locked"}),
    ("is the bedroom light on?", {"room": "bedroom", "type": "light", "property": "on"}),
    ("客厅湿度是多少", {"room": "客厅", "property": "humidity"}),
]


@pytest.mark.parametrize("text, arguments", READINGS)
def test_a_reading_is_read_from_the_words(tools, text, arguments):
    assert parse_reading(text) == arguments
    match = best_match(text, tools.all())
    assert match is not None and match.intent == "tool:read_device", (text, match)


@pytest.mark.parametrize("text", ["remind me to turn on the living room light at 7", "turn on the light at 7pm",
                                  "tomorrow turn off the bedroom light", "when it gets hot turn on the bedroom ac",
                                  "turn on the light in 10 minutes", "提醒我七点钟打开客厅的灯", "明天早上打开窗帘",
                                  "如果卧室温度超过28度就打开空调", "当温度超过28度时打开空调"])
def test_an_operation_put_off_is_not_done_now(text):
    assert "action" not in parse_operation(text)


def test_chinese_numbers():
    assert [chinese_number(text) for text in ("二十四", "十八", "三十", "一百", "二十四点五", "两", "x")] == \
        [24, 18, 30, 100, 24.5, 2, None]


def device(device_id: str, name: str, zh: str, room: str, room_zh: str, kind: str, state: dict) -> dict:
    return {"id": device_id, "name": name, "names": {"en": name, "zh": zh}, "room": room,
            "room_names": {"en": room.replace("_", " ").capitalize(), "zh": room_zh}, "type": kind,
            "adapter": "simulation", "online": True, "state": state, "properties": {},
            "updated_at": "2026-11-24T06:00:00.000Z"}


HOME = [
    device("bedroom_light", "Bedroom light", "卧室灯", "bedroom", "卧室", "light", {"on": False, "brightness": 80}),
    device("bedroom_ac", "Bedroom air conditioner", "卧室空调", "bedroom", "卧室", "air_conditioner",
           {"on": False, "mode": "cool", "target_temperature": 26}),
    device("bedroom_temperature", "Bedroom temperature sensor", "卧室温度传感器", "bedroom", "卧室",
           "temperature_sensor", {"temperature": 26.4}),
    device("living_room_light", "Living room light", "客厅灯", "living_room", "客厅", "light", {"on": True}),
    device("living_room_ac", "Living room air conditioner", "客厅空调", "living_room", "客厅", "air_conditioner",
           {"on": False, "mode": "cool", "target_temperature": 26, "temperature": 27.9}),
    device("front_door_lock", "Front door lock", "前门智能门锁", "entrance", "玄关", "lock", {"locked": True}),
]


@pytest.mark.parametrize("which, expected", [
    ({"device": "客厅灯"}, "living_room_light"),
    ({"device": "living_room_light"}, "living_room_light"),
    ({"device": "the bedroom light"}, "bedroom_light"),
    ({"device": "bedroom AC"}, "bedroom_ac"),
    ({"room": "卧室", "kind": "空调"}, "bedroom_ac"),
    ({"room": "Living room", "kind": "light"}, "living_room_light"),
    ({"room": "bedroom", "reading": "temperature"}, "bedroom_temperature"),
    ({"room": "living room", "reading": "temperature"}, "living_room_ac"),  # no thermometer there: its AC
    ({"room": "客厅", "kind": "空调", "reading": "temperature"}, "living_room_ac"),
    ({"kind": "lock"}, "front_door_lock"),
    ({"room": "front door", "kind": "lock"}, "front_door_lock"),
])
def test_the_device_meant_is_found_among_the_persons(which, expected):
    found = resolve(HOME, **which)
    assert found.device is not None and found.device["id"] == expected


def test_a_request_several_devices_fit_is_answered_with_a_question():
    found = resolve(HOME, kind="light")
    assert found.device is None and {d["id"] for d in found.candidates} == {"bedroom_light", "living_room_light"}
    result = {"status": "ambiguous", "candidates": found.candidates, "requested": {"switch": True}}
    assert summarize_operation(result, "en") == "Which one do you mean: the bedroom light or living room light?"
    assert summarize_operation(result, "zh") == "你指的是哪一个：卧室灯、客厅灯？"
    assert resolve(HOME, room="kitchen", kind="light").device is None
    assert resolve(HOME, room="living room", reading="humidity").device is None  # not the bedroom's
    assert resolve(HOME, device="garage door").device is None  # not the front door's lock
    assert resolve(HOME, device="前门").device["id"] == "front_door_lock"


def test_what_the_agent_says():
    light = {**HOME[3], "state": {"on": True, "brightness": 80}}
    done = {"status": "done", "device": light, "requested": {"switch": True},
            "changes": {"on": {"from": False, "to": True}}}
    assert summarize_operation(done, "en") == "Done: I turned on the living room light."
    assert summarize_operation(done, "zh") == "已打开客厅灯。"
    assert summarize_operation({**done, "changes": {}}, "en") == \
        "The living room light already was like that (on, brightness 80%)."
    ac = {"status": "done", "device": HOME[1], "requested": {"target_temperature": 24},
          "changes": {"target_temperature": {"from": 26, "to": 24}}}
    assert summarize_operation(ac, "en") == "Done: I set the bedroom air conditioner to 24 °C."
    assert summarize_operation(ac, "zh") == "已把卧室空调调到24°C。"
    refused = {"status": "refused", "device": HOME[5], "requested": {"switch": False},
               "error": "Unlocking is refused by the operator's configuration."}
    assert summarize_operation(refused, "en").startswith("I couldn't do that to the front door lock: Unlocking")
    lock = {"status": "found", "device": HOME[5], "property": "locked", "value": True}
    assert summarize_reading(lock, "en") == "Yes, the front door lock is locked."
    assert summarize_reading(lock, "zh") == "是的，前门智能门锁已锁上。"
    warm = {"status": "found", "device": HOME[2], "property": "temperature", "value": 26.4, "unit": "°C"}
    assert summarize_reading(warm, "en") == "It is 26.4 °C in the bedroom."
    assert summarize_reading(warm, "zh") == "卧室现在26.4°C。"
    listing = summarize_list({"count": 2, "devices": HOME[:2]}, "en").splitlines()
    assert listing == ["You have 2 devices:", "- Bedroom light (bedroom): off, brightness 80%",
                       "- Bedroom air conditioner (bedroom): off, cool mode, set to 26 °C"]
