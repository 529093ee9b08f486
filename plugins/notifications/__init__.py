"""Pushed notifications: `POST /api/v1/notifications/push` and the `NOTIFICATIONS` contract
(reminders push through it too). A notification goes out as a `notification` WebSocket event to
every device of the user on every gateway instance sharing the bus; nothing is stored, so a
user with no live connection misses it and `delivered` says so.

See docs/sessions.md ("Notifications")."""
from __future__ import annotations

import time
import uuid
from datetime import datetime, timezone

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.context import Context, get_context
from gateway.identity import owner_for, require_user
from gateway.openapi import api_doc
from gateway.plugins import Plugin, Registrar
from gateway.validation import parse_body

from .contract import NOTIFICATIONS

NOTIFICATION_TYPES = ("info", "warning", "success", "thinking", "reminder")


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
    timestamp = fields.String(required=True, metadata={"description": "RFC 3339."})
    data = fields.Dict(keys=fields.String(), required=True)


class NotificationFrame(marshmallow.Schema):
    """The `notification` frame `Notifications.push` sends to every device of the user."""
    notification = fields.Nested(NotificationPayload, required=True)
    timestamp = fields.Integer(required=True, metadata={"description": "Milliseconds since the epoch."})


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


class Notifications:
    """Provided as the `NOTIFICATIONS` contract."""

    def __init__(self, context: Context):
        self.context = context

    async def push(self, user_id: str, type: str, title: str, body: str, data: dict | None = None) -> dict:
        """Send to every device of `user_id`; return the spec's Notification object."""
        notification_id = str(uuid.uuid4())
        timestamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        hub = self.context.hub
        # Asked before sending: whether anyone was there to receive it.
        delivered = await hub.is_online(user_id)
        await hub.send_to_user(user_id, {
            "type": "notification",
            "notification": {"id": notification_id, "type": type, "title": title, "body": body,
                             "timestamp": timestamp, "data": data or {}},
            "timestamp": int(time.time() * 1000),
        })
        return {"id": notification_id, "type": type, "title": title, "user_id": user_id,
                "timestamp": timestamp, "delivered": delivered}


routes = web.RouteTableDef()


@routes.post("/api/v1/notifications/push", name="notifications.push")
@api_doc("Push a notification to every device of a user (people: to themselves)", body=PushBody,
         responses={200: Pushed}, errors=(403,))
async def push(request: web.Request) -> web.Response:
    caller = await require_user(request)
    body = await parse_body(request, PushBody())
    # People notify themselves; the administrator and services notify anyone.
    target = owner_for(caller, body["user_id"])
    notification = await get_context(request).contracts.require(NOTIFICATIONS).push(
        target, body["type"], body["title"], body["body"], body["data"])
    return web.json_response({"success": True, "notification": notification})


class NotificationsPlugin(Plugin):
    name = "notifications"
    depends = ("auth_tokens",)
    description = "Notifications pushed to a user's devices over WebSocket"

    def setup(self, registrar: Registrar) -> None:
        registrar.provide(NOTIFICATIONS, Notifications(registrar.context))
        registrar.routes(routes)
        registrar.ws_server_message("notification", NotificationFrame, "A notification pushed to the user's devices "
                                    "(POST /api/v1/notifications/push, or a reminder).")


plugin = NotificationsPlugin()
