"""Home Assistant's MQTT discovery, read into our device object (docs/iot.md, "MQTT").

A device announces each entity with a retained JSON config on
`<prefix>/<component>/[<node_id>/]<object_id>/config` naming its state and command topics; an
empty config removes it (device-based discovery, `<prefix>/device/<id>/config` with its
components in `cmps`, is split into one config per component by mqtt.py). This module is pure:
a config in, an `Entity` out — its properties, how each state topic's payload becomes property
values, and which payloads an operation publishes. Components: light (default and json
schemas), switch, sensor, binary_sensor, cover, lock, climate; JSON attributes become read-only
properties. Abbreviated keys and the `~` base topic are expanded; value templates are read when
they are the simple kind (`{{ value }}`, `{{ value_json.a.b }}`, `{{ value_json['a'] }}` with
`float`, `int`, `round(n)`, `lower`, `upper` filters)."""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from gateway.validation import finite_number

from .simulation import DEVICE_IDS

COMPONENTS = ("light", "switch", "sensor", "binary_sensor", "cover", "lock", "climate")

# Home Assistant's abbreviations of the keys read here (homeassistant/components/mqtt/abbreviations.py).
ABBREVIATIONS = {
    "avty": "availability", "avty_t": "availability_topic", "pl_avail": "payload_available",
    "pl_not_avail": "payload_not_available", "bri_cmd_t": "brightness_command_topic",
    "bri_scl": "brightness_scale", "bri_stat_t": "brightness_state_topic", "bri_val_tpl": "brightness_value_template",
    "clr_temp_cmd_t": "color_temp_command_topic", "clr_temp_stat_t": "color_temp_state_topic",
    "clr_temp_val_tpl": "color_temp_value_template", "clr_temp_k": "color_temp_kelvin",
    "cmd_t": "command_topic", "cmd_tpl": "command_template", "curr_temp_t": "current_temperature_topic",
    "curr_temp_tpl": "current_temperature_template", "dev": "device", "dev_cla": "device_class",
    "fan_mode_cmd_t": "fan_mode_command_topic", "fan_mode_stat_t": "fan_mode_state_topic",
    "fan_mode_stat_tpl": "fan_mode_state_template", "fan_modes": "fan_modes", "json_attr_t": "json_attributes_topic",
    "json_attr_tpl": "json_attributes_template",
    "max_mirs": "max_mireds", "min_mirs": "min_mireds", "max_kvn": "max_kelvin", "min_kvn": "min_kelvin",
    "max_temp": "max_temp", "min_temp": "min_temp", "mode_cmd_t": "mode_command_topic",
    "mode_stat_t": "mode_state_topic", "mode_stat_tpl": "mode_state_template", "modes": "modes",
    "name": "name", "obj_id": "object_id", "opt": "optimistic", "pl_cls": "payload_close", "pl_lock": "payload_lock",
    "pl_off": "payload_off", "pl_on": "payload_on", "pl_open": "payload_open", "pl_stop": "payload_stop",
    "pl_unlk": "payload_unlock", "pos_clsd": "position_closed", "pos_open": "position_open",
    "pos_t": "position_topic", "pos_tpl": "position_template", "pow_cmd_t": "power_command_topic",
    "qos": "qos", "ret": "retain", "schema": "schema", "set_pos_t": "set_position_topic",
    "set_pos_tpl": "set_position_template", "stat_clsd": "state_closed", "stat_locked": "state_locked",
    "stat_off": "state_off", "stat_on": "state_on", "stat_open": "state_open", "stat_t": "state_topic",
    "stat_unlocked": "state_unlocked", "stat_val_tpl": "state_value_template", "sup_clrm": "supported_color_modes",
    "temp_cmd_t": "temperature_command_topic", "temp_stat_t": "temperature_state_topic",
    "temp_stat_tpl": "temperature_state_template", "temp_step": "temp_step", "uniq_id": "unique_id",
    "unit_of_meas": "unit_of_measurement", "val_tpl": "value_template", "stat_cla": "state_class",
}
DEVICE_ABBREVIATIONS = {"name": "name", "sa": "suggested_area", "ids": "identifiers", "mf": "manufacturer",
                        "mdl": "model"}


