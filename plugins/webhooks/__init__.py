"""Webhooks: other systems and chat platforms talk to the assistant over plain HTTP.

- `POST /api/v1/webhook/generic` (header `X-Webhook-Key`) — one message in, the AI core's whole
  reply out;
- `POST /api/v1/webhook/discord` — Discord's interactions endpoint: PING and the chat command,
  with Discord's Ed25519 request signature checked against `DISCORD_PUBLIC_KEY`.

Each message is a chat turn (the chat plugin's `CHAT_TURNS.submit_and_wait`): under the
session's turn lock like a device's message, stored in the conversations store under the `ext_`
user, so it shows up in the sessions endpoints like any other conversation. See
docs/sessions.md ("Webhooks")."""
from __future__ import annotations

import hmac
import secrets
import string
import time

import marshmallow
from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from marshmallow import fields, validate

from gateway.context import Context
from gateway.errors import BadGateway, BadRequest, Unauthorized
from gateway.plugins import Plugin, PluginError, Registrar
from gateway.validation import load, parse_body, read_json
from plugins.chat.contract import CHAT_TURNS, TurnFailed
from plugins.sessions.contract import CONVERSATIONS

from .settings import WebhooksSettings

EXTERNAL_PREFIX = "ext_"
ID_ALPHABET = string.ascii_lowercase + string.digits
# Replayed interactions: Discord's clock and ours agree within seconds.
DISCORD_SIGNATURE_MAX_AGE = 300
DISCORD_PING, DISCORD_APPLICATION_COMMAND = 1, 2
DISCORD_PONG, DISCORD_CHANNEL_MESSAGE = 1, 4
DISCORD_MAX_CONTENT = 2000


class GenericBody(marshmallow.Schema):
    message = fields.String(required=True)
    user_id = fields.String(load_default="webhook_generic", validate=validate.Length(min=1, max=100))
    session_id = fields.String(load_default=None, allow_none=True,
                               validate=[validate.Length(min=1, max=128),
                                         validate.Regexp(r"^[A-Za-z0-9_.:\-]+\Z",
                                                         error="use letters, digits and _ . : - only")])
    mode = fields.String(load_default="text", validate=validate.OneOf(["text", "voice_msg"]))
    platform = fields.String(load_default="generic", validate=validate.Length(min=1, max=50))


def external_user(user_id: str) -> str:
    """Outside callers never act as a gateway user: their ids live under the `ext_` prefix."""
    return user_id if user_id.startswith(EXTERNAL_PREFIX) else EXTERNAL_PREFIX + user_id


def ai_unavailable(detail: str) -> BadGateway:
    return BadGateway(f"The AI service is unavailable: {detail}", error_type="ai_service_unavailable",
                      hint="Check that the ai-core service is running and that AI_CORE_URL points at it.")


