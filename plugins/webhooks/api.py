"""The webhook endpoints: `POST /api/v1/webhook/generic` and `POST /api/v1/webhook/discord`.
The handlers reach chat turns and the conversations store through the context's contracts, and
their credentials and reply timeout under `WEBHOOKS`."""
from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import string
import time
from dataclasses import dataclass

import aiohttp
import marshmallow
from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from marshmallow import fields, validate

from gateway.context import Context, get_context
from gateway.errors import BadGateway, BadRequest, Unauthorized
from gateway.openapi import Credential, api_doc
from gateway.validation import load, parse_body, read_json
from plugins.ai_core.contract import DEFAULT_MAX_MESSAGE_CHARS, message_too_long
from plugins.chat.contract import CHAT_TURNS, TurnFailed
from plugins.sessions.contract import CONVERSATIONS

from .schemas import DISCORD_HEADERS, DiscordAnswer, DiscordInteraction, GenericReply

log = logging.getLogger("plugins.webhooks")

EXTERNAL_PREFIX = "ext_"
ID_ALPHABET = string.ascii_lowercase + string.digits
# Replayed interactions: Discord's clock and ours agree within seconds.
DISCORD_SIGNATURE_MAX_AGE = 300
DISCORD_PING, DISCORD_APPLICATION_COMMAND = 1, 2
DISCORD_PONG, DISCORD_CHANNEL_MESSAGE, DISCORD_DEFERRED_CHANNEL_MESSAGE = 1, 4, 5
DISCORD_MAX_CONTENT = 2000

_WEBHOOK_KEY_SCHEME = {"webhookKey": {"type": "apiKey", "in": "header", "name": "X-Webhook-Key"}}
# The shared key (WEBHOOK_KEY) an operator's webhook sends.
WEBHOOK_KEY = Credential(requirements=(("webhookKey",),), schemes=_WEBHOOK_KEY_SCHEME)
# Discord signs each interaction with its application's key (DISCORD_PUBLIC_KEY); the shared key
# serves an installation without one.
DISCORD_SIGNED = Credential(requirements=(("discordSignature",), ("webhookKey",)), schemes={
    "discordSignature": {"type": "apiKey", "in": "header", "name": "X-Signature-Ed25519",
                         "description": "Discord's Ed25519 signature of X-Signature-Timestamp + the body, "
                                        "checked against DISCORD_PUBLIC_KEY."},
    **_WEBHOOK_KEY_SCHEME})


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


@dataclass(frozen=True)
class WebhookConfig:
    """What the handlers need from configuration, read once at setup."""
    webhook_key: str
    discord_key: Ed25519PublicKey | None  # None: Discord interactions carry the webhook key instead
    ai_timeout: float
    discord_defer_after: float = 2.5  # Discord waits 3 s for the first answer
    discord_api_url: str = "https://discord.com/api/v10"
    max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS

    def check_length(self, text: str) -> None:
        if len(text) > self.max_message_chars:
            raise message_too_long(len(text), self.max_message_chars, "[plugins.webhooks] max_message_chars")


WEBHOOKS = web.AppKey("webhooks.config", WebhookConfig)

routes = web.RouteTableDef()


def parse_discord_key(text: str) -> Ed25519PublicKey | None:
    """The application's public key from its 64 hex digits; None when unset. ValueError when invalid."""
    text = text.strip()
    return Ed25519PublicKey.from_public_bytes(bytes.fromhex(text)) if text else None


# ---------------------------------------------------------------- credentials

def check_key(request: web.Request) -> None:
    expected = request.config_dict[WEBHOOKS].webhook_key
    given = request.headers.get("X-Webhook-Key", "")
    # compare_digest takes as long for a near miss as for a wild guess.
    if not expected or not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
        raise Unauthorized("Missing or wrong webhook key.", error_type="invalid_webhook_key",
                           hint="Send the configured WEBHOOK_KEY in the X-Webhook-Key header.")


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


# ---------------------------------------------------------------- one exchange

async def converse(request: web.Request, user_id: str, session_id: str, text: str, mode: str,
                   platform: str) -> tuple[str, str]:
    """The reply to `text` as a turn of the session, and the stored reply's message id."""
    return await converse_in(get_context(request), request.config_dict[WEBHOOKS], user_id, session_id, text, mode,
                             platform)


