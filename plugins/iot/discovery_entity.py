"""A discovered entity: its properties, how each state topic's payload becomes property values,
and which payloads an operation publishes (docs/iot.md, "MQTT")."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from gateway.validation import finite_number

from .discovery_templates import render_value

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