class Webhooks:
    def __init__(self, context: Context, ai_timeout: float):
        self.context = context
        self.ai_timeout = ai_timeout

    @property
    def conversations(self):
        return self.context.contracts.require(CONVERSATIONS)

    # ------------------------------------------------------------ credentials
    def check_key(self, request: web.Request) -> None:
        expected = str(self.context.config.get("auth.webhook_key") or "")
        given = request.headers.get("X-Webhook-Key", "")
        # compare_digest takes as long for a near miss as for a wild guess.
        if not expected or not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
            raise Unauthorized("Missing or wrong webhook key.", error_type="invalid_webhook_key",
                               hint="Send the configured WEBHOOK_KEY in the X-Webhook-Key header.")

    def discord_key(self) -> Ed25519PublicKey | None:
        text = str(self.context.config.get("auth.discord_public_key") or "").strip()
        return Ed25519PublicKey.from_public_bytes(bytes.fromhex(text)) if text else None

    @staticmethod
    def check_discord_signature(key: Ed25519PublicKey, request: web.Request, raw: bytes) -> None:
        signature = request.headers.get("X-Signature-Ed25519", "")
        timestamp = request.headers.get("X-Signature-Timestamp", "")
        try:
            key.verify(bytes.fromhex(signature), timestamp.encode("utf-8") + raw)
            fresh = abs(time.time() - int(timestamp)) <= DISCORD_SIGNATURE_MAX_AGE
        except (ValueError, InvalidSignature):
            fresh = None
        if fresh is None:
            raise Unauthorized("Invalid request signature.", error_type="invalid_signature",
                               hint="Discord signs every interaction; this request was not signed "
                                    "with the key in DISCORD_PUBLIC_KEY.")
        if not fresh:  # a captured interaction sent again later
            raise Unauthorized("The request signature is too old.", error_type="stale_signature",
                               hint=f"Signed interactions are accepted for {DISCORD_SIGNATURE_MAX_AGE} seconds.")

    # ------------------------------------------------------------ one exchange
    async def converse(self, user_id: str, session_id: str, text: str, mode: str, platform: str) -> tuple[str, str]:
        """The reply to `text` as a turn of the session, and the stored reply's message id."""
        await self.conversations.ensure_session(user_id, session_id, title=f"{platform} webhook")
        try:
            reply = await self.context.contracts.require(CHAT_TURNS).submit_and_wait(
                user_id, session_id, text, mode, metadata={"platform": platform}, timeout=self.ai_timeout)
        except TurnFailed as failure:
            raise ai_unavailable(failure.error) from None
        return reply.text, str(reply.message_ids[0]) if reply.message_ids else ""

    # ------------------------------------------------------------ handlers
    async def generic(self, request: web.Request) -> web.Response:
        self.check_key(request)
        body = await parse_body(request, GenericBody())
        text = body["message"].strip()
        if not text:
            raise BadRequest("The message is empty.", error_type="empty_message",
                             hint="Send the text for the assistant in the message field.")
        session_id = body["session_id"] or "webhook_" + "".join(secrets.choice(ID_ALPHABET) for _ in range(12))
        reply, message_id = await self.converse(external_user(body["user_id"]), session_id, text, body["mode"],
                                                body["platform"])
        return web.json_response({"reply": reply, "session_id": session_id, "message_id": message_id,
                                  "finish_reason": "stop"})

    async def discord(self, request: web.Request) -> web.Response:
        raw = await request.read()
        key = self.discord_key()
        if key is not None:
            self.check_discord_signature(key, request, raw)
        else:
            self.check_key(request)  # no signature to check: the webhook key stands in
        interaction = await read_json(request)
        if not isinstance(interaction, dict):
            raise BadRequest("The interaction must be a JSON object.", error_type="validation_error")
        kind = interaction.get("type")
        if kind == DISCORD_PING:
            return web.json_response({"type": DISCORD_PONG})
        if kind != DISCORD_APPLICATION_COMMAND:
            raise BadRequest(f"Interaction type {kind!r} is not handled here.",
                             error_type="unsupported_interaction",
                             hint="This endpoint answers PING (1) and application commands (2) with a "
                                  "`message` option.")
        text, user, channel = discord_command(interaction)
        # One session per person per channel: several people share a channel, a session has one owner.
        reply, _ = await self.converse(external_user(f"discord_{user}"), f"discord_{channel}_{user}", text,
                                       "text", "discord")
        content = reply if len(reply) <= DISCORD_MAX_CONTENT else reply[:DISCORD_MAX_CONTENT - 1] + "…"
        return web.json_response({"type": DISCORD_CHANNEL_MESSAGE, "data": {"content": content}})

    def routes(self) -> web.RouteTableDef:
        table = web.RouteTableDef()
        table.post("/api/v1/webhook/generic", name="webhooks.generic")(self.generic)
        table.post("/api/v1/webhook/discord", name="webhooks.discord")(self.discord)
        return table


class DiscordOption(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.EXCLUDE

    name = fields.String(required=True)
    value = fields.Raw(load_default=None)


class DiscordData(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.EXCLUDE

    name = fields.String(load_default="")
    options = fields.List(fields.Nested(DiscordOption), load_default=list)


def discord_command(interaction: dict) -> tuple[str, str, str]:
    """(message text, Discord user id, channel id) of an application command."""
    data = load(DiscordData(), interaction.get("data") or {}, "interaction data")
    text = next((str(option["value"]) for option in data["options"]
                 if option["name"] == "message" and option["value"] is not None), "").strip()
    if not text:
        raise BadRequest("The command has no message option.", error_type="empty_message",
                         hint="Register the command with a string option named `message`.")
    person = (interaction.get("member") or {}).get("user") or interaction.get("user") or {}
    user = str(person.get("id") or "unknown")
    channel = str(interaction.get("channel_id") or (interaction.get("channel") or {}).get("id") or user)
    return text, user, channel


class WebhooksPlugin(Plugin):
    name = "webhooks"
    depends = ("sessions", "chat")
    description = "Generic and Discord webhooks answered as chat turns"
    settings_schema = WebhooksSettings

    def setup(self, registrar: Registrar) -> None:
        public_key = str(registrar.config.get("auth.discord_public_key") or "").strip()
        if public_key:
            try:
                Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key))
            except ValueError:
                raise PluginError("webhooks: DISCORD_PUBLIC_KEY must be the 64 hex digits of the "
                                  "application's public key (Discord developer portal)") from None
        webhooks = Webhooks(registrar.context, registrar.settings["ai_timeout"])
        registrar.routes(webhooks.routes())


plugin = WebhooksPlugin()