async def converse_in(context: Context, config: WebhookConfig, user_id: str, session_id: str, text: str, mode: str,
                      platform: str) -> tuple[str, str]:
    """`converse` without the request: a deferred Discord answer outlives it."""
    contracts = context.contracts
    await contracts.require(CONVERSATIONS).ensure_session(user_id, session_id, title=f"{platform} webhook")
    try:
        # `ext_` senders are no gateway accounts: the operator's webhook key lets them in, and the
        # rule of who may chat (about accounts) is not theirs to ask.
        reply = await contracts.require(CHAT_TURNS).submit_and_wait(
            user_id, session_id, text, mode, metadata={"platform": platform}, timeout=config.ai_timeout,
            external=True)
    except TurnFailed as failure:
        raise ai_unavailable(failure.error) from None
    return reply.text, str(reply.message_ids[0]) if reply.message_ids else ""


# ---------------------------------------------------------------- handlers

@routes.post("/api/v1/webhook/generic", name="webhooks.generic")
@api_doc("One message in, the assistant's whole reply out", body=GenericBody, responses={200: GenericReply},
         errors=(404, 413, 429, 502, 503), auth=WEBHOOK_KEY)
async def generic(request: web.Request) -> web.Response:
    check_key(request)
    body = await parse_body(request, GenericBody())
    text = body["message"].strip()
    request.config_dict[WEBHOOKS].check_length(text)
    if not text:
        raise BadRequest("The message is empty.", error_type="empty_message",
                         hint="Send the text for the assistant in the message field.")
    session_id = body["session_id"] or "webhook_" + "".join(secrets.choice(ID_ALPHABET) for _ in range(12))
    reply, message_id = await converse(request, external_user(body["user_id"]), session_id, text, body["mode"],
                                       body["platform"])
    return web.json_response({"reply": reply, "session_id": session_id, "message_id": message_id,
                              "finish_reason": "stop"})


@routes.post("/api/v1/webhook/discord", name="webhooks.discord")
@api_doc("Discord's interactions endpoint: PING, and the chat command with a `message` option",
         body=DiscordInteraction, responses={200: DiscordAnswer}, errors=(404, 413, 429, 502, 503), auth=DISCORD_SIGNED,
         headers=DISCORD_HEADERS)
async def discord(request: web.Request) -> web.Response:
    raw = await request.read()
    key = request.config_dict[WEBHOOKS].discord_key
    if key is not None:
        check_discord_signature(key, request, raw)
    else:
        check_key(request)  # no signature to check: the webhook key stands in
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
    config = request.config_dict[WEBHOOKS]
    config.check_length(text)
    context = get_context(request)
    # One session per person per channel: several people share a channel, a session has one owner.
    exchange = asyncio.ensure_future(converse_in(context, config, external_user(f"discord_{user}"),
                                                 f"discord_{channel}_{user}", text, "text", "discord"))
    application_id, token = str(interaction.get("application_id") or ""), str(interaction.get("token") or "")
    can_defer = bool(application_id.isdigit() and token)
    try:
        reply, _ = await asyncio.wait_for(asyncio.shield(exchange), config.discord_defer_after if can_defer else None)
    except TimeoutError:
        # Slower than Discord waits: "thinking..." now, the answer through the interaction's webhook.
        await context.scheduler.spawn(discord_follow_up(context, config, exchange, application_id, token))
        return web.json_response({"type": DISCORD_DEFERRED_CHANNEL_MESSAGE})
    return web.json_response({"type": DISCORD_CHANNEL_MESSAGE, "data": {"content": discord_content(reply)}})


def discord_content(reply: str) -> str:
    return reply if len(reply) <= DISCORD_MAX_CONTENT else reply[:DISCORD_MAX_CONTENT - 1] + "…"


async def discord_follow_up(context: Context, config: WebhookConfig, exchange: asyncio.Future, application_id: str,
                            token: str) -> None:
    """Edit the deferred answer into the reply (or a short failure notice): `PATCH
    /webhooks/{application_id}/{token}/messages/@original`, valid for 15 minutes."""
    try:
        reply, _ = await exchange
        content = discord_content(reply) or "…"
    except BadGateway:
        content = "Sorry, the assistant could not answer just now. Please try again."
    except Exception as error:  # a rate limit or a bad request found after the deferral
        content = f"Sorry, that could not be answered: {getattr(error, 'error', 'an internal error')}"
    url = f"{config.discord_api_url.rstrip('/')}/webhooks/{application_id}/{token}/messages/@original"
    try:
        async with asyncio.timeout(30):
            async with context.http.patch(url, json={"content": content}) as response:
                if response.status >= 300:
                    log.warning("the Discord follow-up was refused: %s", response.status)
    except (TimeoutError, aiohttp.ClientError) as error:
        log.warning("the Discord follow-up could not be sent: %s", type(error).__name__)


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
