"""What the IoT service's endpoints take and answer, and the frames of its WebSocket
(docs/iot.md). The handlers validate with these, and the OpenAPI/AsyncAPI documents are
generated from them."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

from gateway.validation import MAX_OFFSET, finite_numbers_only

USER_ID = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
    "description": "Whose devices (the service credential and the administrator may name anyone, and without "
                   "it act on the administrator's home; a person may name only themself)."})


class OwnerQuery(marshmallow.Schema):
    user_id = USER_ID


class DeviceListQuery(marshmallow.Schema):
    room = fields.String(load_default=None, validate=validate.Length(min=1, max=64),
                         metadata={"description": "Only this room's devices (living_room, bedroom, entrance...)."})
    type = fields.String(load_default=None, validate=validate.Length(min=1, max=64),
                         metadata={"description": "Only devices of this type (light, air_conditioner...)."})
    user_id = USER_ID


class HistoryQuery(marshmallow.Schema):
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=200))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=MAX_OFFSET))
    user_id = USER_ID


class WatchQuery(marshmallow.Schema):
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
        "description": "The service credential or the administrator: watch this owner's devices only "
                       "(the service credential without it: every owner's)."})
    token = fields.String(load_default=None, metadata={
        "description": "An access token (browsers cannot set headers on a WebSocket)."})


class OperateBody(marshmallow.Schema):
    action = fields.String(required=True, metadata={
        "description": "`switch` (value true/false: on/off, for a lock locked/unlocked) or `set`."})
    value = fields.Raw(allow_none=True, validate=finite_numbers_only,
                       metadata={"description": "The switch's value, or the value of `property`."})
    property = fields.String(metadata={"description": "The property a `set` changes (with `value`)."})
    properties = fields.Dict(keys=fields.String(), values=fields.Raw(allow_none=True), validate=finite_numbers_only,
                             metadata={"description": "Several properties a `set` changes, all or none."})
    source = fields.String(load_default="api", validate=validate.Length(min=1, max=100), metadata={
        "description": "Who asked: api, assistant, console, automation:<rule id>..."})


class PropertySpec(marshmallow.Schema):
    type = fields.String(required=True, validate=validate.OneOf(["bool", "int", "number", "enum", "string"]))
    writable = fields.Boolean(required=True)
    min = fields.Float()
    max = fields.Float()
    step = fields.Float()
    unit = fields.String()
    options = fields.List(fields.String())
    precision = fields.Float(metadata={"description": "A reading's resolution (0.1 °C)."})
    description = fields.String()


class DeviceOut(marshmallow.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True, metadata={"description": "The English name."})
    names = fields.Dict(keys=fields.String(), values=fields.String(), required=True,
                        metadata={"description": "Names by language (en, zh)."})
    room = fields.String(required=True)
    room_names = fields.Dict(keys=fields.String(), values=fields.String(), required=True)
    type = fields.String(required=True, metadata={
        "description": "light, air_conditioner, temperature_sensor, humidity_sensor, curtain, lock; "
                       "from MQTT also switch, sensor, binary_sensor."})
    adapter = fields.String(required=True, validate=validate.OneOf(["simulation", "mqtt"]))
    online = fields.Boolean(required=True)
    state = fields.Dict(keys=fields.String(), values=fields.Raw(allow_none=True), required=True)
    properties = fields.Dict(keys=fields.String(), values=fields.Nested(PropertySpec), required=True)
    updated_at = fields.String(required=True, metadata={"description": "RFC 3339, UTC."})


class DeviceList(marshmallow.Schema):
    devices = fields.List(fields.Nested(DeviceOut), required=True)
    count = fields.Integer(required=True)


class DeviceAnswer(marshmallow.Schema):
    device = fields.Nested(DeviceOut, required=True)


class Change(marshmallow.Schema):
    from_ = fields.Raw(data_key="from", required=True, allow_none=True)
    to = fields.Raw(required=True, allow_none=True)


class Operation(marshmallow.Schema):
    id = fields.String(required=True)
    device_id = fields.String(required=True)
    user_id = fields.String(required=True, metadata={"description": "The device's owner."})
    action = fields.String(required=True)
    changes = fields.Dict(keys=fields.String(), values=fields.Nested(Change), required=True)
    source = fields.String(required=True)
    actor = fields.String(required=True, metadata={"description": "Who called: a person's id, or `service`."})
    success = fields.Boolean(required=True)
    error = fields.String(required=True, allow_none=True)
    created_at = fields.String(required=True)


class OperateAnswer(marshmallow.Schema):
    success = fields.Boolean(required=True)
    device = fields.Nested(DeviceOut, required=True)
    operation = fields.Nested(Operation, required=True)


class HistoryPage(marshmallow.Schema):
    operations = fields.List(fields.Nested(Operation), required=True)
    count = fields.Integer(required=True)
    total = fields.Integer(required=True)


# ---------------------------------------------------------------- WebSocket frames

class DeviceUpdateFrame(marshmallow.Schema):
    event_id = fields.String(required=True, metadata={"description": "Unique per change (dedupe on it)."})
    user_id = fields.String(required=True, metadata={"description": "The device's owner."})
    device_id = fields.String(required=True)
    device = fields.Nested(DeviceOut, required=True)
    changes = fields.Dict(keys=fields.String(), values=fields.Nested(Change), required=True)
    cause = fields.String(required=True, validate=validate.OneOf(["operation", "simulation", "mqtt"]))
    operation_id = fields.String(required=True, allow_none=True)
    timestamp = fields.String(required=True)


class DeviceRemovedFrame(marshmallow.Schema):
    event_id = fields.String(required=True)
    user_id = fields.String(required=True)
    device_id = fields.String(required=True)
    timestamp = fields.String(required=True)


class PongFrame(marshmallow.Schema):
    timestamp = fields.String(required=True)
