"""The assistant's hands on the person's devices: the `list_devices`, `operate_device` and
`read_device` tools, a plugin of the ai-core service (`device_tools`). The devices live behind
the gateway (plugin `devices`, which asks the IoT service), so the tools ask the gateway's
`/api/v1/devices*` endpoints with the service credential acting for the person of the turn, as
every tool reaching the gateway does; an operation is recorded with source `assistant`.

A device is named the way people name it — by its name in any language ("客厅灯"), by room and
kind ("bedroom" + "air_conditioner"), by what it reports ("temperature" in the bedroom) — or by
its id; `resolve` finds it among the person's devices, or says which ones were meant. The
offline agent reads English and Chinese requests with phrases.py and says what it did."""
from __future__ import annotations

from typing import Any

from gateway.plugins import Plugin, Registrar
from plugins.ai_core.contract import TOOLS, Effect, GatewayFailed, ToolCall, ToolFailed, Tools, gateway_offers

from .phrases import (PROPERTY_TYPES, ROOM_WORDS, TYPE_WORDS, find_word, normalize, parse_listing, parse_operation,
                      parse_reading, room_in, type_in)

DEVICES_PATH = "/api/v1/devices"
SOURCE = "assistant"
DEVICE_TYPES = ["light", "air_conditioner", "temperature_sensor", "humidity_sensor", "curtain", "lock"]

_WHICH = {
    "device": {"type": "string", "description": "the device's name in any language (\"living room light\", \"客厅灯\") "
                                                "or its id (\"living_room_light\"); or give room and type"},
    "room": {"type": "string", "description": "the room, e.g. \"bedroom\", \"living room\", \"卧室\""},
    "type": {"type": "string", "description": "the kind of device: " + ", ".join(DEVICE_TYPES) + " (or another a real "
                                              "device announces)"},
}

LIST_PARAMETERS = {"type": "object", "properties": {"room": _WHICH["room"], "type": _WHICH["type"]}}
OPERATE_PARAMETERS = {"type": "object", "properties": {
    **_WHICH,
    "action": {"type": "string", "enum": ["switch", "set"],
               "description": "switch: on/off (a lock: true locks it); set: change property to value, or several "
                              "properties at once"},
    "value": {"description": "switch: true or false; set: the property's new value"},
    "property": {"type": "string", "description": "set: light: brightness (0-100), color_temp (2700-6500 K); air "
                                                  "conditioner: mode (cool/heat/fan/dry/auto), target_temperature "
                                                  "(16-30 °C), fan (auto/low/medium/high); curtain: position (0 "
                                                  "closed - 100 open); lock: locked; any: on"},
    "properties": {"type": "object", "description": "set: several properties and their values, changed together"},
    "all": {"type": "boolean", "description": "operate every device that fits (\"all the lights\", all the lights "
                                              "of a room) instead of asking which one"}},
    "required": ["action"]}
READ_PARAMETERS = {"type": "object", "properties": {
    **_WHICH,
    "property": {"type": "string", "description": "the reading wanted: temperature, humidity, locked, on, position, "
                                                  "brightness...; the whole state when omitted"}}}

LIST_EXAMPLES = {
    "en": ["list my devices", "list the devices", "show my devices", "show all my devices", "what devices do i have",
           "which devices do i have", "status of my devices", "smart home devices"],
    "zh": ["我有哪些设备", "列出设备", "列出我的设备", "所有设备的状态", "设备状态", "设备列表", "查看我的设备", "智能家居设备"],
}
OPERATE_EXAMPLES = {
    "en": ["turn on the light", "turn off the light", "turn on the lights", "turn off the lights",
           "turn on all the lights", "turn off all the lights", "turn on light", "turn off light", "turn the light on",
           "turn the light off", "switch on the light", "switch off the light", "switch the light on",
           "switch the light off", "turn on the ac", "turn off the ac", "turn on the air conditioner",
           "turn off the air conditioner", "set the ac to", "set the air conditioner to", "set the temperature to",
           "set the light to", "set the brightness to", "dim the light", "brighten the light", "open the curtains",
           "close the curtains", "open the curtain", "close the curtain", "lock the door", "unlock the door",
           "lock the front door", "unlock the front door"],
    "zh": ["打开灯", "关闭灯", "关掉灯", "开灯", "关灯", "把灯打开", "把灯关掉", "把灯都打开", "把灯都关了",
           "打开所有的灯", "关掉所有的灯", "打开空调", "关闭空调", "关掉空调",
           "空调调到度", "把空调调到度", "空调调到", "空调调成", "空调开到", "制冷模式", "制热模式", "除湿模式",
           "风速调到", "温度调到度", "亮度调到", "把灯调暗", "把灯调亮", "打开窗帘", "关上窗帘",
           "拉开窗帘", "拉上窗帘", "窗帘拉开", "窗帘关上", "锁上门", "锁门", "把门锁上", "开锁", "解锁门锁"],
}
READ_EXAMPLES = {
    "en": ["is the door locked", "is the front door locked", "is the door unlocked", "is the light on",
           "is the light off", "is the ac on", "are the curtains open", "what is the temperature",
           "what is the humidity", "how warm is it in the", "how humid is it in the", "temperature in the",
           "humidity in the"],
    "zh": ["门锁了吗", "门锁上了吗", "门锁好了吗", "门有没有锁", "温度多少", "温度是多少", "多少度", "湿度多少",
           "湿度是多少", "灯开着吗", "灯关了吗", "空调开着吗", "窗帘开着吗"],
}


