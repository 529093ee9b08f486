"""The assistant's hands on the person's devices: the `list_devices`, `operate_device` and
`read_device` tools, a plugin of the ai-core service (`device_tools`). The devices live behind
the gateway (plugin `devices`, which asks the IoT service), so the tools ask the gateway's
`/api/v1/devices*` endpoints with the service credential acting for the person of the turn, as
every tool reaching the gateway does; an operation is recorded with source `assistant`.

A device is named the way people name it — by its name in any language ("客厅灯"), by room and
kind ("bedroom" + "air_conditioner"), by what it reports ("temperature" in the bedroom) — or by
its id; `resolve` (device_resolution.py) finds it among the person's devices, or says which
ones were meant. The offline agent reads English and Chinese requests with phrases.py and says
what it did with assistant_words.py."""
from __future__ import annotations

from typing import Any

from gateway.plugins import Plugin, Registrar
from plugins.ai_core.contract import TOOLS, Effect, GatewayFailed, ToolCall, ToolFailed, Tools, gateway_offers

from .assistant_words import (TOPIC, operate_progress, read_progress, spoken_name, spoken_number, summarize_list,
                              summarize_operation, summarize_reading)
from .device_resolution import Resolution, in_room, reading_of, resolve, text_argument, type_of
from .phrases import parse_listing, parse_operation, parse_reading

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
    resolution = resolve(devices, device=text_argument(arguments, "device"), room=text_argument(arguments, "room"),
                         kind=text_argument(arguments, "type"))
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
    en, zh = spoken_name(device, "en"), spoken_name(device, "zh")
    if kind == "lock" and (changed.get("switch") is False or changed.get("locked") is False):
        return [Effect("lock.unlock", {"en": f"Unlock the {en}", "zh": f"解锁{zh}"})]
    if kind in OPENINGS or kind == "curtain":
        position = changed.get("position")
        opening = changed.get("switch") is True or changed.get("on") is True or \
            (isinstance(position, (int, float)) and not isinstance(position, bool) and position > 0)
        if opening:
            part = isinstance(position, (int, float)) and 0 < position < 100
            words = ({"en": f"Open the {en} to {spoken_number(position)}%", "zh": f"把{zh}打开到{spoken_number(position)}%"}
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
    resolution = resolve(devices, device=text_argument(arguments, "device"), room=text_argument(arguments, "room"),
                         kind=text_argument(arguments, "type"))
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
    resolution = resolve(devices, device=text_argument(arguments, "device"), room=text_argument(arguments, "room"),
                         kind=text_argument(arguments, "type"), reading=reading)
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
