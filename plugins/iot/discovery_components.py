"""Each discovery component read into an entity's properties, readers and writers (docs/iot.md,
"MQTT"): light (default and json schemas), switch, sensor, binary_sensor, cover, lock, climate."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from .discovery_entity import Entity, Publish, Reader
from .discovery_templates import number, render_command, render_value


def _reader(entity: Entity, topic: Any, read: Reader) -> bool:
    if not isinstance(topic, str) or not topic:
        return False
    entity.readers.setdefault(topic, []).append(read)
    return True


def _property(entity: Entity, name: str, spec: dict, state_topic: Any, read: Reader | None,
              command_topic: Any, write: Callable[[dict, dict], list[Publish]] | None, optimistic: bool) -> None:
    writable = isinstance(command_topic, str) and bool(command_topic) and write is not None
    entity.properties[name] = {**spec, "writable": writable}
    has_state = read is not None and _reader(entity, state_topic, read)
    if writable:
        assert write is not None
        entity.writers[name] = write
        if optimistic or not has_state:
            entity.optimistic.add(name)


def _on_off(config: dict, template_key: str = "value_template") -> Reader:
    on = str(config.get("state_on", config.get("payload_on", "ON")))
    off = str(config.get("state_off", config.get("payload_off", "OFF")))
    template = config.get(template_key)

    def read(payload: str) -> dict[str, Any]:
        value = render_value(template, payload)
        if value is None:
            return {}
        text = str(value)
        if text == on:
            return {"on": True}
        if text == off:
            return {"on": False}
        return {}
    return read


def _number_reader(name: str, template: Any, convert: Callable[[float], Any] = lambda v: v) -> Reader:
    def read(payload: str) -> dict[str, Any]:
        value = number(render_value(template, payload))
        return {} if value is None else {name: convert(value)}
    return read


@dataclass(frozen=True)
class _LightScale:
    """How a light's own brightness and colour temperature units map to ours (%, kelvin)."""
    brightness: float
    kelvin: bool
    low: int
    high: int

    def to_percent(self, raw: float) -> int:
        return int(round(raw / self.brightness * 100))

    def from_percent(self, value: float) -> int:
        return int(round(value / 100 * self.brightness))

    def to_kelvin(self, raw: float) -> int:
        return int(round(raw)) if self.kelvin else int(round(1_000_000 / raw)) if raw else self.low

    def from_kelvin(self, value: int) -> int:
        return value if self.kelvin else int(round(1_000_000 / value))

    def brightness_spec(self) -> dict:
        return {"type": "int", "min": 0, "max": 100, "unit": "%"}

    def color_spec(self) -> dict:
        return {"type": "int", "min": self.low, "max": self.high, "unit": "K"}


def _light_scale(config: dict) -> _LightScale:
    kelvin = bool(config.get("color_temp_kelvin", False))
    if kelvin:
        low, high = int(config.get("min_kelvin", 2000)), int(config.get("max_kelvin", 6535))
    else:  # mireds: the warmest is the most mireds
        low = round(1_000_000 / float(config.get("max_mireds", 500)))
        high = round(1_000_000 / float(config.get("min_mireds", 153)))
    return _LightScale(number(config.get("brightness_scale")) or 255, kelvin, low, high)


def _light(entity: Entity, config: dict, qos: int, retain: bool) -> None:
    entity.type = "light"
    if config.get("schema") == "json":
        _json_light(entity, config, qos, retain, _light_scale(config))
    else:
        _default_light(entity, config, qos, retain, _light_scale(config))


