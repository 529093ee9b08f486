"""Reading Home Assistant discovery configs into our device object (no broker needed): the
abbreviated form and the `~` base topic, simple value templates, the json light schema in both
directions, climate power and modes, covers without a position, and configs refused."""
from __future__ import annotations

import json

import pytest

from plugins.iot.discovery import entity_from, parse_topic
from plugins.iot.discovery_templates import DiscoveryError, render_value


def test_topics_are_parsed_with_and_without_a_node_id():
    assert parse_topic("homeassistant/light/kitchen/config", "homeassistant") == ("light", None, "kitchen")
    assert parse_topic("homeassistant/sensor/node1/temp/config", "homeassistant") == ("sensor", "node1", "temp")
    assert parse_topic("a/b/sensor/x/config", "a/b") == ("sensor", None, "x")
    assert parse_topic("homeassistant/light/kitchen/state", "homeassistant") is None
    assert parse_topic("other/light/kitchen/config", "homeassistant") is None


@pytest.mark.parametrize("template, payload, value", [
    (None, "21.5", "21.5"),
    ("{{ value }}", "ON", "ON"),
    ("{{ value_json.temperature }}", '{"temperature": 21.5}', 21.5),
    ("{{value_json['sensor']['t'] | round(1)}}", '{"sensor": {"t": 21.54}}', 21.5),
    ("{{ value_json.list[1] | int }}", '{"list": [1, "7.9"]}', 7),
    ("{{ value_json.state | lower }}", '{"state": "ON"}', "on"),
    ("{{ value_json.missing }}", '{"temperature": 1}', None),
    ("{{ value_json.temperature }}", "not json", None),
    ("{{ value | float }}", "n/a", None),
    ("{{ value | int }}", "1e309", None),  # int(inf): OverflowError
])
def test_simple_value_templates(template, payload, value):
    assert render_value(template, payload) == value


def test_templates_beyond_the_simple_kind_are_refused():
    for template in ("{% if value == 'a' %}1{% endif %}", "{{ states('sensor.x') }}", "{{ value | tojson }}"):
        with pytest.raises(DiscoveryError):
            render_value(template, "1")


def test_a_json_light_reads_and_writes_its_json_payloads():
    entity = entity_from("ha/light/strip/config", "light", None, "strip", {
        "name": "LED strip", "schema": "json", "cmd_t": "~/set", "stat_t": "~/state", "~": "zigbee/strip",
        "supported_color_modes": ["color_temp"], "brightness_scale": 254})
    assert entity.type == "light" and set(entity.properties) == {"on", "brightness", "color_temp"}
    assert entity.properties["color_temp"] == {"type": "int", "min": 2000, "max": 6536, "unit": "K", "writable": True}
    assert entity.read("zigbee/strip/state", json.dumps({"state": "ON", "brightness": 127, "color_temp": 250})) == {
        "on": True, "brightness": 50, "color_temp": 4000}
    [publish] = entity.commands({"brightness": 100, "color_temp": 2500}, {})
    assert publish.topic == "zigbee/strip/set"
    assert json.loads(publish.payload) == {"state": "ON", "brightness": 254, "color_temp": 400}
    assert entity.optimistic == set()


def test_climate_switches_through_its_modes_or_its_power_topic():
    config = {"name": "AC", "mode_command_topic": "ac/mode/set", "modes": ["off", "cool", "dry"],
              "fan_mode_command_topic": "ac/fan/set", "fan_modes": ["low", "high"]}
    entity = entity_from("ha/climate/ac/config", "climate", None, "ac", config)
    assert entity.properties["mode"]["options"] == ["cool", "dry"]
    assert [(p.topic, p.payload) for p in entity.commands({"on": True}, {"mode": "dry"})] == [("ac/mode/set", "dry")]
    assert [(p.topic, p.payload) for p in entity.commands({"on": False}, {})] == [("ac/mode/set", "off")]
    assert [(p.topic, p.payload) for p in entity.commands({"fan": "high"}, {})] == [("ac/fan/set", "high")]
    powered = entity_from("ha/climate/ac/config", "climate", None, "ac",
                          {**config, "power_command_topic": "ac/power", "modes": ["cool", "heat"]})
    assert [(p.topic, p.payload) for p in powered.commands({"on": True, "mode": "heat"}, {})] == [
        ("ac/power", "ON"), ("ac/mode/set", "heat")]


def test_a_cover_without_a_position_opens_or_closes():
    entity = entity_from("ha/cover/garage/config", "cover", None, "garage", {
        "name": "Garage", "device_class": "garage", "command_topic": "garage/set", "state_topic": "garage/state"})
    assert entity.type == "cover" and entity.properties["position"]["writable"] is True
    assert [p.payload for p in entity.commands({"position": 80}, {})] == ["OPEN"]
    assert [p.payload for p in entity.commands({"position": 10}, {})] == ["CLOSE"]
    assert entity.read("garage/state", "closed") == {"position": 0}


def test_ids_never_take_a_simulated_devices_id_and_bad_configs_are_refused():
    entity = entity_from("ha/light/bedroom_light/config", "light", None, "bedroom_light", {"command_topic": "x"})
    assert entity.device_id == "mqtt_bedroom_light"
    with pytest.raises(DiscoveryError, match="not supported"):
        entity_from("ha/vacuum/robot/config", "vacuum", None, "robot", {"command_topic": "x"})
    with pytest.raises(DiscoveryError, match="names no topic"):
        entity_from("ha/sensor/empty/config", "sensor", None, "empty", {"name": "nothing"})


def test_a_config_with_a_template_beyond_the_simple_kind_is_left_out_when_announced():
    with pytest.raises(DiscoveryError, match="not a simple one"):
        entity_from("ha/sensor/t/config", "sensor", None, "t", {
            "state_topic": "t/state", "value_template": "{{ value_json.t if value_json.ok else 0 }}"})
    with pytest.raises(DiscoveryError, match="filter"):
        entity_from("ha/sensor/t/config", "sensor", None, "t", {
            "state_topic": "t/state", "value_template": "{{ value_json.t | tojson }}"})
    assert entity_from("ha/switch/ws/config", "switch", None, "ws", {"command_topic": "x"}).device_id == "mqtt_ws"


def test_json_attributes_become_read_only_properties_when_first_seen():
    entity = entity_from("ha/sensor/door/config", "sensor", None, "door", {
        "name": "Door contact", "stat_t": "z2m/door", "val_tpl": "{{ value_json.contact }}", "json_attr_t": "z2m/door"})
    new, values = entity.attributes(json.dumps({"contact": "closed", "battery": 97, "tamper": False,
                                                "Link Quality": 120, "nested": {"a": 1}, "value": 3}))
    # `value` is the sensor's own property: an attribute never takes its place.
    assert new == {"contact": {"type": "string", "writable": False, "description": "an attribute the device reports"},
                   "battery": {"type": "number", "writable": False, "description": "an attribute the device reports"},
                   "tamper": {"type": "bool", "writable": False, "description": "an attribute the device reports"},
                   "link_quality": {"type": "number", "writable": False,
                                    "description": "an attribute the device reports"}}
    assert values == {"contact": "closed", "battery": 97, "tamper": False, "link_quality": 120}
    entity.add_attributes(new)
    assert entity.attributes(json.dumps({"battery": 96}))[0] == {}  # known now
    assert entity.source()["attributes"]["battery"]["type"] == "number"
    many = {f"extra_{n}": n for n in range(40)}
    assert len(entity.attributes(json.dumps(many))[0]) == 20 - 4  # at most 20 in all
    assert entity.attributes("not json") == ({}, {})
