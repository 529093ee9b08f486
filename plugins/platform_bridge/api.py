"""`/api/v1/bots`: bot configuration, link codes and message logs (service credential or the
administrator), and the routes the platforms themselves call (a Telegram webhook, a generic
webhook's incoming messages), authenticated by the bot's own secret."""
from __future__ import annotations

import hmac
import re
import time
from typing import cast

import marshmallow
from aiohttp import web

from gateway.clock import rfc3339
from gateway.errors import BadRequest, Forbidden, NotFound, Unauthorized
from gateway.identity import owner_for, require_admin, require_user
from gateway.openapi import api_doc
from gateway.validation import load, parse_body, parse_query, read_json

from . import discord, store
from .keys import BRIDGE
from .outgoing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature_matches, signed_content
from .schemas import (CONFIG_SCHEMAS, SECRET_FIELDS, Accepted, Bot, BotCreate, BotList, BotPatch, IncomingWebhook,
                      LinkCode, LinkCodeBody, MessagePage, MessagesQuery, UserDeliveries, UserMessage)

routes = web.RouteTableDef()
BOT_PATH = {"id": {"type": "string", "description": "The bot's id (`bot_` and 10 characters)."}}
TELEGRAM_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
UNIX_SECONDS = re.compile(r"[0-9]{1,12}")


async def public_bot(request: web.Request, bot: dict) -> dict:
    """A bot as answered: secrets masked, its allow-list, and how it runs."""
    bridge = request.config_dict[BRIDGE]
    config = {key: (store.mask(value) if key in SECRET_FIELDS[bot["platform"]] and value else value)
              for key, value in bot["config"].items()}
    for name in SECRET_FIELDS[bot["platform"]]:
        config.setdefault(name, None)
    return {"id": bot["id"], "name": bot["name"], "platform": bot["platform"], "enabled": bot["enabled"],
            "config": config, "users": await store.users_of(bridge.db, bot["id"]),
            "allow_linking": bot["allow_linking"], "status": bridge.status_of(bot),
            "endpoints": endpoints_of(bot), "created_at": rfc3339(bot["created_at"]), "updated_at": rfc3339(bot["updated_at"])}


def endpoints_of(bot: dict) -> dict:
    if bot["platform"] == "telegram" and bot["config"].get("mode") == "webhook":
        return {"telegram_webhook": f"/api/v1/platforms/telegram/{bot['id']}/webhook"}
    if bot["platform"] == "webhook":
        return {"incoming": f"/api/v1/platforms/webhook/{bot['id']}/messages"}
    if bot["platform"] == "discord":
        return {"interactions": f"/api/v1/platforms/discord/{bot['id']}/interactions"}
    return {}


def platform_config(platform: str, config: dict) -> dict:
    """The platform's fields, validated; a wrong one is named `config.<field>` in `fields`."""
    try:
        return cast(dict, CONFIG_SCHEMAS[platform]().load(config))
    except marshmallow.ValidationError as error:
        messages = error.messages if isinstance(error.messages, dict) else {"_schema": error.messages}
        fields = {f"config.{name}": problem for name, problem in messages.items()}
        details = "; ".join(f"{name}: {' '.join(map(str, problem)) if isinstance(problem, list) else problem}"
                            for name, problem in fields.items())
        raise BadRequest(f"Invalid body: {details}", error_type="validation_error",
                         hint="Fix the named fields and send the request again.", extra={"fields": fields}) from None


@routes.get("/api/v1/bots", name="platform_bridge.list_bots")
@api_doc("Every bot, secrets masked", responses={200: BotList}, auth="admin")
async def list_bots(request: web.Request) -> web.Response:
    await require_admin(request)
    bridge = request.config_dict[BRIDGE]
    return web.json_response({"bots": [await public_bot(request, bot) for bot in await store.list_bots(bridge.db)]})


@routes.post("/api/v1/bots", name="platform_bridge.create_bot")
@api_doc("Add a bot", body=BotCreate, responses={201: Bot}, auth="admin")
async def create_bot(request: web.Request) -> web.Response:
    await require_admin(request)
    body = await parse_body(request, BotCreate())
    config = platform_config(body["platform"], body["config"])
    bridge = request.config_dict[BRIDGE]
    bot = await store.create_bot(bridge.db, name=body["name"], platform=body["platform"], enabled=body["enabled"],
                                 config=config, users=body["users"], allow_linking=body["allow_linking"])
    await bridge.bot_changed(bot["id"])
    return web.json_response(await public_bot(request, bot), status=201)