# ---------------------------------------------------------------- finding the device meant

def _names(device: dict) -> list[str]:
    return [normalize(name) for name in [device.get("name") or "", *(device.get("names") or {}).values()] if name]


def _room_names(device: dict) -> list[str]:
    return [normalize(name) for name in [device.get("room") or "", *(device.get("room_names") or {}).values()] if name]


def in_room(device: dict, room: str) -> bool:
    said = normalize(room).removeprefix("the ")
    known = ROOM_WORDS.get(said) or ROOM_WORDS.get(room_in(said) or "")
    return (known is not None and device.get("room") == known) or said in _room_names(device)


def type_of(said: str) -> str:
    """A kind of device as the model or a person said it, as a device type."""
    said = normalize(said)
    return TYPE_WORDS.get(said) or type_in(said) or said.replace(" ", "_")


# A reading and the properties that report it: a room without a thermometer has its air
# conditioner's own (`temperature` in the simulation and the MQTT climate mapping;
# `current_temperature` where a device names it so).
READINGS = {"temperature": ("temperature", "current_temperature"), "humidity": ("humidity", "current_humidity")}


def reading_of(device: dict, reading: str) -> str | None:
    """The property of `device` that reports `reading`, or None."""
    state = device.get("state") or {}
    return next((name for name in READINGS.get(reading, (reading,)) if name in state), None)


class Resolution:
    """The device meant (`device`), or what to tell the person: none fits, or several do."""

    def __init__(self, device: dict | None = None, candidates: list[dict] | None = None):
        self.device = device
        self.candidates = candidates or []


_FILLERS = {"the", "my", "a", "our", "in", "of"}


def resolve(devices: list[dict], *, device: str | None = None, room: str | None = None, kind: str | None = None,
            reading: str | None = None) -> Resolution:
    if device:
        said = normalize(device).removeprefix("the ").removeprefix("my ")
        for candidate in devices:
            if said == normalize(candidate["id"]) or said in _names(candidate):
                return Resolution(candidate)
        named = [candidate for candidate in devices
                 if any(said in name or name in said for name in _names(candidate))]
        if len(named) == 1:
            return Resolution(named[0])
        room_word, kind_word = room_in(said), find_word(said, TYPE_WORDS)
        room = room or room_word
        kind = kind or (kind_word[1] if kind_word else None)
        if not room and not kind:
            return Resolution(candidates=named)
        # Words besides the room and the kind ("garage" of "garage door") must be in the name.
        rest = said
        for word in (room_word, kind_word[0] if kind_word else None):
            rest = rest.replace(word, " ") if word else rest
        rest = " ".join(part for part in rest.replace("的", " ").split() if part not in _FILLERS)
        if rest:
            candidates = [candidate for candidate in devices
                          if any(rest in name for name in _names(candidate) + _room_names(candidate))]
            return resolve(candidates, room=room, kind=kind, reading=reading) if candidates else Resolution()
    candidates = list(devices)
    if kind:
        wanted = type_of(kind)
        candidates = [candidate for candidate in candidates if candidate["type"] == wanted]
    elif reading:
        candidates = [candidate for candidate in candidates if reading_of(candidate, reading) is not None]
        if room and any(in_room(other, room) for other in devices):
            # What reports it in that room: its sensor, else its air conditioner.
            candidates = [candidate for candidate in candidates if in_room(candidate, room)]
        preferred = [candidate for candidate in candidates if candidate["type"] == PROPERTY_TYPES.get(reading)]
        candidates = preferred or candidates
    if room:
        here = [candidate for candidate in candidates if in_room(candidate, room)]
        # A place that is none of the person's rooms ("the front door" for the one lock, filed under
        # the entrance) does not rule out the only device of its kind.
        a_room = any(in_room(other, room) for other in devices)
        candidates = here if here or a_room or len(candidates) != 1 else candidates
    if len(candidates) == 1:
        return Resolution(candidates[0])
    return Resolution(candidates=candidates)


