"""The notifications plugin's settings, request schemas, answers and WebSocket frame."""
from __future__ import annotations

from dataclasses import dataclass

import marshmallow
from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting
from gateway.validation import MAX_OFFSET

NOTIFICATION_TYPES = ("info", "warning", "success", "thinking", "reminder")
MAX_PAGE = 200


@dataclass(frozen=True, kw_only=True)
class NotificationSettings(PluginSettings):
    max_missed: int = setting(fields.Integer(load_default=50, validate=validate.Range(min=0, max=1000), metadata={
        "description": "Most unread notifications a returning device is sent (the newest), on its own connection."}))
    device_heartbeat: float = setting(fields.Float(load_default=30.0, validate=validate.Range(min=0.1), metadata={
        "description": "Seconds between marks that a device is still connected: after a crash it is re-sent at "
                       "most what came in this long before."}))
    retention_days: int = setting(fields.Integer(load_default=90, validate=validate.Range(min=1), metadata={
        "description": "Days a notification stays in the inbox."}))
    push_types: list[str] = setting(fields.List(fields.String(validate=validate.OneOf(NOTIFICATION_TYPES)),
                             load_default=lambda: ["reminder", "info", "warning", "success"], metadata={
        "description": "Notification types also sent by Web Push to the person's subscribed browsers "
                       "([] turns Web Push off)."}))
    push_ttl: int = setting(fields.Integer(load_default=86400, validate=validate.Range(min=0, max=28 * 86400), metadata={
        "description": "Seconds a push service keeps a push for a device that is offline (the TTL header)."}))
    push_subject: str = setting(fields.String(load_default="", metadata={
        "description": "The VAPID `sub` claim push services may contact: a mailto: address or an https URL; "
                       "empty: PUBLIC_BASE_URL when it is https, else mailto:admin@localhost."}))
    push_attempts: int = setting(fields.Integer(load_default=4, validate=validate.Range(min=1, max=10), metadata={
        "description": "Tries of one push that a push service answered 429 or 5xx (or did not answer)."}))
    push_retry_delay: float = setting(fields.Float(load_default=2.0, validate=validate.Range(min=0), metadata={
        "description": "Seconds before the second try of a push, doubled for each try after it; a "
                       "Retry-After answer is honoured up to push_max_retry_delay."}))
    push_max_retry_delay: float = setting(fields.Float(load_default=60.0, validate=validate.Range(min=0), metadata={
        "description": "Longest wait between two tries of one push."}))
    push_hosts: list[str] = setting(fields.List(fields.String(), load_default=list, metadata={
        "description": "Loopback or private addresses a push server may have, for Web Push only (the push "
                       "services browsers name are public HTTPS hosts and need nothing here), e.g. "
                       "[\"127.0.0.1:8080\"]; an http:// endpoint is accepted only for a host listed here "
                       "(docs/notifications.md). Formerly `[fetch] push_hosts`, still read there."}))
    push_timeout: float = setting(fields.Float(load_default=10.0, validate=validate.Range(min=0.1, max=120), metadata={
        "description": "Seconds a push service has to answer one push."}))
    push_max_subscriptions: int = setting(fields.Integer(load_default=20, validate=validate.Range(min=1, max=1000), metadata={
        "description": "Push subscriptions kept per person; subscribing one more forgets their oldest."}))
    push_queue_size: int = setting(fields.Integer(load_default=1000, validate=validate.Range(min=1), metadata={
        "description": "Notifications waiting to be sent by Web Push or to chat platforms; beyond it one is "
                       "dropped with a warning (it stays in the inbox)."}))
    push_workers: int = setting(fields.Integer(load_default=4, validate=validate.Range(min=1, max=64), metadata={
        "description": "Notifications sent off the page at once (each to all of its person's subscriptions)."}))
    platform_types: list[str] = setting(fields.List(fields.String(validate=validate.OneOf(NOTIFICATION_TYPES)),
                                 load_default=lambda: ["reminder"], metadata={
        "description": "Notification types also sent as a message to the person's linked chat-platform "
                       "accounts, through the platform bridge (PLATFORM_BRIDGE_URL); [] turns it off."}))


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


# -- Web Push (docs/notifications.md, "Push to a closed browser")

class PushKey(marshmallow.Schema):
    publicKey = fields.String(required=True, metadata={
        "description": "The VAPID public key, base64url of the uncompressed P-256 point: the browser's "
                       "applicationServerKey."})


class PushKeys(marshmallow.Schema):
    p256dh = fields.String(required=True, validate=validate.Length(min=1, max=200), metadata={
        "description": "The browser's P-256 public key, base64url (65 bytes)."})
    auth = fields.String(required=True, validate=validate.Length(min=1, max=100), metadata={
        "description": "The browser's authentication secret, base64url (16 bytes)."})


class SubscriptionBody(marshmallow.Schema):
    """The browser's PushSubscription.toJSON(), and a name for the device."""

    class Meta:
        unknown = marshmallow.EXCLUDE  # expirationTime and whatever browsers add

    endpoint = fields.String(required=True, validate=validate.Length(min=1, max=2048), metadata={
        "description": "The push service URL of this subscription (https)."})
    keys = fields.Nested(PushKeys, required=True)
    device_name = fields.String(load_default="", validate=validate.Length(max=100), metadata={
        "description": "How the person will recognise this device in the list."})


class Subscription(marshmallow.Schema):
    id = fields.String(required=True, metadata={"format": "uuid"})
    endpoint_origin = fields.String(required=True, metadata={
        "description": "The push service (scheme and host) this subscription goes through."})
    device_name = fields.String(required=True)
    created_at = fields.String(required=True, metadata={"description": "RFC 3339."})
    last_push_at = fields.String(required=True, allow_none=True, metadata={
        "description": "RFC 3339: the last push the push service took, or null."})
    last_error = fields.String(required=True, allow_none=True, metadata={
        "description": "Why the last push failed, or null."})


class SubscriptionSaved(marshmallow.Schema):
    success = fields.Boolean(required=True)
    subscription = fields.Nested(Subscription, required=True)


class SubscriptionList(marshmallow.Schema):
    subscriptions = fields.List(fields.Nested(Subscription), required=True)
    count = fields.Integer(required=True)