@routes.get("/api/v1/bots/{id}", name="platform_bridge.get_bot")
@api_doc("One bot, secrets masked", responses={200: Bot}, errors=(404,), auth="admin", path=BOT_PATH)
async def get_bot(request: web.Request) -> web.Response:
    await require_admin(request)
    bot = await store.require_bot(request.config_dict[BRIDGE].db, request.match_info["id"])
    return web.json_response(await public_bot(request, bot))


@routes.patch("/api/v1/bots/{id}", name="platform_bridge.update_bot")
@api_doc("Change a bot: name, enabled, config (a secret left out keeps its value), allow-list",
         body=BotPatch, responses={200: Bot}, errors=(404,), auth="admin", path=BOT_PATH)
async def update_bot(request: web.Request) -> web.Response:
    await require_admin(request)
    bridge = request.config_dict[BRIDGE]
    bot = await store.require_bot(bridge.db, request.match_info["id"])
    raw = await read_json(request)
    if isinstance(raw, dict) and "platform" in raw:
        raise BadRequest("A bot's platform cannot change.", error_type="validation_error",
                         hint="Delete the bot and add one for the other platform.")
    changes = await parse_body(request, BotPatch())
    if "config" in changes:
        changes["config"] = platform_config(bot["platform"], {**bot["config"], **changes["config"]})
    bot = await store.update_bot(bridge.db, bot, changes)
    await bridge.bot_changed(bot["id"])
    return web.json_response(await public_bot(request, bot))


async def set_enabled(request: web.Request, enabled: bool) -> web.Response:
    await require_admin(request)
    bridge = request.config_dict[BRIDGE]
    bot = await store.require_bot(bridge.db, request.match_info["id"])
    bot = await store.update_bot(bridge.db, bot, {"enabled": enabled})
    await bridge.bot_changed(bot["id"])
    return web.json_response(await public_bot(request, bot))


@routes.post("/api/v1/bots/{id}/enable", name="platform_bridge.enable_bot")
@api_doc("Start a bot (the same as PATCH enabled: true)", responses={200: Bot}, errors=(404,), auth="admin",
         path=BOT_PATH)
async def enable_bot(request: web.Request) -> web.Response:
    return await set_enabled(request, True)


@routes.post("/api/v1/bots/{id}/disable", name="platform_bridge.disable_bot")
@api_doc("Stop a bot (the same as PATCH enabled: false)", responses={200: Bot}, errors=(404,), auth="admin",
         path=BOT_PATH)
async def disable_bot(request: web.Request) -> web.Response:
    return await set_enabled(request, False)


@routes.delete("/api/v1/bots/{id}", name="platform_bridge.delete_bot")
@api_doc("Delete a bot with its users, codes and log", responses={204: None}, errors=(404,), auth="admin",
         path=BOT_PATH)
async def delete_bot(request: web.Request) -> web.Response:
    await require_admin(request)
    bridge = request.config_dict[BRIDGE]
    if not await store.delete_bot(bridge.db, request.match_info["id"]):
        raise NotFound(f"No bot {request.match_info['id']!r}.", error_type="bot_not_found",
                       hint="List the bots: GET /api/v1/bots.")
    await bridge.bot_changed(request.match_info["id"])
    return web.Response(status=204)


@routes.get("/api/v1/bots/{id}/messages", name="platform_bridge.bot_messages")
@api_doc("The bot's message log, newest first", query=MessagesQuery, responses={200: MessagePage}, errors=(404,),
         auth="admin", path=BOT_PATH)
async def bot_messages(request: web.Request) -> web.Response:
    await require_admin(request)
    query = parse_query(request, MessagesQuery())
    bridge = request.config_dict[BRIDGE]
    bot = await store.require_bot(bridge.db, request.match_info["id"])
    rows, has_more = await store.messages(bridge.db, bot["id"], query["limit"], query["before"],
                                          bridge.settings.log_limit)
    return web.json_response({"messages": [{**row, "created_at": rfc3339(row["created_at"])} for row in rows],
                              "has_more": has_more, "next_before": rows[-1]["id"] if has_more else None})