def _text(arguments: dict, key: str) -> str | None:
    value = arguments.get(key)
    return str(value) if value not in (None, "") else None


def compact(device: dict) -> dict:
    """What the model reads of a device."""
    return {key: device[key] for key in ("id", "name", "names", "room", "room_names", "type", "online", "state")
            if key in device}


async def _devices(call: ToolCall) -> list[dict]:
    try:
        return list((await call.ask_gateway("GET", DEVICES_PATH))["devices"])
    except GatewayFailed as failure:
        if failure.status == 404:  # the route itself is missing
            raise ToolFailed("the gateway offers no devices (its `devices` plugin is not loaded)") from None
        raise


def _not_resolved(resolution: Resolution, devices: list[dict]) -> dict:
    if resolution.candidates:
        return {"status": "ambiguous", "candidates": [compact(device) for device in resolution.candidates],
                "message": "Several devices fit; ask the user which one they mean."}
    return {"status": "not_found", "devices": [compact(device) for device in devices],
            "message": "No device of the user fits; these are the devices they have."}


# ---------------------------------------------------------------- the tools

async def list_devices(arguments: dict, call: ToolCall) -> dict:
    devices = await _devices(call)
    shown = devices
    if arguments.get("room"):
        shown = [device for device in shown if in_room(device, str(arguments["room"]))]
    if arguments.get("type"):
        wanted = type_of(str(arguments["type"]))
        shown = [device for device in shown if device["type"] == wanted]
    return {"count": len(shown), "devices": [compact(device) for device in shown]}


def requested_operation(arguments: dict) -> dict:
    """The operate body the arguments ask for (the IoT service checks the values)."""
    action = arguments.get("action")
    if action == "switch":
        if not isinstance(arguments.get("value"), bool):
            raise ToolFailed("switch needs value true (on; a lock: locked) or false")
        return {"action": "switch", "value": arguments["value"]}
    if action == "set":
        if isinstance(arguments.get("properties"), dict) and arguments["properties"]:
            return {"action": "set", "properties": dict(arguments["properties"])}
        if arguments.get("property") and "value" in arguments:
            return {"action": "set", "property": str(arguments["property"]), "value": arguments["value"]}
        raise ToolFailed("set needs property and value, or properties")
    raise ToolFailed("action must be switch or set")


def _changed(operation: dict) -> dict:
    """What the operation asks for, property by property (a switch is `on`, or `locked` for a lock)."""
    if operation["action"] == "switch":
        return {"switch": operation["value"]}
    if "properties" in operation:
        return dict(operation["properties"])
    return {operation["property"]: operation["value"]}


async def operate_device(arguments: dict, call: ToolCall) -> dict:
    operation = requested_operation(arguments)
    devices = await _devices(call)
    resolution = resolve(devices, device=_text(arguments, "device"), room=_text(arguments, "room"),
                         kind=_text(arguments, "type"))
    if resolution.device is None and arguments.get("all") is True and resolution.candidates:
        results = []
        for index, device in enumerate(resolution.candidates):
            await call.progress((index + 0.5) / len(resolution.candidates),
                                operate_progress({**arguments, "device": device["name"]}, call.language))
            results.append(await _operate_one(call, device, operation))
        return {"status": "done_all", "results": results}
    if resolution.device is None:
        return {**_not_resolved(resolution, devices), "requested": _changed(operation)}
    await call.progress(0.5, operate_progress({**arguments, "device": resolution.device["name"]}, call.language))
    return await _operate_one(call, resolution.device, operation)


