"""The bridge's request and answer bodies (docs/platform-bridge.md), validated and documented
with the same schemas."""
from __future__ import annotations

from typing import Any

import marshmallow
from marshmallow import ValidationError, fields, validate, validates_schema

PLATFORMS = ("telegram", "discord", "webhook")
TELEGRAM_TOKEN = r"^[0-9]{1,20}:[A-Za-z0-9_-]{20,100}\Z"
# Telegram's own rule for setWebhook's secret_token: 1-256 of A-Z, a-z, 0-9, _ and -.
TELEGRAM_SECRET = r"^[A-Za-z0-9_-]{1,256}\Z"
USER_ID = validate.Length(min=1, max=100)
PLATFORM_USER_ID = [validate.Length(min=1, max=64), validate.Regexp(r"^[A-Za-z0-9_.:@-]+\Z",
                                                                   error="use letters, digits and _ . : @ - only")]


class TelegramConfig(marshmallow.Schema):
    bot_token = fields.String(required=True, validate=validate.Regexp(
        TELEGRAM_TOKEN, error="a Telegram bot token looks like 123456789:AA... (from @BotFather)"))
    mode = fields.String(load_default="polling", validate=validate.OneOf(["polling", "webhook"]))
    webhook_secret = fields.String(load_default=None, allow_none=True, validate=validate.Regexp(
        TELEGRAM_SECRET, error="1-256 characters of A-Z, a-z, 0-9, _ and -"))

    @validates_schema
    def secret_for_webhook(self, data: dict, **_: Any) -> None:
        if data.get("mode") == "webhook" and not data.get("webhook_secret"):
            raise ValidationError("webhook mode needs a webhook_secret (Telegram sends it in "
                                  "X-Telegram-Bot-Api-Secret-Token)", "webhook_secret")


class DiscordConfig(marshmallow.Schema):
    application_id = fields.String(required=True, validate=validate.Regexp(
        r"^[0-9]{15,22}\Z", error="the application id is a number of 15-22 digits (developer portal)"))
    public_key = fields.String(required=True, validate=validate.Regexp(
        r"^[0-9a-fA-F]{64}\Z", error="the public key is 64 hex digits (developer portal)"))
    bot_token = fields.String(required=True, validate=validate.Length(min=20, max=200))


class WebhookConfig(marshmallow.Schema):
    outgoing_url = fields.Url(required=True, schemes={"http", "https"}, require_tld=False,
                              validate=validate.Length(max=2000))
    signing_secret = fields.String(required=True, validate=validate.Length(min=16, max=256))


CONFIG_SCHEMAS: dict[str, type[marshmallow.Schema]] = {
    "telegram": TelegramConfig, "discord": DiscordConfig, "webhook": WebhookConfig}
# Fields answered only masked; the rest of a bot's config is answered as stored.
SECRET_FIELDS: dict[str, tuple[str, ...]] = {
    "telegram": ("bot_token", "webhook_secret"), "discord": ("bot_token",), "webhook": ("signing_secret",)}


class UserMapping(marshmallow.Schema):
    platform_user_id = fields.String(required=True, validate=PLATFORM_USER_ID,
                                     metadata={"description": "The sender's id on the platform."})
    user_id = fields.String(required=True, validate=USER_ID,
                            metadata={"description": "The gateway user the sender talks as."})


class UserMappingOut(UserMapping):
    linked_by = fields.String(required=True, validate=validate.OneOf(["allow_list", "code"]))


class BotCreate(marshmallow.Schema):
    name = fields.String(required=True, validate=validate.Length(min=1, max=100))
    platform = fields.String(required=True, validate=validate.OneOf(PLATFORMS))
    enabled = fields.Boolean(load_default=True)
    config = fields.Dict(required=True, metadata={
        "description": "telegram: bot_token, mode (polling|webhook), webhook_secret; discord: application_id, "
                       "public_key, bot_token; webhook: outgoing_url, signing_secret."})
    users = fields.List(fields.Nested(UserMapping), load_default=list, validate=validate.Length(max=1000))
    allow_linking = fields.Boolean(load_default=True)