def _json_light(entity: Entity, config: dict, qos: int, retain: bool, scale: _LightScale) -> None:
    """A light of the json schema: one state topic and one command topic carry every property."""
    optimistic = bool(config.get("optimistic", False))
    command_topic = config.get("command_topic")
    modes = config.get("supported_color_modes") or []
    has_color_temp = bool(config.get("color_temp")) or "color_temp" in modes
    has_brightness = bool(config.get("brightness")) or has_color_temp or "brightness" in modes

    def read_json(payload: str) -> dict[str, Any]:
        try:
            data = json.loads(payload)
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        values: dict[str, Any] = {}
        if data.get("state") in ("ON", "OFF"):
            values["on"] = data["state"] == "ON"
        if (raw := number(data.get("brightness"))) is not None:
            values["brightness"] = scale.to_percent(raw)
        if (raw := number(data.get("color_temp"))) is not None and raw > 0:
            values["color_temp"] = scale.to_kelvin(raw)
        return values

    def write_json(values: dict, state: dict) -> list[Publish]:
        body: dict[str, Any] = {}
        if "on" in values:
            body["state"] = "ON" if values["on"] else "OFF"
        else:
            body["state"] = "ON"  # a brightness or a colour alone turns the light on, as in HA
        if "brightness" in values:
            body["brightness"] = scale.from_percent(values["brightness"])
        if "color_temp" in values:
            body["color_temp"] = scale.from_kelvin(values["color_temp"])
        return [Publish(str(command_topic), json.dumps(body), qos, retain)]

    state_topic = config.get("state_topic")
    _property(entity, "on", {"type": "bool"}, state_topic, read_json, command_topic, write_json, optimistic)
    if has_brightness:
        _property(entity, "brightness", scale.brightness_spec(), None, None, command_topic, write_json, optimistic)
    if has_color_temp:
        _property(entity, "color_temp", scale.color_spec(), None, None, command_topic, write_json, optimistic)
    for name in ("brightness", "color_temp"):
        if name in entity.properties and isinstance(state_topic, str) and not optimistic:
            entity.optimistic.discard(name)


def _default_light(entity: Entity, config: dict, qos: int, retain: bool, scale: _LightScale) -> None:
    """A light of the default schema: a topic of its own for on/off, brightness and colour."""
    optimistic = bool(config.get("optimistic", False))
    command_topic = config.get("command_topic")
    payload_on, payload_off = str(config.get("payload_on", "ON")), str(config.get("payload_off", "OFF"))

    def write_on(values: dict, state: dict) -> list[Publish]:
        return [Publish(str(command_topic), payload_on if values["on"] else payload_off, qos, retain)]

    _property(entity, "on", {"type": "bool"}, config.get("state_topic"),
              _on_off({"state_on": payload_on, "state_off": payload_off, **config}, "state_value_template"),
              command_topic, write_on, optimistic)
    if config.get("brightness_command_topic") or config.get("brightness_state_topic"):
        topic = config.get("brightness_command_topic")
        _property(entity, "brightness", scale.brightness_spec(), config.get("brightness_state_topic"),
                  _number_reader("brightness", config.get("brightness_value_template"), scale.to_percent),
                  topic, lambda values, state: [Publish(str(topic), str(scale.from_percent(values["brightness"])),
                                                        qos, retain)], optimistic)
    if config.get("color_temp_command_topic") or config.get("color_temp_state_topic"):
        topic_ct = config.get("color_temp_command_topic")
        _property(entity, "color_temp", scale.color_spec(), config.get("color_temp_state_topic"),
                  _number_reader("color_temp", config.get("color_temp_value_template"), scale.to_kelvin),
                  topic_ct, lambda values, state: [Publish(str(topic_ct), str(scale.from_kelvin(values["color_temp"])),
                                                           qos, retain)], optimistic)


def _switch(entity: Entity, config: dict, qos: int, retain: bool) -> None:
    entity.type = "switch"
    topic = config.get("command_topic")
    payload_on, payload_off = str(config.get("payload_on", "ON")), str(config.get("payload_off", "OFF"))
    _property(entity, "on", {"type": "bool"}, config.get("state_topic"), _on_off(config), topic,
              lambda values, state: [Publish(str(topic), render_command(
                  config.get("command_template"), payload_on if values["on"] else payload_off), qos, retain)],
              bool(config.get("optimistic", False)))


def _sensor(entity: Entity, config: dict, qos: int, retain: bool) -> None:
    device_class = config.get("device_class")
    unit = config.get("unit_of_measurement")
    if device_class == "temperature":
        entity.type, name, spec = "temperature_sensor", "temperature", {"type": "number", "unit": unit or "°C"}
    elif device_class == "humidity":
        entity.type, name, spec = "humidity_sensor", "humidity", {"type": "number", "unit": unit or "%"}
    else:
        entity.type, name = "sensor", "value"
        numeric = bool(unit or config.get("state_class"))
        spec = {"type": "number", **({"unit": unit} if unit else {})} if numeric else {"type": "string"}
    template = config.get("value_template")
    if spec["type"] == "number":
        read = _number_reader(name, template)
    else:
        def read(payload: str) -> dict[str, Any]:
            value = render_value(template, payload)
            return {} if value is None else {name: str(value)}
    _property(entity, name, spec, config.get("state_topic"), read, None, None, False)


