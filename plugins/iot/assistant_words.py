"""What a person reads of the device tools, in English and Chinese: a call's result said in
words, the device a call is about, and what the assistant is doing meanwhile."""
from __future__ import annotations

from typing import Any

from .device_resolution import text_argument, type_of


def spoken_name(device: dict, language: str) -> str:
    names = device.get("names") or {}
    if language == "zh":
        return str(names.get("zh") or device.get("name") or device["id"])
    name: str = names.get("en") or device.get("name") or device["id"]
    return name[:1].lower() + name[1:] if name[1:2].islower() else name


def _room(device: dict, language: str) -> str:
    names = device.get("room_names") or {}
    room = names.get(language) or names.get("en") or str(device.get("room") or "").replace("_", " ")
    return room if language == "zh" else room.lower()


def spoken_number(value: Any) -> str:
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
            words.append((f"拉开{spoken_number(value)}%" if value else "关闭") if zh
                         else (f"open {spoken_number(value)}%" if value else "closed"))
        elif key == "brightness":
            words.append(f"亮度{spoken_number(value)}%" if zh else f"brightness {spoken_number(value)}%")
        elif key == "color_temp":
            words.append(f"色温{spoken_number(value)}K" if zh else f"{spoken_number(value)} K")
        elif key == "target_temperature":
            words.append(f"设定{spoken_number(value)}°C" if zh else f"set to {spoken_number(value)} °C")
        elif key == "mode":
            words.append(f"{_MODES_ZH.get(value, value)}模式" if zh else f"{value} mode")
        elif key == "fan":
            words.append(f"风速{_FAN_ZH.get(value, value)}" if zh else f"fan {value}")
        elif key == "temperature":
            words.append(f"{spoken_number(value)}°C" if zh else f"{spoken_number(value)} °C")
        elif key == "humidity":
            words.append(f"湿度{spoken_number(value)}%" if zh else f"{spoken_number(value)}% humidity")
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
        lines += [f"- {spoken_name(d, 'zh')}（{_room(d, 'zh')}）：{state_words(d, 'zh')}" for d in devices]
        return "\n".join(lines)
    if not devices:
        return "I found no such device."
    lines = [f"You have {len(devices)} device{'s' if len(devices) != 1 else ''}:"]
    lines += [f"- {d.get('name') or d['id']} ({_room(d, 'en')}): {state_words(d, 'en')}" for d in devices]
    return "\n".join(lines)


def _did(device: dict, key: str, value: Any, language: str) -> str:
    """What setting `key` to `value` did, as a phrase: "turned on the living room light"."""
    name, zh = spoken_name(device, language), language == "zh"
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
        return f"已把{name}拉开到{spoken_number(value)}%" if zh else f"opened the {name} to {spoken_number(value)}%"
    if key == "brightness":
        return f"已把{name}的亮度调到{spoken_number(value)}%" if zh else f"set the {name}'s brightness to {spoken_number(value)}%"
    if key == "color_temp":
        return f"已把{name}的色温调到{spoken_number(value)}K" if zh else \
            f"set the {name}'s colour temperature to {spoken_number(value)} K"
    if key == "target_temperature":
        return f"已把{name}调到{spoken_number(value)}°C" if zh else f"set the {name} to {spoken_number(value)} °C"
    if key == "mode":
        return f"已把{name}调到{_MODES_ZH.get(value, value)}模式" if zh else f"set the {name} to {value} mode"
    if key == "fan":
        return f"已把{name}的风速调到{_FAN_ZH.get(value, value)}" if zh else f"set the {name}'s fan to {value}"
    return f"已把{name}的{key}设为{value}" if zh else f"set the {name}'s {key} to {value}"


def _which(candidates: list[dict], language: str) -> str:
    names = [spoken_name(device, language) for device in candidates]
    if language == "zh":
        return "、".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def _unresolved(result: dict, language: str) -> str | None:
    if result["status"] == "ambiguous":
        which = _which(result["candidates"], language)
        return f"你指的是哪一个：{which}？" if language == "zh" else f"Which one do you mean: the {which}?"
    if result["status"] == "not_found":
        known = [spoken_name(device, language) for device in result["devices"]]
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
        return (f"没能操作{spoken_name(device, language)}：{result['error']}" if zh
                else f"I couldn't do that to the {spoken_name(device, language)}: {result['error']}")
    phrases = [_did(device, key, value, language) for key, value in result["requested"].items()]
    if zh:
        sentence = "，".join(phrases) + "。"
        if not result.get("changes"):
            sentence = f"{spoken_name(device, language)}本来就是这样（{state_words(device, 'zh')}）。"
        return sentence
    if not result.get("changes"):
        return f"The {spoken_name(device, language)} already was like that ({state_words(device, 'en')})."
    sentence = " and ".join(phrases)
    return f"Done: I {sentence}."