@routes.post("/api/v1/bots/{id}/link-codes", name="platform_bridge.link_code")
@api_doc("A one-time code that links the platform account saying `/link <code>` to the bot to a gateway user",
         body=LinkCodeBody, responses={201: LinkCode}, errors=(403, 404, 409), auth="user", path=BOT_PATH)
async def link_code(request: web.Request) -> web.Response:
    identity = await require_user(request)
    body = await parse_body(request, LinkCodeBody(), allow_empty=True)
    user_id = owner_for(identity, body["user_id"])
    if identity.kind == "service" and not body["user_id"]:
        raise BadRequest("Name the user the code links.", error_type="validation_error",
                         hint="Send user_id with the service credential.")
    bridge = request.config_dict[BRIDGE]
    bot = await store.require_bot(bridge.db, request.match_info["id"])
    if not bot["allow_linking"]:
        raise Forbidden("This bot links nobody by code.", error_type="linking_disabled",
                        hint="Ask the operator to add you to the bot's allow-list, or to allow linking.")
    code = await store.new_link_code(bridge.db, bot["id"], user_id, bridge.settings.link_code_ttl)
    return web.json_response({"code": code["code"], "bot_id": bot["id"], "user_id": user_id,
                              "expires_at": rfc3339(code["expires_at"]),
                              "instruction": f"Send /link {code['code']} to the bot."}, status=201)


@routes.post("/api/v1/users/{user_id}/messages", name="platform_bridge.message_user")
@api_doc("Send a message to every chat-platform account linked to a gateway user (the gateway's reminders)",
         body=UserMessage, responses={200: UserDeliveries}, errors=(403,), auth="admin",
         path={"user_id": {"type": "string", "maxLength": 100, "description": "The gateway user."}})
async def message_user(request: web.Request) -> web.Response:
    await require_admin(request)
    body = await parse_body(request, UserMessage())
    user_id = request.match_info["user_id"]
    if not 1 <= len(user_id) <= 100:
        raise BadRequest("A user id is 1-100 characters.", error_type="validation_error",
                         hint="Name the gateway user whose linked accounts to message.")
    deliveries = await request.config_dict[BRIDGE].message_user(user_id, body["text"])
    return web.json_response({"sent": sum(1 for d in deliveries if d["error"] is None), "deliveries": deliveries})


# ---------------------------------------------------------------- what the platforms call

async def enabled_bot(request: web.Request, platform: str) -> dict:
    bridge = request.config_dict[BRIDGE]
    bot = await store.get_bot(bridge.db, request.match_info["id"])
    if bot is None or bot["platform"] != platform or not bot["enabled"]:
        raise NotFound("No such bot here.", error_type="bot_not_found", hint="Check the bot's endpoint URL.")
    return bot


@routes.post("/api/v1/platforms/telegram/{id}/webhook", name="platform_bridge.telegram_webhook")
@api_doc("Telegram's webhook for a bot in webhook mode (an Update object)", body={"type": "object"},
         responses={200: Accepted}, errors=(401, 404), auth="none", path=BOT_PATH,
         headers={TELEGRAM_SECRET_HEADER: "The bot's webhook_secret, as given to setWebhook"})
async def telegram_webhook(request: web.Request) -> web.Response:
    bot = await enabled_bot(request, "telegram")
    expected = str(bot["config"].get("webhook_secret") or "")
    given = request.headers.get(TELEGRAM_SECRET_HEADER, "")
    if bot["config"].get("mode") != "webhook" or not expected or \
            not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
        raise Unauthorized("Missing or wrong secret token.", error_type="invalid_secret_token",
                           hint=f"Telegram sends the bot's webhook_secret in {TELEGRAM_SECRET_HEADER}.")
    update = await read_json(request)
    if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
        raise BadRequest("An update needs its update_id.", error_type="validation_error")
    await request.config_dict[BRIDGE].telegram_update(bot, update)
    return web.json_response({"accepted": True})


@routes.post("/api/v1/platforms/webhook/{id}/messages", name="platform_bridge.incoming_webhook")
@api_doc("A message for a generic webhook bot, signed with its signing secret over a timestamp and the body; "
         "the reply is posted to its outgoing_url. A message already taken (the same message_id, or the same "
         "signed request) is answered `duplicate` and not answered again", body=IncomingWebhook,
         responses={202: Accepted}, errors=(401, 404), auth="none", path=BOT_PATH,
         headers={TIMESTAMP_HEADER: "The Unix time (seconds) the message was signed at; accepted for "
                                    "[plugins.platform_bridge] webhook_max_age seconds (300) either way",
                  SIGNATURE_HEADER: "sha256=<hex HMAC-SHA256 of `<timestamp>.` followed by the raw body, "
                                    "with the signing secret>"})
