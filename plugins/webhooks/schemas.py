"""What the webhook endpoints take and answer beyond the generic body's schema, for the
OpenAPI document (spec: "Webhooks")."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

# Discord signs each interaction; without DISCORD_PUBLIC_KEY the webhook key stands in.
DISCORD_HEADERS = {
    "X-Signature-Ed25519": "Discord's Ed25519 signature (hex) of the timestamp followed by the body",
    "X-Signature-Timestamp": "The Unix time Discord signed at; accepted for 300 seconds",
}


class GenericReply(marshmallow.Schema):
    reply = fields.String(required=True, metadata={"description": "The assistant's whole reply."})
    session_id = fields.String(required=True)
    message_id = fields.String(required=True, metadata={"description": "The stored reply's id; empty when none."})
    finish_reason = fields.String(required=True, validate=validate.Equal("stop"))


class DiscordInteraction(marshmallow.Schema):
    """The fields read; Discord sends many more."""

    class Meta:
        unknown = marshmallow.INCLUDE

    type = fields.Integer(required=True, metadata={"description": "1 PING, 2 APPLICATION_COMMAND; others are refused."})
    data = fields.Dict(metadata={"description": "The command: `options` with one named `message`."})
    member = fields.Dict(metadata={"description": "In a guild: `user.id` names the person."})
    user = fields.Dict(metadata={"description": "In a direct message: `id` names the person."})
    channel_id = fields.String()


class DiscordMessage(marshmallow.Schema):
    content = fields.String(required=True, validate=validate.Length(max=2000))


class DiscordAnswer(marshmallow.Schema):
    type = fields.Integer(required=True, validate=validate.OneOf([1, 4, 5]), metadata={
        "description": "1 PONG (to a PING), 4 CHANNEL_MESSAGE_WITH_SOURCE, 5 DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE "
                       "(the reply follows through the interaction's webhook)."})
    data = fields.Nested(DiscordMessage, metadata={"description": "With type 4: the reply."})