class DiscoveryError(ValueError):
    """A config this adapter cannot use (said in the log, the device left out)."""


def expand(config: dict) -> dict:
    """Abbreviated keys spelled out, `~` replaced by the base topic."""
    expanded = {ABBREVIATIONS.get(key, key): value for key, value in config.items()}
    if isinstance(expanded.get("device"), dict):
        expanded["device"] = {DEVICE_ABBREVIATIONS.get(k, k): v for k, v in expanded["device"].items()}
    base = expanded.pop("~", None)
    if isinstance(base, str):
        for key, value in list(expanded.items()):
            if (key.endswith("_topic") or key == "topic") and isinstance(value, str):
                if value.startswith("~"):
                    expanded[key] = base + value[1:]
                elif value.endswith("~"):
                    expanded[key] = value[:-1] + base
    availability = expanded.get("availability")
    if isinstance(availability, list):
        expanded["availability"] = [{ABBREVIATIONS.get(k, {"t": "topic"}.get(k, k)): v for k, v in item.items()}
                                    for item in availability if isinstance(item, dict)]
    return expanded


# ---------------------------------------------------------------- templates

_TEMPLATE = re.compile(r"^\{\{\s*(.+?)\s*\}\}$", re.S)
_PATH_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*['\"]([^'\"]+)['\"]\s*\]|\[\s*(\d+)\s*\]")


def render_value(template: str | None, payload: str) -> Any:
    """The value a simple Home Assistant value template yields for `payload`; None when the
    payload does not have it. A template beyond the simple kind is a DiscoveryError."""
    if not template:
        return payload
    match = _TEMPLATE.match(template.strip())
    if match is None:
        raise DiscoveryError(f"value template {template!r} is not a simple one")
    expression, *filters = [part.strip() for part in match.group(1).split("|")]
    value: Any
    if expression == "value":
        value = payload
    elif expression.startswith("value_json"):
        try:
            value = json.loads(payload)
        except ValueError:
            return None
        rest = expression[len("value_json"):]
        position = 0
        while position < len(rest):
            part = _PATH_PART.match(rest, position)
            if part is None:
                raise DiscoveryError(f"value template {template!r} is not a simple one")
            key = part.group(1) or part.group(2)
            if key is not None:
                value = value.get(key) if isinstance(value, dict) else None
            else:
                index = int(part.group(3))
                value = value[index] if isinstance(value, list) and index < len(value) else None
            position = part.end()
            if value is None:
                return None
    else:
        raise DiscoveryError(f"value template {template!r} is not a simple one")
    for name in filters:
        value = _filter(name, value, template)
        if value is None:
            return None
    return value


FILTERS = ("float", "int", "round", "lower", "upper", "string", "trim")


def check_template(template: str) -> None:
    """A DiscoveryError unless `template` is of the simple kind `render_value` reads."""
    match = _TEMPLATE.match(template.strip())
    if match is None:
        raise DiscoveryError(f"value template {template!r} is not a simple one")
    expression, *filters = [part.strip() for part in match.group(1).split("|")]
    if expression != "value":
        if not expression.startswith("value_json"):
            raise DiscoveryError(f"value template {template!r} is not a simple one")
        rest, position = expression[len("value_json"):], 0
        while position < len(rest):
            part = _PATH_PART.match(rest, position)
            if part is None:
                raise DiscoveryError(f"value template {template!r} is not a simple one")
            position = part.end()
    for name in filters:
        call = re.fullmatch(r"([a-z_]+)\s*(?:\(\s*([^)]*)\s*\))?", name)
        if call is None or call.group(1) not in FILTERS:
            raise DiscoveryError(f"value template {template!r} uses a filter this adapter does not read: {name}")


