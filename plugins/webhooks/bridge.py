"""`POST /api/v1/bridge/turns`: the platform bridge (a separate service) runs a chat turn for a
gateway user in that user's own session and reads the reply as it streams. The turn and its
pieces are the chat plugin's (`CHAT_TURNS.submit_and_wait` with `on_piece`), from whichever
worker or instance runs it, so nothing of the turn machine is repeated here."""
from __future__ import annotations

import asyncio
import json

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.context import get_context
from gateway.errors import ApiError, Forbidden
from gateway.identity import require_user
from gateway.openapi import api_doc
from gateway.validation import parse_body
from plugins.chat.contract import CHAT_TURNS, TurnFailed, chat_refused, may_chat
from plugins.sessions.contract import CONVERSATIONS

from .api import WEBHOOKS

routes = web.RouteTableDef()

BRIDGE_EVENTS = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "enum": ["delta", "done", "error"]},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "contentSchema": {"type": "object", "required": ["type"],
                                   "properties": {"type": {"type": "string"}}}},
    },
    "description": "Server-sent events: `delta` {content} as the reply streams, then `done` {text, session_id, "
                   "message_ids} or `error` {error, errorType}.",
}


class BridgeTurnBody(marshmallow.Schema):
    user_id = fields.String(required=True, validate=validate.Length(min=1, max=100),
                            metadata={"description": "The gateway user the turn is for."})
    session_id = fields.String(required=True, validate=[
        validate.Length(min=1, max=128),
        validate.Regexp(r"^[A-Za-z0-9_.:\-]+\Z", error="use letters, digits and _ . : - only")])
    text = fields.String(required=True, validate=validate.Length(min=1, max=32000))
    platform = fields.String(load_default="bridge", validate=validate.Length(min=1, max=50))
    title = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=200))


def event(payload: dict) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode("utf-8", "replace")


@routes.post("/api/v1/bridge/turns", name="webhooks.bridge_turn")
@api_doc("A chat turn for a gateway user, run by the platform bridge, answered as server-sent events",
         body=BridgeTurnBody, responses={200: {"text/event-stream": BRIDGE_EVENTS}}, auth="peer",
         description="The service credential only: the bridge names the user it relays for "
                     "(docs/platform-bridge.md); 403 `admin_only` when that user may not chat "
                     "(docs/chat.md, \"Who may chat\").")
async def bridge_turn(request: web.Request) -> web.StreamResponse:
    identity = await require_user(request)
    if identity.kind != "service":
        raise Forbidden("Only the platform bridge runs turns here.", error_type="service_only",
                        hint="Call with the service credential (SERVICE_TOKEN).")
    body = await parse_body(request, BridgeTurnBody())
    context = get_context(request)
    user_id, session_id = body["user_id"], body["session_id"]
    if not may_chat(context.config, user_id):  # before the stream: a plain 403 the bridge can tell apart
        raise chat_refused()
    await context.contracts.require(CONVERSATIONS).ensure_session(user_id, session_id, title=body["title"])
    pieces: asyncio.Queue[str] = asyncio.Queue()
    turn = asyncio.ensure_future(context.contracts.require(CHAT_TURNS).submit_and_wait(
        user_id, session_id, body["text"], "text", metadata={"platform": body["platform"]},
        timeout=request.config_dict[WEBHOOKS].ai_timeout, on_piece=pieces.put_nowait))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    try:
        await response.prepare(request)
        while not turn.done():
            piece = asyncio.ensure_future(pieces.get())
            await asyncio.wait({piece, turn}, return_when=asyncio.FIRST_COMPLETED)
            if piece.done():
                await response.write(event({"type": "delta", "content": piece.result()}))
            else:
                piece.cancel()
        while not pieces.empty():
            await response.write(event({"type": "delta", "content": pieces.get_nowait()}))
        try:
            reply = turn.result()
        except TurnFailed as failure:
            await response.write(event({"type": "error", "error": failure.error, "errorType": failure.error_type}))
        except ApiError as failure:
            await response.write(event({"type": "error", "error": failure.error,
                                        "errorType": failure.error_type or "bad_request"}))
        else:
            await response.write(event({"type": "done", "text": reply.text, "session_id": session_id,
                                        "message_ids": reply.message_ids}))
        await response.write_eof()
    finally:
        if not turn.done():  # the bridge hung up: the turn goes on and is stored
            turn.add_done_callback(lambda task: task.cancelled() or task.exception())
    return response