async def _operate_one(call: ToolCall, device: dict, operation: dict) -> dict:
    try:
        answer = await call.ask_gateway("POST", f"{DEVICES_PATH}/{device['id']}/operate",
                                        body={**operation, "source": SOURCE})
    except GatewayFailed as failure:
        if failure.status not in (400, 403, 404, 409, 502, 503) or failure.error_type == "iot_service_unreachable":
            raise
        return {"status": "refused", "device": compact(device), "requested": _changed(operation),
                "error": str(failure).removeprefix(f"the gateway answered {failure.status}: "),
                "error_type": failure.error_type}
    return {"status": "done", "device": compact(answer["device"]), "requested": _changed(operation),
            "changes": answer["operation"]["changes"], "operation_id": answer["operation"]["id"]}


# Device types whose opening lets someone in (the AI core's confirmation kinds `<type>.open`): a
# cover that is not a curtain or blind is a garage door, a gate, a door or a window.
OPENINGS = ("cover", "garage_door", "gate")


def device_effects(device: dict, operation: dict) -> list[Effect]:
    """What `operation` would do to `device` that may need the person's yes first: unlocking a
    lock (`lock.unlock`), opening a cover (`cover.open`, `garage_door.open`, `gate.open`) or a
    curtain (`curtain.open`)."""
    changed = _changed(operation)
    kind = device.get("type")
    en, zh = _name(device, "en"), _name(device, "zh")
    if kind == "lock" and (changed.get("switch") is False or changed.get("locked") is False):
        return [Effect("lock.unlock", {"en": f"Unlock the {en}", "zh": f"解锁{zh}"})]
    if kind in OPENINGS or kind == "curtain":
        position = changed.get("position")
        opening = changed.get("switch") is True or changed.get("on") is True or \
            (isinstance(position, (int, float)) and not isinstance(position, bool) and position > 0)
        if opening:
            part = isinstance(position, (int, float)) and 0 < position < 100
            words = ({"en": f"Open the {en} to {_number(position)}%", "zh": f"把{zh}打开到{_number(position)}%"}
                     if part else {"en": f"Open the {en}", "zh": f"打开{zh}"})
            return [Effect(f"{kind}.open", words)]
    return []


async def operate_effects(arguments: dict, call: ToolCall) -> list[Effect]:
    """The effects of an `operate_device` call, on the devices it would operate (none when it
    names no device clearly: then it operates nothing)."""
    try:
        operation = requested_operation(arguments)
    except ToolFailed:
        return []  # the call fails without touching anything
    devices = await _devices(call)
    resolution = resolve(devices, device=_text(arguments, "device"), room=_text(arguments, "room"),
                         kind=_text(arguments, "type"))
    if resolution.device is not None:
        targets = [resolution.device]
    elif arguments.get("all") is True:
        targets = resolution.candidates
    else:
        targets = []
    return [effect for device in targets for effect in device_effects(device, operation)]


async def read_device(arguments: dict, call: ToolCall) -> dict:
    devices = await _devices(call)
    reading = str(arguments["property"]) if arguments.get("property") else None
    resolution = resolve(devices, device=_text(arguments, "device"), room=_text(arguments, "room"),
                         kind=_text(arguments, "type"), reading=reading)
    if resolution.device is None:
        return {**_not_resolved(resolution, devices), "property": reading}
    device = resolution.device
    state = device.get("state") or {}
    reported = reading_of(device, reading) if reading is not None else None
    if reading is not None and reported is None:
        return {"status": "no_such_reading", "device": compact(device), "property": reading,
                "message": f"{device['name']} has no {reading}; its state: {state}"}
    result: dict[str, Any] = {"status": "found", "device": compact(device), "property": reading}
    if reported is not None:
        result["value"] = state[reported]
        result["unit"] = ((device.get("properties") or {}).get(reported) or {}).get("unit")
    return result


# ---------------------------------------------------------------- what the offline agent says

def _name(device: dict, language: str) -> str:
    names = device.get("names") or {}
    if language == "zh":
        return names.get("zh") or device.get("name") or device["id"]
    name = names.get("en") or device.get("name") or device["id"]
    return name[:1].lower() + name[1:] if name[1:2].islower() else name


def _room(device: dict, language: str) -> str:
    names = device.get("room_names") or {}
    room = names.get(language) or names.get("en") or str(device.get("room") or "").replace("_", " ")
    return room if language == "zh" else room.lower()


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