async def incoming_webhook(request: web.Request) -> web.Response:
    bot = await enabled_bot(request, "webhook")
    bridge = request.config_dict[BRIDGE]
    raw = await request.read()
    timestamp = request.headers.get(TIMESTAMP_HEADER, "").strip()
    signature = request.headers.get(SIGNATURE_HEADER, "").strip()
    if not UNIX_SECONDS.fullmatch(timestamp) or not signature_matches(
            str(bot["config"]["signing_secret"]), signed_content(timestamp, raw), signature):
        raise Unauthorized("Missing or wrong signature.", error_type="invalid_signature",
                           hint=f"Send {TIMESTAMP_HEADER}: <Unix time in seconds> and {SIGNATURE_HEADER}: "
                                f"sha256=<hex HMAC-SHA256 of '<timestamp>.' followed by the body, with the "
                                f"bot's signing secret> (docs/platform-bridge.md).")
    max_age = bridge.settings.webhook_max_age
    if abs(time.time() - int(timestamp)) > max_age:  # a captured message sent again later
        raise Unauthorized("The request signature is too old.", error_type="stale_signature",
                           hint=f"Sign each message at the time it is sent; {TIMESTAMP_HEADER} is accepted for "
                                f"{max_age} seconds either way of the bridge's clock.")
    message = load(IncomingWebhook(), await read_json(request), "body")
    # Within that window, a replay of the very request, or the same message_id sent again (a
    # client's retry), is taken once; both are remembered for as long as a timestamp could pass.
    keys = [f"sig:{signature}"] + ([f"id:{message['message_id']}"] if message["message_id"] else [])
    if not await store.first_delivery(bridge.db, bot["id"], keys, 2 * max_age):
        return web.json_response({"accepted": True, "duplicate": True}, status=202)
    await bridge.webhook_message(bot, message)
    return web.json_response({"accepted": True}, status=202)


@routes.post("/api/v1/platforms/discord/{id}/interactions", name="platform_bridge.discord_interactions")
@api_doc("A Discord bot's interactions endpoint: PING, and a command with a `message` option answered deferred "
         "(type 5) and then through the interaction's follow-up webhook", body={"type": "object"},
         responses={200: {"type": "object", "required": ["type"], "properties": {"type": {"type": "integer",
                                                                                          "enum": [1, 5]}}}},
         errors=(401, 404), auth="none", path=BOT_PATH,
         headers={"X-Signature-Ed25519": "Discord's Ed25519 signature (hex) of the timestamp followed by the body",
                  "X-Signature-Timestamp": "The Unix time Discord signed at; accepted for 300 seconds"})
async def discord_interactions(request: web.Request) -> web.Response:
    bot = await enabled_bot(request, "discord")
    raw = await request.read()
    problem = discord.signature_problem(str(bot["config"]["public_key"]), request.headers.get("X-Signature-Ed25519", ""),
                                        request.headers.get("X-Signature-Timestamp", ""), raw)
    if problem is not None:
        raise Unauthorized("Invalid request signature." if problem == "invalid_signature"
                           else "The request signature is too old.", error_type=problem,
                           hint="Discord signs every interaction with the application's key (the bot's public_key).")
    interaction = await read_json(request)
    if not isinstance(interaction, dict):
        raise BadRequest("The interaction must be a JSON object.", error_type="validation_error")
    if interaction.get("type") == discord.PING:
        return web.json_response({"type": discord.PONG})
    text, sender = discord.command_text(interaction), discord.sender_of(interaction)
    if interaction.get("type") != discord.APPLICATION_COMMAND or not text or not sender \
            or not interaction.get("token"):
        raise BadRequest("Only a command with a `message` option is handled here.",
                         error_type="unsupported_interaction",
                         hint="Register the command with a string option named `message`.")
    request.config_dict[BRIDGE].discord_command(bot, interaction, text, sender)
    return web.json_response({"type": discord.DEFERRED_CHANNEL_MESSAGE})