def _binary_sensor(entity: Entity, config: dict, qos: int, retain: bool) -> None:
    entity.type = "binary_sensor"
    _property(entity, "on", {"type": "bool"}, config.get("state_topic"), _on_off(config), None, None, False)


def _cover(entity: Entity, config: dict, qos: int, retain: bool) -> None:
    device_class = config.get("device_class")
    entity.type = "curtain" if device_class in (None, "curtain", "blind", "shade", "shutter", "awning") else "cover"
    closed, opened = number(config.get("position_closed", 0)) or 0, number(config.get("position_open", 100))
    opened = 100 if opened is None else opened
    span = (opened - closed) or 100
    spec = {"type": "int", "min": 0, "max": 100, "unit": "%", "description": "0 closed, 100 fully open"}
    optimistic = bool(config.get("optimistic", False))

    def from_device(raw: float) -> int:
        return max(0, min(100, int(round((raw - closed) / span * 100))))

    readers: list[tuple[Any, Reader]] = []
    if config.get("position_topic"):
        readers.append((config["position_topic"], _number_reader("position", config.get("position_template"),
                                                                   from_device)))
    if config.get("state_topic"):
        state_open, state_closed = str(config.get("state_open", "open")), str(config.get("state_closed", "closed"))
        template = config.get("value_template")

        def read_state(payload: str) -> dict[str, Any]:
            value = render_value(template, payload)
            if value == state_open and not config.get("position_topic"):
                return {"position": 100}
            if value == state_closed:
                return {"position": 0}
            return {}
        readers.append((config["state_topic"], read_state))
    if config.get("set_position_topic"):
        topic = config["set_position_topic"]

        def write(values: dict, state: dict) -> list[Publish]:
            raw = int(round(closed + values["position"] / 100 * span))
            template = config.get("set_position_template")
            payload = re.sub(r"\{\{\s*position\s*\}\}", str(raw), template) if template else str(raw)
            return [Publish(str(topic), payload, qos, retain)]
    else:
        topic = config.get("command_topic")
        payload_open, payload_close = str(config.get("payload_open", "OPEN")), str(config.get("payload_close", "CLOSE"))

        def write(values: dict, state: dict) -> list[Publish]:
            return [Publish(str(topic), payload_open if values["position"] >= 50 else payload_close, qos, retain)]
        spec["description"] = "0 closed, 100 open (this cover only opens or closes fully: 50 or more opens it)"
    first_topic, first_reader = readers[0] if readers else (None, None)
    _property(entity, "position", spec, first_topic, first_reader, topic, write, optimistic)
    for state_topic, reader in readers[1:]:
        _reader(entity, state_topic, reader)
    if readers and not optimistic:
        entity.optimistic.discard("position")


def _lock(entity: Entity, config: dict, qos: int, retain: bool) -> None:
    entity.type = "lock"
    topic = config.get("command_topic")
    payload_lock, payload_unlock = str(config.get("payload_lock", "LOCK")), str(config.get("payload_unlock", "UNLOCK"))
    state_locked = str(config.get("state_locked", "LOCKED"))
    state_unlocked = str(config.get("state_unlocked", "UNLOCKED"))
    template = config.get("value_template")

    def read(payload: str) -> dict[str, Any]:
        value = render_value(template, payload)
        if value == state_locked:
            return {"locked": True}
        if value == state_unlocked:
            return {"locked": False}
        return {}

    _property(entity, "locked", {"type": "bool"}, config.get("state_topic"), read, topic,
              lambda values, state: [Publish(str(topic), render_command(
                  config.get("command_template"), payload_lock if values["locked"] else payload_unlock), qos, retain)],
              bool(config.get("optimistic", False)))