_MODES_ZH = {"cool": "制冷", "heat": "制热", "fan": "送风", "dry": "除湿", "auto": "自动"}
_FAN_ZH = {"auto": "自动", "low": "低", "medium": "中", "high": "高"}


def state_words(device: dict, language: str) -> str:
    """A device's state in a few words: "on, brightness 80%" / "开，亮度80%"."""
    state = device.get("state") or {}
    zh = language == "zh"
    words = []
    for key, value in state.items():
        if key == "on":
            words.append(("开" if value else "关") if zh else ("on" if value else "off"))
        elif key == "locked":
            words.append(("已锁" if value else "未锁") if zh else ("locked" if value else "unlocked"))
        elif key == "position":
            words.append((f"拉开{_number(value)}%" if value else "关闭") if zh
                         else (f"open {_number(value)}%" if value else "closed"))
        elif key == "brightness":
            words.append(f"亮度{_number(value)}%" if zh else f"brightness {_number(value)}%")
        elif key == "color_temp":
            words.append(f"色温{_number(value)}K" if zh else f"{_number(value)} K")
        elif key == "target_temperature":
            words.append(f"设定{_number(value)}°C" if zh else f"set to {_number(value)} °C")
        elif key == "mode":
            words.append(f"{_MODES_ZH.get(value, value)}模式" if zh else f"{value} mode")
        elif key == "fan":
            words.append(f"风速{_FAN_ZH.get(value, value)}" if zh else f"fan {value}")
        elif key == "temperature":
            words.append(f"{_number(value)}°C" if zh else f"{_number(value)} °C")
        elif key == "humidity":
            words.append(f"湿度{_number(value)}%" if zh else f"{_number(value)}% humidity")
        else:
            words.append(f"{key} {value}")
    if device.get("online") is False:
        words.append("离线" if zh else "offline")
    return ("，" if zh else ", ").join(words)


def summarize_list(result: dict, language: str) -> str:
    devices = result["devices"]
    if language == "zh":
        if not devices:
            return "没有找到符合的设备。"
        lines = [f"你有{len(devices)}个设备："]
        lines += [f"- {_name(d, 'zh')}（{_room(d, 'zh')}）：{state_words(d, 'zh')}" for d in devices]
        return "\n".join(lines)
    if not devices:
        return "I found no such device."
    lines = [f"You have {len(devices)} device{'s' if len(devices) != 1 else ''}:"]
    lines += [f"- {d.get('name') or d['id']} ({_room(d, 'en')}): {state_words(d, 'en')}" for d in devices]
    return "\n".join(lines)


def _did(device: dict, key: str, value: Any, language: str) -> str:
    """What setting `key` to `value` did, as a phrase: "turned on the living room light"."""
    name, zh = _name(device, language), language == "zh"
    if key in ("switch", "on", "locked"):
        locking = device["type"] == "lock" or key == "locked"
        if locking:
            return (f"已锁上{name}" if value else f"已解锁{name}") if zh else \
                (f"locked the {name}" if value else f"unlocked the {name}")
        return (f"已打开{name}" if value else f"已关闭{name}") if zh else \
            (f"turned on the {name}" if value else f"turned off the {name}")
    if key == "position":
        if value == 0:
            return f"已关上{name}" if zh else f"closed the {name}"
        if value == 100:
            return f"已完全拉开{name}" if zh else f"opened the {name}"
        return f"已把{name}拉开到{_number(value)}%" if zh else f"opened the {name} to {_number(value)}%"
    if key == "brightness":
        return f"已把{name}的亮度调到{_number(value)}%" if zh else f"set the {name}'s brightness to {_number(value)}%"
    if key == "color_temp":
        return f"已把{name}的色温调到{_number(value)}K" if zh else \
            f"set the {name}'s colour temperature to {_number(value)} K"
    if key == "target_temperature":
        return f"已把{name}调到{_number(value)}°C" if zh else f"set the {name} to {_number(value)} °C"
    if key == "mode":
        return f"已把{name}调到{_MODES_ZH.get(value, value)}模式" if zh else f"set the {name} to {value} mode"
    if key == "fan":
        return f"已把{name}的风速调到{_FAN_ZH.get(value, value)}" if zh else f"set the {name}'s fan to {value}"
    return f"已把{name}的{key}设为{value}" if zh else f"set the {name}'s {key} to {value}"