def _filter(name: str, value: Any, template: str) -> Any:
    call = re.fullmatch(r"([a-z_]+)\s*(?:\(\s*([^)]*)\s*\))?", name)
    if call is None:
        raise DiscoveryError(f"value template {template!r} is not a simple one")
    function, argument = call.group(1), call.group(2)
    try:
        if function == "float":
            return float(value)
        if function == "int":
            return int(float(value))
        if function == "round":
            return round(float(value), int(argument or 0))
        if function == "lower":
            return str(value).lower()
        if function == "upper":
            return str(value).upper()
        if function in ("string", "trim"):
            return str(value).strip()
    except (TypeError, ValueError, OverflowError):  # OverflowError: `int` of an infinite float
        return None
    raise DiscoveryError(f"value template {template!r} uses the filter {function!r}")


def render_command(template: str | None, value: Any) -> str:
    """A command payload: the value, or a simple command template with `{{ value }}` in it."""
    text = value if isinstance(value, str) else json.dumps(value)
    if not template:
        return text
    return re.sub(r"\{\{\s*value\s*\}\}", text, template)


def number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        result = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past any float
        return None
    return result if math.isfinite(result) else None


# ---------------------------------------------------------------- entities

Reader = Callable[[str], dict[str, Any]]  # a state topic's payload -> property values


@dataclass
class Publish:
    topic: str
    payload: str
    qos: int = 0
    retain: bool = False


@dataclass
class Entity:
    discovery_topic: str
    component: str
    node_id: str | None
    object_id: str
    config: dict
    device_id: str
    type: str
    name: str
    room: str
    room_name: str
    properties: dict[str, dict[str, Any]]
    readers: dict[str, list[Reader]] = field(default_factory=dict)
    # property -> function(values of this operation, current state) -> publishes
    writers: dict[str, Callable[[dict, dict], list[Publish]]] = field(default_factory=dict)
    optimistic: set[str] = field(default_factory=set)
    availability: list[tuple[str, str, str]] = field(default_factory=list)  # topic, available, not available
    attributes_topic: str | None = None
    attributes_template: str | None = None
    attribute_names: set[str] = field(default_factory=set)

    def attributes(self, payload: str) -> tuple[dict[str, dict], dict[str, Any]]:
        """(new property specs, values) of a `json_attributes_topic` message: its scalar members
        become read-only properties (at most MAX_ATTRIBUTES, none in place of one of the entity's
        own properties), declared when first seen."""
        try:
            data = render_value(self.attributes_template, payload) if self.attributes_template \
                else json.loads(payload)
            if isinstance(data, str):
                data = json.loads(data)
        except ValueError:
            return {}, {}
        if not isinstance(data, dict):
            return {}, {}
        new: dict[str, dict] = {}
        values: dict[str, Any] = {}
        for key, value in data.items():
            name = slug(str(key))
            if name in self.properties and name not in self.attribute_names:
                continue
            kind = ("bool" if isinstance(value, bool) else "number" if isinstance(value, (int, float))
                    else "string" if isinstance(value, str) else None)
            if kind is None or (kind == "number" and not finite_number(value)):
                continue
            if name not in self.properties and name not in new:
                if len(self.attribute_names) + len(new) >= MAX_ATTRIBUTES:
                    continue
                new[name] = {"type": kind, "writable": False, "description": "an attribute the device reports"}
            values[name] = value[:200] if isinstance(value, str) else value
        return new, values

    def add_attributes(self, specs: dict[str, dict]) -> None:
        self.properties.update(specs)
        self.attribute_names.update(specs)

    def read(self, topic: str, payload: str) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for reader in self.readers.get(topic, []):
            values.update(reader(payload))
        return {name: value for name, value in values.items() if name in self.properties}

    def commands(self, values: dict[str, Any], state: dict[str, Any]) -> list[Publish]:
        publishes: list[Publish] = []
        done: set[int] = set()
        for name in values:
            writer = self.writers.get(name)
            if writer is not None and id(writer) not in done:
                done.add(id(writer))  # a writer that covers several properties (json light) runs once
                publishes.extend(writer(values, state))
        return publishes

    def initial_state(self) -> dict[str, Any]:
        return {name: _DEFAULTS.get(spec["type"]) for name, spec in self.properties.items()}

    def source(self) -> dict:
        return {"discovery_topic": self.discovery_topic, "component": self.component, "node_id": self.node_id,
                "object_id": self.object_id, "config": self.config,
                "attributes": {name: self.properties[name] for name in sorted(self.attribute_names)}}


