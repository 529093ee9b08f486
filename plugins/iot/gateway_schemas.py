"""What the gateway's device endpoints take, and its `device_update` frame. What they answer is
the IoT service's own answer, passed on unchanged: its schemas (schemas.py) describe both."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

from gateway.validation import MAX_OFFSET, finite_numbers_only

from .schemas import Change, DeviceOut

OPERATE_ACTIONS = ("switch", "set")
MAX_HISTORY_LIMIT = 200
MAX_SOURCE_CHARS = 100

OWNER = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
    "description": "Whose devices (the administrator's choice of person); anyone else may only name themself."})


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
    value = fields.Raw(allow_none=True, validate=finite_numbers_only, metadata={
        "description": "`switch`: true or false; `set` with `property`: the new value."})
    property = fields.String(validate=validate.Length(min=1, max=64), metadata={
        "description": "`set`: the property to change, e.g. `brightness`."})
    properties = fields.Dict(keys=fields.String(validate=validate.Length(min=1, max=64)),
                             validate=finite_numbers_only, metadata={
        "description": "`set`: several properties to change together, e.g. "
                       "`{\"mode\": \"cool\", \"target_temperature\": 24}`."})
    source = fields.String(validate=validate.Length(min=1, max=MAX_SOURCE_CHARS), metadata={
        "description": "Who asks, recorded in the history; kept only from another service (the assistant's tools "
                       "send `assistant`): a person's operation is always `api`."})


class DeviceUpdateFrame(marshmallow.Schema):
    """The `device_update` frame: one change of one of the person's devices."""
    event_id = fields.String(required=True, metadata={"description": "Unique per change (dedupe on it)."})
    device_id = fields.String(required=True)
    device = fields.Nested(DeviceOut, required=True, metadata={"description": "The whole device after the change."})
    changes = fields.Dict(keys=fields.String(), values=fields.Nested(Change), required=True, metadata={
        "description": "Each changed property: `{\"on\": {\"from\": false, \"to\": true}}`."})
    cause = fields.String(required=True, metadata={
        "description": "`operation` (someone operated it), `simulation` (a simulated reading drifted) or `mqtt` "
                       "(a real device reported it)."})
    operation_id = fields.String(required=True, allow_none=True,
                                 metadata={"description": "The history entry, when an operation caused it."})
    timestamp = fields.Integer(required=True, metadata={"description": "When it changed, ms since the epoch."})