def _which(candidates: list[dict], language: str) -> str:
    names = [_name(device, language) for device in candidates]
    if language == "zh":
        return "、".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def _unresolved(result: dict, language: str) -> str | None:
    if result["status"] == "ambiguous":
        which = _which(result["candidates"], language)
        return f"你指的是哪一个：{which}？" if language == "zh" else f"Which one do you mean: the {which}?"
    if result["status"] == "not_found":
        known = [_name(device, language) for device in result["devices"]]
        if language == "zh":
            return "没有找到这个设备。" + (f"你的设备有：{'、'.join(known)}。" if known else "你还没有设备。")
        return "I couldn't find that device. " + (f"Your devices: {', '.join(known)}." if known
                                                  else "You have no devices yet.")
    return None


def summarize_operation(result: dict, language: str) -> str:
    if result["status"] == "done_all":
        return ("\n" if language == "zh" else " ").join(summarize_operation(one, language)
                                                         for one in result["results"])
    unresolved = _unresolved(result, language)
    if unresolved is not None:
        return unresolved
    device, zh = result["device"], language == "zh"
    if result["status"] == "refused":
        return (f"没能操作{_name(device, language)}：{result['error']}" if zh
                else f"I couldn't do that to the {_name(device, language)}: {result['error']}")
    phrases = [_did(device, key, value, language) for key, value in result["requested"].items()]
    if zh:
        sentence = "，".join(phrases) + "。"
        if not result.get("changes"):
            sentence = f"{_name(device, language)}本来就是这样（{state_words(device, 'zh')}）。"
        return sentence
    if not result.get("changes"):
        return f"The {_name(device, language)} already was like that ({state_words(device, 'en')})."
    sentence = " and ".join(phrases)
    return f"Done: I {sentence}."


def summarize_reading(result: dict, language: str) -> str:
    unresolved = _unresolved(result, language)
    if unresolved is not None:
        return unresolved
    device, zh = result["device"], language == "zh"
    name, room = _name(device, language), _room(device, language)
    if result["status"] == "no_such_reading":
        return (f"{name}没有这项读数。它现在：{state_words(device, 'zh')}。" if zh
                else f"The {name} does not report that. It is {state_words(device, 'en')}.")
    reading, value = result.get("property"), result.get("value")
    offline = ("（设备离线，这是最后的读数）" if zh else " (the device is offline: this is its last reading)") \
        if device.get("online") is False else ""
    if reading == "temperature":
        return (f"{room}现在{_number(value)}°C。" if zh else f"It is {_number(value)} °C in the {room}.") + offline
    if reading == "humidity":
        return (f"{room}的湿度是{_number(value)}%。" if zh else f"The humidity in the {room} is {_number(value)}%.") \
            + offline
    if reading == "locked":
        return ((f"是的，{name}已锁上。" if value else f"没有，{name}没有锁。") if zh
                else (f"Yes, the {name} is locked." if value else f"No, the {name} is unlocked.")) + offline
    if reading == "on":
        return ((f"是的，{name}开着（{state_words(device, 'zh')}）。" if value else f"没有，{name}关着。") if zh
                else (f"Yes, the {name} is on ({state_words(device, 'en')})." if value
                      else f"No, the {name} is off.")) + offline
    if reading == "position":
        if zh:
            return (f"{name}关着。" if not value else f"{name}拉开了{_number(value)}%。") + offline
        return (f"The {name} is closed." if not value else f"The {name} is open {_number(value)}%.") + offline
    if reading is None:
        return (f"{name}：{state_words(device, 'zh')}。" if zh
                else f"The {name} is {state_words(device, 'en')}.") + offline
    unit = result.get("unit") or ""
    return (f"{name}的{reading}是{_number(value)}{unit}。" if zh
            else f"The {name}'s {reading} is {_number(value)}{(' ' + unit) if unit and unit != '%' else unit}.") \
        + offline


# ---------------------------------------------------------------- what a person reads

TOPIC = {"en": "Lights and devices", "zh": "灯和设备"}
_KINDS = {"light": ("light", "灯"), "air_conditioner": ("air conditioner", "空调"), "curtain": ("curtains", "窗帘"),
          "lock": ("door", "门"), "temperature_sensor": ("temperature sensor", "温度传感器"),
          "humidity_sensor": ("humidity sensor", "湿度传感器")}