MAX_ATTRIBUTES = 20
_DEFAULTS: dict[str, Any] = {"bool": None, "int": None, "number": None, "enum": None, "string": None}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_") or "device"


def parse_topic(topic: str, prefix: str) -> tuple[str, str | None, str] | None:
    """(component, node_id, object_id) of a discovery config topic, None for another topic."""
    parts = topic.split("/")
    head = prefix.split("/")
    if parts[:len(head)] != head or parts[-1] != "config":
        return None
    middle = parts[len(head):-1]
    if len(middle) == 2:
        return middle[0], None, middle[1]
    if len(middle) == 3:
        return middle[0], middle[1], middle[2]
    return None


def entity_from(topic: str, component: str, node_id: str | None, object_id: str, raw: dict,
                device_id: str | None = None) -> Entity:
    """The entity a discovery config describes. `device_id`: the id it had before (kept)."""
    if component not in COMPONENTS:
        raise DiscoveryError(f"component {component!r} is not supported (supported: {', '.join(COMPONENTS)})")
    config = expand(raw)
    for key, template in config.items():  # a template beyond the simple kind: left out now, not at each message
        if key.endswith("_template") and "command" not in key and key != "set_position_template" \
                and isinstance(template, str):
            check_template(template)
    if device_id is None:
        device_id = slug(f"{node_id}_{object_id}" if node_id else object_id)
        if device_id in DEVICE_IDS or device_id == "ws":  # `ws` is the WebSocket's path
            device_id = f"mqtt_{device_id}"
    described = config.get("device")
    device: dict = described if isinstance(described, dict) else {}
    name = config.get("name") or device.get("name") or object_id
    if config.get("name") and device.get("name") and not str(config["name"]).startswith(str(device["name"])):
        name = f"{device['name']} {config['name']}"
    area = device.get("suggested_area")
    entity = Entity(discovery_topic=topic, component=component, node_id=node_id, object_id=object_id, config=raw,
                    device_id=device_id, type=component, name=str(name), room=slug(area) if area else "unassigned",
                    room_name=str(area) if area else "", properties={})
    qos, retain = int(config.get("qos", 0) or 0), bool(config.get("retain", False))
    _availability(entity, config)
    BUILDERS[component](entity, config, qos, retain)
    if isinstance(config.get("json_attributes_topic"), str) and config["json_attributes_topic"]:
        entity.attributes_topic = config["json_attributes_topic"]
        template = config.get("json_attributes_template")
        entity.attributes_template = template if isinstance(template, str) else None
    if not entity.readers and not entity.writers:
        raise DiscoveryError(f"{topic}: the config names no topic this adapter can use")
    return entity


def _availability(entity: Entity, config: dict) -> None:
    entries = config.get("availability")
    if isinstance(entries, list):
        for item in entries:
            if isinstance(item.get("topic"), str):
                entity.availability.append((item["topic"], str(item.get("payload_available", "online")),
                                            str(item.get("payload_not_available", "offline"))))
    if isinstance(config.get("availability_topic"), str):
        entity.availability.append((config["availability_topic"], str(config.get("payload_available", "online")),
                                    str(config.get("payload_not_available", "offline"))))


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


