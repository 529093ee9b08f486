"""The device object every adapter maps onto (docs/iot.md), and the one validation of an
operation against a device's typed properties, so that every invalid operation is answered
alike — a 400 `invalid_operation` that names the property and its range or options — whatever
adapter the device comes from."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from gateway.errors import ApiError, BadRequest, NotFound, ServiceUnavailable
from gateway.validation import finite_number

SWITCH_PROPERTIES = ("on", "locked", "open")  # what `switch` sets, the first a device has


@dataclass
class Device:
    """One device of one owner, as stored (the `iot_devices` row)."""
    owner: str
    id: str
    adapter: str
    type: str
    names: dict[str, str]
    room: str
    room_names: dict[str, str]
    properties: dict[str, dict[str, Any]]
    state: dict[str, Any]
    online: bool = True
    source: dict[str, Any] = field(default_factory=dict)  # the adapter's own (an MQTT discovery config)
    sort_key: int = 1000
    updated_at: datetime | None = None

    def public(self) -> dict:
        """The device object of the wire API."""
        return {"id": self.id, "name": self.names.get("en") or next(iter(self.names.values()), self.id),
                "names": self.names, "room": self.room, "room_names": self.room_names, "type": self.type,
                "adapter": self.adapter, "online": self.online, "state": self.state,
                "properties": self.properties, "updated_at": timestamp(self.updated_at)}

    def writable(self) -> list[str]:
        return [name for name, spec in self.properties.items() if spec.get("writable")]


def timestamp(moment: datetime | None = None) -> str:
    """RFC 3339 in UTC with milliseconds: 2026-11-24T06:00:00.000Z."""
    moment = (moment or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class InvalidOperation(BadRequest):
    error_type = "invalid_operation"

    def __init__(self, error: str, hint: str | None = None):
        super().__init__(error, hint=hint or "GET /api/v1/devices/{device_id} lists the device's properties, "
                                              "their types and ranges.")


class DeviceNotFound(NotFound):
    error_type = "device_not_found"


class OperationRefused(ApiError):
    status = 403
    error_type = "operation_refused"


class DeviceUnreachable(ServiceUnavailable):
    error_type = "device_unreachable"


def device_not_found(device_id: str) -> DeviceNotFound:
    return DeviceNotFound(f"No device {device_id!r}.", hint="GET /api/v1/devices lists the devices and their ids.")


def describe(name: str, spec: dict[str, Any]) -> str:
    """`brightness (an integer from 0 to 100 %)`: a property and what it takes."""
    return f"{name} ({takes(spec)})"


def takes(spec: dict[str, Any]) -> str:
    """What a property takes: `an integer from 0 to 100 %`, `one of cool, heat`..."""
    kind = spec.get("type")
    unit = f" {spec['unit']}" if spec.get("unit") else ""
    if kind == "bool":
        what = "true or false"
    elif kind == "enum":
        what = "one of " + ", ".join(str(option) for option in spec.get("options", []))
    elif kind in ("int", "number"):
        noun = "an integer" if kind == "int" else "a number"
        if "min" in spec and "max" in spec:
            what = f"{noun} from {_plain(spec['min'])} to {_plain(spec['max'])}{unit}"
        elif "min" in spec:
            what = f"{noun} of at least {_plain(spec['min'])}{unit}"
        elif "max" in spec:
            what = f"{noun} of at most {_plain(spec['max'])}{unit}"
        else:
            what = f"{noun}{unit}"
        if spec.get("step"):
            what += f" in steps of {_plain(spec['step'])}"
    else:
        what = "a string"
    return what


def _plain(number: Any) -> str:
    return f"{number:g}" if isinstance(number, float) else str(number)


def writable_summary(device: Device) -> str:
    names = [describe(name, device.properties[name]) for name in device.writable()]
    return ", ".join(names) if names else "none (it only reports)"


def check_value(device: Device, name: str, value: Any) -> Any:
    """`value` for property `name` of `device`, normalised (40.0 → 40 for an integer), or an
    InvalidOperation that names the property and what it takes."""
    spec = device.properties.get(name)
    if spec is None:
        raise InvalidOperation(f"{device.id} has no property {name!r}; its writable properties: "
                               f"{writable_summary(device)}.",
                               hint="Set one of the writable properties the device lists.")
    if not spec.get("writable"):
        raise InvalidOperation(f"{describe(name, spec)} of {device.id} is read-only.",
                               hint=f"Writable properties of {device.id}: {writable_summary(device)}.")
    kind = spec.get("type")
    wrong = InvalidOperation(f"{name} of {device.id} must be {takes(spec)}, "
                             f"not {value!r}.", hint=f"Send {describe(name, spec)}.")
    if kind == "bool":
        if not isinstance(value, bool):
            raise wrong
        return value
    if kind == "enum":
        if not isinstance(value, str) or value not in spec.get("options", []):
            raise wrong
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise wrong
        return value
    # int / number
    if not finite_number(value):
        raise wrong
    if kind == "int":
        if value != int(value):
            raise wrong
        value = int(value)
    low, high = spec.get("min"), spec.get("max")
    if (low is not None and value < low) or (high is not None and value > high):
        raise InvalidOperation(f"{name} of {device.id} is out of range: {value!r}; it takes "
                               f"{takes(spec)}.", hint=f"Send {describe(name, spec)}.")
    step = spec.get("step")
    if step:
        base = low if low is not None else 0
        steps = (value - base) / step
        if abs(steps - round(steps)) > 1e-9:
            raise InvalidOperation(f"{name} of {device.id} must be a multiple of {_plain(step)}: {value!r}; it takes "
                                   f"{takes(spec)}.",
                                   hint=f"Send {describe(name, spec)}.")
    return value


def requested_values(device: Device, operation: dict) -> dict[str, Any]:
    """The property values an operate body asks for (validated, all of them or none)."""
    action = operation.get("action")
    if action == "switch":
        if "property" in operation or "properties" in operation:
            raise InvalidOperation("A switch takes only `value` (true or false).",
                                   hint='Send {"action": "switch", "value": true}.')
        target = next((name for name in SWITCH_PROPERTIES if name in device.properties), None)
        if target is None:
            raise InvalidOperation(f"{device.id} cannot be switched; its writable properties: "
                                   f"{writable_summary(device)}.", hint='Use {"action": "set", ...}.')
        if "value" not in operation:
            raise InvalidOperation(f"A switch needs `value`: {describe(target, device.properties[target])}.",
                                   hint='Send {"action": "switch", "value": true}.')
        return {target: check_value(device, target, operation["value"])}
    if action == "set":
        single, many = "property" in operation, "properties" in operation
        if single == many:
            raise InvalidOperation("A set names either `property` with `value`, or `properties`; "
                                   f"writable properties of {device.id}: {writable_summary(device)}.",
                                   hint='Send {"action": "set", "property": "brightness", "value": 40} '
                                        'or {"action": "set", "properties": {...}}.')
        if single:
            if "value" not in operation:
                raise InvalidOperation(f"A set of {operation['property']!r} needs `value`.",
                                       hint='Send {"action": "set", "property": "brightness", "value": 40}.')
            if not isinstance(operation["property"], str):
                raise InvalidOperation("`property` must be a property's name; writable properties of "
                                       f"{device.id}: {writable_summary(device)}.")
            return {operation["property"]: check_value(device, operation["property"], operation["value"])}
        if "value" in operation:
            raise InvalidOperation("`value` goes with `property`, not with `properties`.")
        properties = operation["properties"]
        if not isinstance(properties, dict) or not properties:
            raise InvalidOperation("`properties` must name at least one property and its value; writable "
                                   f"properties of {device.id}: {writable_summary(device)}.")
        return {name: check_value(device, name, value) for name, value in properties.items()}
    raise InvalidOperation(f"Unknown action {action!r}; an action is `switch` (value true or false) or `set` "
                           f"(a property and its value); writable properties of {device.id}: "
                           f"{writable_summary(device)}.", hint='Send {"action": "switch", "value": true}.')


def changes_between(state: dict[str, Any], values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{property: {"from", "to"}} for each value that differs from the state."""
    return {name: {"from": state.get(name), "to": value} for name, value in values.items()
            if state.get(name) != value or name not in state}