class BotPatch(marshmallow.Schema):
    name = fields.String(validate=validate.Length(min=1, max=100))
    enabled = fields.Boolean()
    config = fields.Dict(metadata={"description": "Fields to change; a secret left out keeps its value."})
    users = fields.List(fields.Nested(UserMapping), validate=validate.Length(max=1000),
                        metadata={"description": "Replaces the allow-list (users linked by code stay)."})
    allow_linking = fields.Boolean()


class BotStatus(marshmallow.Schema):
    state = fields.String(required=True, validate=validate.OneOf(["running", "waiting", "stopped", "error"]))
    error = fields.String(required=True, allow_none=True)


class Bot(marshmallow.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    platform = fields.String(required=True, validate=validate.OneOf(PLATFORMS))
    enabled = fields.Boolean(required=True)
    config = fields.Dict(required=True, metadata={"description": "Secrets masked: `••••` and their last 4 characters."})
    users = fields.List(fields.Nested(UserMappingOut), required=True)
    allow_linking = fields.Boolean(required=True)
    status = fields.Nested(BotStatus, required=True)
    endpoints = fields.Dict(required=True, metadata={
        "description": "Paths on this service the platform calls (Telegram webhook, incoming webhook), if any."})
    created_at = fields.String(required=True)
    updated_at = fields.String(required=True)


class BotList(marshmallow.Schema):
    bots = fields.List(fields.Nested(Bot), required=True)


class MessagesQuery(marshmallow.Schema):
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=200))
    before = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=1),
                            metadata={"description": "Only entries older than this id (the page's `next_before`)."})


class LogEntry(marshmallow.Schema):
    id = fields.Integer(required=True)
    direction = fields.String(required=True, validate=validate.OneOf(["in", "out"]))
    chat_id = fields.String(required=True)
    platform_user_id = fields.String(required=True)
    user_id = fields.String(required=True, allow_none=True)
    session_id = fields.String(required=True, allow_none=True)
    text = fields.String(required=True)
    latency_ms = fields.Integer(required=True, allow_none=True)
    error = fields.String(required=True, allow_none=True)
    created_at = fields.String(required=True)


class MessagePage(marshmallow.Schema):
    messages = fields.List(fields.Nested(LogEntry), required=True)
    has_more = fields.Boolean(required=True)
    next_before = fields.Integer(required=True, allow_none=True)


class LinkCodeBody(marshmallow.Schema):
    user_id = fields.String(load_default=None, allow_none=True, validate=USER_ID, metadata={
        "description": "With the service credential or as the administrator: whom the code links. "
                       "A person's own access token links themselves."})


class LinkCode(marshmallow.Schema):
    code = fields.String(required=True)
    bot_id = fields.String(required=True)
    user_id = fields.String(required=True)
    expires_at = fields.String(required=True)
    instruction = fields.String(required=True)


class IncomingWebhook(marshmallow.Schema):
    user_id = fields.String(required=True, validate=PLATFORM_USER_ID,
                            metadata={"description": "The sender's id on the outside system."})
    chat_id = fields.String(load_default=None, allow_none=True, validate=PLATFORM_USER_ID,
                            metadata={"description": "The conversation; defaults to user_id."})
    text = fields.String(required=True, validate=validate.Length(min=1, max=32000))
    message_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=128))


class Accepted(marshmallow.Schema):
    accepted = fields.Boolean(required=True)
    duplicate = fields.Boolean(metadata={
        "description": "A generic webhook message taken before (the same message_id, or the same signed "
                       "request): not answered again."})


class UserMessage(marshmallow.Schema):
    text = fields.String(required=True, validate=validate.Length(min=1, max=4000), metadata={
        "description": "What to tell the person (a fired reminder)."})


class UserDelivery(marshmallow.Schema):
    bot_id = fields.String(required=True)
    platform = fields.String(required=True, validate=validate.OneOf(PLATFORMS))
    platform_user_id = fields.String(required=True)
    error = fields.String(required=True, allow_none=True, metadata={
        "description": "Why this account was not reached, or null."})


class UserDeliveries(marshmallow.Schema):
    sent = fields.Integer(required=True, metadata={"description": "How many linked accounts took the message."})
    deliveries = fields.List(fields.Nested(UserDelivery), required=True)