def _light(entity: Entity, config: dict, qos: int, retain: bool) -> None:
    entity.type = "light"
    optimistic = bool(config.get("optimistic", False))
    scale = number(config.get("brightness_scale")) or 255
    kelvin = bool(config.get("color_temp_kelvin", False))
    if kelvin:
        low, high = int(config.get("min_kelvin", 2000)), int(config.get("max_kelvin", 6535))
    else:  # mireds: the warmest is the most mireds
        low = round(1_000_000 / float(config.get("max_mireds", 500)))
        high = round(1_000_000 / float(config.get("min_mireds", 153)))

    def to_kelvin(raw: float) -> int:
        return int(round(raw)) if kelvin else int(round(1_000_000 / raw)) if raw else low

    def from_kelvin(value: int) -> int:
        return value if kelvin else int(round(1_000_000 / value))

    brightness_spec = {"type": "int", "min": 0, "max": 100, "unit": "%"}
    color_spec = {"type": "int", "min": low, "max": high, "unit": "K"}
    command_topic = config.get("command_topic")
    if config.get("schema") == "json":
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
                values["brightness"] = int(round(raw / scale * 100))
            if (raw := number(data.get("color_temp"))) is not None and raw > 0:
                values["color_temp"] = to_kelvin(raw)
            return values

        def write_json(values: dict, state: dict) -> list[Publish]:
            body: dict[str, Any] = {}
            if "on" in values:
                body["state"] = "ON" if values["on"] else "OFF"
            else:
                body["state"] = "ON"  # a brightness or a colour alone turns the light on, as in HA
            if "brightness" in values:
                body["brightness"] = int(round(values["brightness"] / 100 * scale))
            if "color_temp" in values:
                body["color_temp"] = from_kelvin(values["color_temp"])
            return [Publish(str(command_topic), json.dumps(body), qos, retain)]

        state_topic = config.get("state_topic")
        _property(entity, "on", {"type": "bool"}, state_topic, read_json, command_topic, write_json, optimistic)
        if has_brightness:
            _property(entity, "brightness", brightness_spec, None, None, command_topic, write_json, optimistic)
        if has_color_temp:
            _property(entity, "color_temp", color_spec, None, None, command_topic, write_json, optimistic)
        for name in ("brightness", "color_temp"):
            if name in entity.properties and isinstance(state_topic, str) and not optimistic:
                entity.optimistic.discard(name)
        return

    payload_on, payload_off = str(config.get("payload_on", "ON")), str(config.get("payload_off", "OFF"))

    def write_on(values: dict, state: dict) -> list[Publish]:
        return [Publish(str(command_topic), payload_on if values["on"] else payload_off, qos, retain)]

    _property(entity, "on", {"type": "bool"}, config.get("state_topic"),
              _on_off({"state_on": payload_on, "state_off": payload_off, **config}, "state_value_template"),
              command_topic, write_on, optimistic)
    if config.get("brightness_command_topic") or config.get("brightness_state_topic"):
        topic = config.get("brightness_command_topic")
        _property(entity, "brightness", brightness_spec, config.get("brightness_state_topic"),
                  _number_reader("brightness", config.get("brightness_value_template"),
                                 lambda raw: int(round(raw / scale * 100))),
                  topic, lambda values, state: [Publish(str(topic), str(int(round(values["brightness"] / 100 * scale))),
                                                        qos, retain)], optimistic)
    if config.get("color_temp_command_topic") or config.get("color_temp_state_topic"):
        topic_ct = config.get("color_temp_command_topic")
        _property(entity, "color_temp", color_spec, config.get("color_temp_state_topic"),
                  _number_reader("color_temp", config.get("color_temp_value_template"), to_kelvin),
                  topic_ct, lambda values, state: [Publish(str(topic_ct), str(from_kelvin(values["color_temp"])),
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