def summarize_reading(result: dict, language: str) -> str:
    unresolved = _unresolved(result, language)
    if unresolved is not None:
        return unresolved
    device, zh = result["device"], language == "zh"
    name, room = spoken_name(device, language), _room(device, language)
    if result["status"] == "no_such_reading":
        return (f"{name}没有这项读数。它现在：{state_words(device, 'zh')}。" if zh
                else f"The {name} does not report that. It is {state_words(device, 'en')}.")
    reading, value = result.get("property"), result.get("value")
    offline = ("（设备离线，这是最后的读数）" if zh else " (the device is offline: this is its last reading)") \
        if device.get("online") is False else ""
    if reading == "temperature":
        return (f"{room}现在{spoken_number(value)}°C。" if zh else f"It is {spoken_number(value)} °C in the {room}.") + offline
    if reading == "humidity":
        return (f"{room}的湿度是{spoken_number(value)}%。" if zh else f"The humidity in the {room} is {spoken_number(value)}%.") \
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
            return (f"{name}关着。" if not value else f"{name}拉开了{spoken_number(value)}%。") + offline
        return (f"The {name} is closed." if not value else f"The {name} is open {spoken_number(value)}%.") + offline
    if reading is None:
        return (f"{name}：{state_words(device, 'zh')}。" if zh
                else f"The {name} is {state_words(device, 'en')}.") + offline
    unit = result.get("unit") or ""
    return (f"{name}的{reading}是{spoken_number(value)}{unit}。" if zh
            else f"The {name}'s {reading} is {spoken_number(value)}{(' ' + unit) if unit and unit != '%' else unit}.") \
        + offline


TOPIC = {"en": "Lights and devices", "zh": "灯和设备"}

_KINDS = {"light": ("light", "灯"), "air_conditioner": ("air conditioner", "空调"), "curtain": ("curtains", "窗帘"),
          "lock": ("door", "门"), "temperature_sensor": ("temperature sensor", "温度传感器"),
          "humidity_sensor": ("humidity sensor", "湿度传感器")}


def device_words(arguments: dict, language: str) -> str:
    """The device a call is about, as a person says it ("the living room light", "客厅灯")."""
    zh = language == "zh"
    named = text_argument(arguments, "device")
    if named:
        return named.replace("_", " ")
    room, kind = text_argument(arguments, "room") or "", text_argument(arguments, "type") or ""
    plain = kind.replace("_", " ")
    what = _KINDS.get(type_of(kind) if kind else "", (plain, plain))[1 if zh else 0]
    if arguments.get("all") is True and what:
        return f"所有的{what}" if zh else f"all the {what}s".replace("ss", "s")
    if zh:
        return f"{room}{what}" or "设备"
    return "the " + " ".join(part for part in (room, what) if part) if room or what else "the device"


def operate_progress(arguments: dict, language: str) -> str:
    zh, device = language == "zh", device_words(arguments, language)
    locking = bool(text_argument(arguments, "type")) and type_of(text_argument(arguments, "type") or "") == "lock"
    if arguments.get("action") == "switch":
        on = arguments.get("value") is True
        if locking:
            return (f"正在{'锁上' if on else '解锁'}{device}…" if zh
                    else f"{'Locking' if on else 'Unlocking'} {device}…")
        return f"正在{'打开' if on else '关闭'}{device}…" if zh else f"Turning {'on' if on else 'off'} {device}…"
    value, wanted = arguments.get("value"), arguments.get("property")
    if wanted == "target_temperature" and isinstance(value, (int, float)):
        return f"正在把{device}调到{spoken_number(value)}度…" if zh else f"Setting {device} to {spoken_number(value)}°…"
    if wanted in ("position", "brightness") and isinstance(value, (int, float)):
        return f"正在把{device}调到{spoken_number(value)}%…" if zh else f"Setting {device} to {spoken_number(value)}%…"
    return f"正在调节{device}…" if zh else f"Adjusting {device}…"


def read_progress(arguments: dict, language: str) -> str:
    if not any(text_argument(arguments, key) for key in ("device", "room", "type")):
        return "正在查看你的设备…" if language == "zh" else "Checking your devices…"
    device = device_words(arguments, language)
    return f"正在查看{device}…" if language == "zh" else f"Checking {device}…"
