"""Home Assistant's MQTT discovery, read into our device object (docs/iot.md, "MQTT").

A device announces each entity with a retained JSON config on
`<prefix>/<component>/[<node_id>/]<object_id>/config` naming its state and command topics; an
empty config removes it (device-based discovery, `<prefix>/device/<id>/config` with its
components in `cmps`, is split into one config per component by mqtt.py). This module is pure:
a config in, an `Entity` out (discovery_entity.py) — its properties, how each state topic's
payload becomes property values, and which payloads an operation publishes, built per component
by discovery_components.py. Components: light (default and json schemas), switch, sensor,
binary_sensor, cover, lock, climate; JSON attributes become read-only properties. Abbreviated
keys and the `~` base topic are expanded; value templates are read (discovery_templates.py)
when they are the simple kind (`{{ value }}`, `{{ value_json.a.b }}`, `{{ value_json['a'] }}`
with `float`, `int`, `round(n)`, `lower`, `upper` filters)."""
from __future__ import annotations

from .discovery_components import BUILDERS
from .discovery_entity import Entity, slug
from .discovery_templates import DiscoveryError, check_template
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
