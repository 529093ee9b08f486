"""The notifications plugin's settings, request schemas, answers and WebSocket frame."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

from gateway.plugins import PluginSettings
from gateway.validation import MAX_OFFSET

NOTIFICATION_TYPES = ("info", "warning", "success", "thinking", "reminder")
MAX_PAGE = 200


class NotificationSettings(PluginSettings):
    max_missed = fields.Integer(load_default=50, validate=validate.Range(min=0, max=1000), metadata={
        "description": "Most unread notifications a returning device is sent (the newest), on its own connection."})
    device_heartbeat = fields.Float(load_default=30.0, validate=validate.Range(min=0.1), metadata={
        "description": "Seconds between marks that a device is still connected: after a crash it is re-sent at "
                       "most what came in this long before."})
    retention_days = fields.Integer(load_default=90, validate=validate.Range(min=1), metadata={
        "description": "Days a notification stays in the inbox."})


class PushBody(marshmallow.Schema):
    user_id = fields.String(required=True, validate=validate.Length(min=1, max=128))
    type = fields.String(required=True, validate=validate.OneOf(NOTIFICATION_TYPES))
    title = fields.String(required=True, validate=validate.Length(min=1, max=200))
    body = fields.String(required=True, validate=validate.Length(max=4000))
    data = fields.Dict(keys=fields.String(), load_default=dict)


class NotificationPayload(marshmallow.Schema):
    """spec: ServerMessage.notification"""
    id = fields.String(required=True)
    type = fields.String(required=True, validate=validate.OneOf(NOTIFICATION_TYPES))
    title = fields.String(required=True)
    body = fields.String(required=True)
    timestamp = fields.String(required=True, metadata={"description": "RFC 3339: when it was created."})
    data = fields.Dict(keys=fields.String(), required=True)


class NotificationFrame(marshmallow.Schema):
    """The `notification` frame sent to every device of the user."""
    notification = fields.Nested(NotificationPayload, required=True)
    timestamp = fields.Integer(required=True, metadata={"description": "Milliseconds since the epoch: when sent."})
    missed = fields.Boolean(metadata={"description": "Present (true) when the notification came while this device "
                                                     "was away and is sent on its return."})


class Notification(marshmallow.Schema):
    id = fields.String(required=True, metadata={"format": "uuid"})
    type = fields.String(required=True, validate=validate.OneOf(NOTIFICATION_TYPES))
    title = fields.String(required=True)
    user_id = fields.String(required=True)
    timestamp = fields.String(required=True, metadata={"description": "RFC 3339."})
    delivered = fields.Boolean(required=True, metadata={"description": "Whether a device of the user was connected."})


class Pushed(marshmallow.Schema):
    success = fields.Boolean(required=True)
    notification = fields.Nested(Notification, required=True)


class InboxItem(marshmallow.Schema):
    id = fields.String(required=True, metadata={"format": "uuid"})
    type = fields.String(required=True, validate=validate.OneOf(NOTIFICATION_TYPES))
    title = fields.String(required=True)
    body = fields.String(required=True)
    data = fields.Dict(keys=fields.String(), required=True)
    user_id = fields.String(required=True)
    timestamp = fields.String(required=True, metadata={"description": "RFC 3339: when it was created."})
    read = fields.Boolean(required=True)
    read_at = fields.String(required=True, allow_none=True, metadata={"description": "RFC 3339, or null."})


class OwnerQuery(marshmallow.Schema):
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
        "description": "Whose inbox (the administrator only)."})


class InboxQuery(OwnerQuery):
    unread = fields.Boolean(load_default=False, metadata={"description": "Only the unread ones."})
    type = fields.String(load_default=None, validate=validate.OneOf(NOTIFICATION_TYPES))
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=MAX_PAGE))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=MAX_OFFSET))


class InboxPage(marshmallow.Schema):
    notifications = fields.List(fields.Nested(InboxItem), required=True)
    count = fields.Integer(required=True, metadata={"description": "How many on this page."})
    total = fields.Integer(required=True, metadata={"description": "How many match the filter, on every page."})
    unread = fields.Integer(required=True, metadata={"description": "How many of the inbox are unread."})
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)


class OneNotification(marshmallow.Schema):
    notification = fields.Nested(InboxItem, required=True)


class Read(marshmallow.Schema):
    success = fields.Boolean(required=True)
    notification = fields.Nested(InboxItem, required=True)


class AllRead(marshmallow.Schema):
    success = fields.Boolean(required=True)
    updated = fields.Integer(required=True, metadata={"description": "How many were unread."})


class Deleted(marshmallow.Schema):
    success = fields.Boolean(required=True)