def device_words(arguments: dict, language: str) -> str:
    """The device a call is about, as a person says it ("the living room light", "客厅灯")."""
    zh = language == "zh"
    named = _text(arguments, "device")
    if named:
        return named.replace("_", " ")
    room, kind = _text(arguments, "room") or "", _text(arguments, "type") or ""
    plain = kind.replace("_", " ")
    what = _KINDS.get(type_of(kind) if kind else "", (plain, plain))[1 if zh else 0]
    if arguments.get("all") is True and what:
        return f"所有的{what}" if zh else f"all the {what}s".replace("ss", "s")
    if zh:
        return f"{room}{what}" or "设备"
    return "the " + " ".join(part for part in (room, what) if part) if room or what else "the device"


def operate_progress(arguments: dict, language: str) -> str:
    zh, device = language == "zh", device_words(arguments, language)
    locking = bool(_text(arguments, "type")) and type_of(_text(arguments, "type") or "") == "lock"
    if arguments.get("action") == "switch":
        on = arguments.get("value") is True
        if locking:
            return (f"正在{'锁上' if on else '解锁'}{device}…" if zh
                    else f"{'Locking' if on else 'Unlocking'} {device}…")
        return f"正在{'打开' if on else '关闭'}{device}…" if zh else f"Turning {'on' if on else 'off'} {device}…"
    value, wanted = arguments.get("value"), arguments.get("property")
    if wanted == "target_temperature" and isinstance(value, (int, float)):
        return f"正在把{device}调到{_number(value)}度…" if zh else f"Setting {device} to {_number(value)}°…"
    if wanted in ("position", "brightness") and isinstance(value, (int, float)):
        return f"正在把{device}调到{_number(value)}%…" if zh else f"Setting {device} to {_number(value)}%…"
    return f"正在调节{device}…" if zh else f"Adjusting {device}…"


def read_progress(arguments: dict, language: str) -> str:
    if not any(_text(arguments, key) for key in ("device", "room", "type")):
        return "正在查看你的设备…" if language == "zh" else "Checking your devices…"
    device = device_words(arguments, language)
    return f"正在查看{device}…" if language == "zh" else f"Checking {device}…"


async def devices_offered(call: ToolCall) -> bool:
    return await gateway_offers(call, DEVICES_PATH)


def add_device_tools(tools: Tools, owner: str = "device_tools") -> None:
    # In the order help shows them.
    tools.add("operate_device", "Operate one of the user's devices: switch it on or off (lock or unlock a lock), or "
              "set a property (brightness, colour temperature, air-conditioner mode, target temperature, fan, curtain "
              "position). Name the device, or its room and type.", OPERATE_PARAMETERS, operate_device, owner=owner,
              examples=OPERATE_EXAMPLES, parse_arguments=parse_operation, summarize=summarize_operation,
              topic=TOPIC, progress=operate_progress, available=devices_offered, effects=operate_effects,
              help={"en": ["turn on the living room light", "set the bedroom AC to 24 degrees"],
                    "zh": ["打开客厅的灯", "把卧室空调调到24度"]})
    tools.add("read_device", "Read one of the user's devices: a sensor's temperature or humidity in a room, whether "
              "the door is locked, whether a light is on, a curtain's position, or the whole state.",
              READ_PARAMETERS, read_device, owner=owner, examples=READ_EXAMPLES, parse_arguments=parse_reading,
              summarize=summarize_reading, topic=TOPIC, progress=read_progress, available=devices_offered,
              help={"en": ["is the front door locked?"], "zh": ["门锁了吗"]})
    tools.add("list_devices", "List the user's smart-home devices (lights, air conditioners, sensors, curtains, "
              "the door lock, real devices) with their rooms and current states.", LIST_PARAMETERS, list_devices,
              owner=owner, examples=LIST_EXAMPLES, parse_arguments=parse_listing, summarize=summarize_list,
              topic=TOPIC, help={"en": ["list my devices"], "zh": ["我有哪些设备"]}, available=devices_offered,
              progress={"en": "Checking your devices…", "zh": "正在查看你的设备…"})


class DeviceToolsPlugin(Plugin):
    """`device_tools`, in the ai-core service: the device tools."""
    name = "device_tools"
    depends = ("ai_core",)
    description = "the list_devices, operate_device and read_device tools: the assistant reads and operates devices"

    def setup(self, registrar: Registrar) -> None:
        add_device_tools(registrar.context.contracts.require(TOOLS), owner=self.name)


tools_plugin = DeviceToolsPlugin()