def _climate(entity: Entity, config: dict, qos: int, retain: bool) -> None:
    entity.type = "air_conditioner"
    optimistic = bool(config.get("optimistic", False))
    ha_modes = [str(mode) for mode in config.get("modes", ["auto", "off", "cool", "heat", "dry", "fan_only"])]
    ours = {mode: ("fan" if mode == "fan_only" else mode) for mode in ha_modes if mode != "off"}
    theirs = {value: key for key, value in ours.items()}
    mode_topic, power_topic = config.get("mode_command_topic"), config.get("power_command_topic")

    def read_mode(payload: str) -> dict[str, Any]:
        value = render_value(config.get("mode_state_template"), payload)
        if value == "off":
            return {"on": False}
        if value in ours:
            return {"on": True, "mode": ours[str(value)]}
        return {}

    def write_power(values: dict, state: dict) -> list[Publish]:
        publishes = []
        if values.get("on") is False:
            if "mode" in values and mode_topic and power_topic:
                publishes.append(Publish(str(mode_topic), theirs[values["mode"]], qos, retain))
            if power_topic:
                publishes.append(Publish(str(power_topic), str(config.get("payload_off", "OFF")), qos, retain))
            elif mode_topic:
                publishes.append(Publish(str(mode_topic), "off", qos, retain))
            return publishes
        if values.get("on") is True:
            if power_topic:
                publishes.append(Publish(str(power_topic), str(config.get("payload_on", "ON")), qos, retain))
            elif "mode" not in values and mode_topic:  # on again in the mode it had
                mode = theirs.get(str(state.get("mode")), next(iter(theirs), "auto"))
                publishes.append(Publish(str(mode_topic), mode, qos, retain))
        if "mode" in values and mode_topic:
            publishes.append(Publish(str(mode_topic), theirs[values["mode"]], qos, retain))
        return publishes

    mode_state = config.get("mode_state_topic")
    if "off" in ha_modes or power_topic:
        _property(entity, "on", {"type": "bool"}, mode_state, read_mode, power_topic or mode_topic, write_power,
                  optimistic)
    if ours:
        _property(entity, "mode", {"type": "enum", "options": list(ours.values())}, None, None, mode_topic,
                  write_power, optimistic)
        if isinstance(mode_state, str) and not optimistic:
            entity.optimistic.discard("mode")
        if "on" not in entity.properties:
            _reader(entity, mode_state, read_mode)
    step = number(config.get("temp_step")) or 1
    temperature = {"type": "number", "min": number(config.get("min_temp", 7)) or 7,
                   "max": number(config.get("max_temp", 35)) or 35, "step": step, "unit": "°C"}
    topic = config.get("temperature_command_topic")
    if topic or config.get("temperature_state_topic"):
        _property(entity, "target_temperature", temperature, config.get("temperature_state_topic"),
                  _number_reader("target_temperature", config.get("temperature_state_template")), topic,
                  lambda values, state: [Publish(str(topic), render_command(
                      config.get("temperature_command_template"), values["target_temperature"]), qos, retain)],
                  optimistic)
    fan_modes = [str(mode) for mode in config.get("fan_modes", ["auto", "low", "medium", "high"])]
    fan_topic = config.get("fan_mode_command_topic")
    if fan_topic or config.get("fan_mode_state_topic"):
        def read_fan(payload: str) -> dict[str, Any]:
            value = render_value(config.get("fan_mode_state_template"), payload)
            return {"fan": value} if value in fan_modes else {}
        _property(entity, "fan", {"type": "enum", "options": fan_modes}, config.get("fan_mode_state_topic"), read_fan,
                  fan_topic, lambda values, state: [Publish(str(fan_topic), values["fan"], qos, retain)], optimistic)
    if config.get("current_temperature_topic"):
        _property(entity, "temperature", {"type": "number", "unit": "°C"}, config["current_temperature_topic"],
                  _number_reader("temperature", config.get("current_temperature_template")), None, None, False)


BUILDERS: dict[str, Callable[[Entity, dict, int, bool], None]] = {
    "light": _light, "switch": _switch, "sensor": _sensor, "binary_sensor": _binary_sensor, "cover": _cover,
    "lock": _lock, "climate": _climate}
