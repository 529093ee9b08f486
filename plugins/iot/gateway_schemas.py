"""The shapes the gateway's device endpoints take and answer, and its `device_update` frame: the
IoT service's wire API (docs/devices.md), which the gateway passes on unchanged."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

from gateway.validation import MAX_OFFSET

OPERATE_ACTIONS = ("switch", "set")
MAX_HISTORY_LIMIT = 200
MAX_SOURCE_CHARS = 100

OWNER = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
    "description": "Whose devices (the administrator's choice of person); anyone else may only name themself."})


class Property(marshmallow.Schema):
    """What one property of a device takes (its type, range or options, unit, whether it is writable)."""

    class Meta:
        unknown = marshmallow.INCLUDE

    type = fields.String(required=True, metadata={"description": "`bool`, `int`, `number`, `enum` or `string`."})
    writable = fields.Boolean(required=True)
    min = fields.Float(metadata={"description": "Lowest value (numbers)."})
    max = fields.Float(metadata={"description": "Highest value (numbers)."})
    step = fields.Float(metadata={"description": "Granularity (numbers)."})
    unit = fields.String(metadata={"description": "`%`, `°C`, `K`..."})
    options = fields.List(fields.String(), metadata={"description": "The values an `enum` takes."})


class Device(marshmallow.Schema):
    id = fields.String(required=True, metadata={"description": "Stable id, e.g. `living_room_light`."})
    name = fields.String(required=True, metadata={"description": "English name."})
    names = fields.Dict(keys=fields.String(), values=fields.String(), required=True,
                        metadata={"description": "Names by language: `en`, `zh`."})
    room = fields.String(required=True, metadata={"description": "Room id, e.g. `living_room`."})
    room_names = fields.Dict(keys=fields.String(), values=fields.String(), required=True,
                             metadata={"description": "The room's names by language."})
    type = fields.String(required=True, metadata={
        "description": "`light`, `air_conditioner`, `temperature_sensor`, `humidity_sensor`, `curtain`, `lock`, "
                       "or another type a real (MQTT) device announces."})
    adapter = fields.String(required=True, metadata={"description": "`simulation` or `mqtt`."})
    online = fields.Boolean(required=True)
    state = fields.Dict(keys=fields.String(), required=True, metadata={
        "description": "The current value of each property, e.g. `{\"on\": true, \"brightness\": 80}`."})
    properties = fields.Dict(keys=fields.String(), values=fields.Nested(Property), required=True)
    updated_at = fields.String(required=True, metadata={"description": "RFC 3339: the state's last change."})


class Change(marshmallow.Schema):
    from_ = fields.Raw(required=True, data_key="from", allow_none=True, metadata={"description": "Value before."})
    to = fields.Raw(required=True, allow_none=True, metadata={"description": "Value after."})


CHANGES = fields.Dict(keys=fields.String(), values=fields.Nested(Change), required=True, metadata={
    "description": "Each changed property: `{\"brightness\": {\"from\": 80, \"to\": 40}}`."})


class Operation(marshmallow.Schema):
    """One operation of a device, as recorded in its history (successful or not)."""
    id = fields.String(required=True)
    device_id = fields.String(required=True)
    user_id = fields.String(required=True, metadata={"description": "The device's owner."})
    action = fields.String(required=True, metadata={"description": "`switch` or `set`."})
    changes = CHANGES
    source = fields.String(required=True, metadata={
        "description": "Who asked: `api` (a person, through the gateway), `assistant` (the assistant's tools), "
                       "`automation:<rule id>`, `console`..."})
    actor = fields.String(required=True, metadata={"description": "The identity that called the IoT service."})
    success = fields.Boolean(required=True)
    error = fields.String(required=True, allow_none=True)
    created_at = fields.String(required=True, metadata={"description": "RFC 3339."})


class DeviceList(marshmallow.Schema):
    devices = fields.List(fields.Nested(Device), required=True)
    count = fields.Integer(required=True)


class DeviceAnswer(marshmallow.Schema):
    device = fields.Nested(Device, required=True)


class Operated(marshmallow.Schema):
    success = fields.Boolean(required=True, metadata={"description": "Always true (a refusal is an error)."})
    device = fields.Nested(Device, required=True, metadata={"description": "The device after the operation."})
    operation = fields.Nested(Operation, required=True)


class History(marshmallow.Schema):
    operations = fields.List(fields.Nested(Operation), required=True, metadata={"description": "Newest first."})
    count = fields.Integer(required=True, metadata={"description": "Operations on this page."})
    total = fields.Integer(required=True, metadata={"description": "Operations of the device in all."})


class ListQuery(marshmallow.Schema):
    room = fields.String(load_default=None, validate=validate.Length(min=1, max=64),
                         metadata={"description": "Only this room's devices (room id, e.g. `bedroom`)."})
    type = fields.String(load_default=None, validate=validate.Length(min=1, max=64),
                         metadata={"description": "Only devices of this type (e.g. `light`)."})
    user_id = OWNER


class OwnerQuery(marshmallow.Schema):
    user_id = OWNER


class HistoryQuery(marshmallow.Schema):
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=MAX_HISTORY_LIMIT))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=MAX_OFFSET))
    user_id = OWNER


class OperateBody(marshmallow.Schema):
    """One of `{"action": "switch", "value": true}`, `{"action": "set", "property": "brightness",
    "value": 40}` or `{"action": "set", "properties": {...}}` (all or nothing). The IoT service
    checks each property and value against the device and names what is wrong."""
    action = fields.String(required=True, validate=validate.OneOf(OPERATE_ACTIONS), metadata={
        "description": "`switch` (on/off; for a lock: locked) or `set` (one property, or several at once)."})
    value = fields.Raw(allow_none=True, metadata={
        "description": "`switch`: true or false; `set` with `property`: the new value."})
    property = fields.String(validate=validate.Length(min=1, max=64), metadata={
        "description": "`set`: the property to change, e.g. `brightness`."})
    properties = fields.Dict(keys=fields.String(validate=validate.Length(min=1, max=64)), metadata={
        "description": "`set`: several properties to change together, e.g. "
                       "`{\"mode\": \"cool\", \"target_temperature\": 24}`."})
    source = fields.String(validate=validate.Length(min=1, max=MAX_SOURCE_CHARS), metadata={
        "description": "Who asks, recorded in the history; kept only from another service (the assistant's tools "
                       "send `assistant`): a person's operation is always `api`."})


class DeviceUpdateFrame(marshmallow.Schema):
    """The `device_update` frame: one change of one of the person's devices."""
    event_id = fields.String(required=True, metadata={"description": "Unique per change (dedupe on it)."})
    device_id = fields.String(required=True)
    device = fields.Nested(Device, required=True, metadata={"description": "The whole device after the change."})
    changes = CHANGES
    cause = fields.String(required=True, metadata={
        "description": "`operation` (someone operated it), `simulation` (a simulated reading drifted) or `mqtt` "
                       "(a real device reported it)."})
    operation_id = fields.String(required=True, allow_none=True,
                                 metadata={"description": "The history entry, when an operation caused it."})
    timestamp = fields.Integer(required=True, metadata={"description": "When it changed, ms since the epoch."})
