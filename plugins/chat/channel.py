"""`GET /ws/chat`: the handshake (Origin allow-list, authentication before the upgrade, the
session's owner), the connection's life, and the `message`, `ping` and `history` frames. The
handler reaches the app's `ChatChannel` under `CHAT_CHANNEL`."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping, Sequence
from urllib.parse import urlsplit

import marshmallow
from aiohttp import WSMsgType, web
from marshmallow import fields, validate
from marshmallow.types import StrSequenceOrSet, UnknownOption

from gateway.asyncapi import websocket_endpoint
from gateway.context import get_context
from gateway.errors import BadRequest, Conflict, Forbidden, NotFound
from gateway.openapi import api_doc
from gateway.plugins import Registrar
from gateway.validation import parse_query
from gateway.ws import dispatch_frame, require_identity
from plugins.ai_core.contract import MESSAGE_TOO_LONG

from .admission import Turn
from .chat_channel import ChatChannel
from .contract import require_chat_user
from .frames import client_info, error_fields, error_frame, now_ms
from .keys import session_key
from .presence import SESSION_KEY

if TYPE_CHECKING:
    from gateway.connection import Connection

SESSION_ID = re.compile(r"^[A-Za-z0-9_\-.:]{1,128}\Z")  # \Z: `$` would let a trailing newline through
MODES = ("text", "voice_msg", "voice_assistant")
# The longest device fields, in the handshake's query and in a message (a User-Agent is cut there).
MAX_CLIENT_ID, MAX_DEVICE_NAME, MAX_USER_AGENT = 128, 128, 256
# A message's own device fields (spec: ClientMessage), each overriding the connection's.
CLIENT_FIELDS = (("client_id", MAX_CLIENT_ID), ("device_name", MAX_DEVICE_NAME), ("user_agent", MAX_USER_AGENT))

CHAT_CHANNEL: web.AppKey[ChatChannel] = web.AppKey("chat.channel")

routes = web.RouteTableDef()


class ConnectQuery(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.EXCLUDE

    session_id = fields.String(load_default=None, validate=validate.Regexp(SESSION_ID))
    client_id = fields.String(load_default="", validate=validate.Length(max=MAX_CLIENT_ID))
    device_name = fields.String(load_default="", validate=validate.Length(max=MAX_DEVICE_NAME))
    resume = fields.Boolean(load_default=True)
    after = fields.String(load_default=None, validate=validate.Regexp(r"^[^:]{1,64}:-?\d{1,9}\Z"))


class HandshakeQuery(ConnectQuery):
    """The handshake's query as documented: ConnectQuery and the token the authenticator reads."""

    token = fields.String(metadata={"description": "The access token, when no Authorization header is sent "
                                                   "(browsers cannot set headers on a WebSocket)."})


ATTACHMENT_TYPES = ("image", "document")


class AttachmentFrame(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.EXCLUDE

    type = fields.String(load_default="image", validate=validate.OneOf(ATTACHMENT_TYPES), metadata={
        "description": "`image` (handed to the model) or `document` (a file added to the conversation's "
                       "knowledge base, which the assistant searches; docs/chat.md)."})
    url = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=16 * 1024 * 1024))
    file_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=64))
    thumbnail_url = fields.String(load_default=None, allow_none=True)
    filename = fields.String(load_default=None, allow_none=True)
    width = fields.Integer(load_default=None, allow_none=True)
    height = fields.Integer(load_default=None, allow_none=True)
    size = fields.Integer(load_default=None, allow_none=True)
    description = fields.String(load_default=None, allow_none=True)
    kb_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=64), metadata={
        "description": "`document`: the knowledge base (the conversation's own) the file was added to."})


class MessageFrame(marshmallow.Schema):
    session_id = fields.String(load_default=None, allow_none=True, validate=validate.Regexp(SESSION_ID))
    mode = fields.String(load_default="text", validate=validate.OneOf(MODES))
    content = fields.String(load_default="")
    attachments = fields.List(fields.Nested(AttachmentFrame), load_default=list,
                              validate=validate.Length(max=10))
    timestamp = fields.Integer(load_default=None, allow_none=True)
    client_msg_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(min=1, max=128))
    # The sending device, when it names itself per message; otherwise the connection's (handshake).
    client_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=MAX_CLIENT_ID),
                              metadata={"description": "The sending device; default: the handshake's `client_id`."})
    device_name = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=MAX_DEVICE_NAME),
                                metadata={"description": "Default: the handshake's `device_name`."})
    user_agent = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=MAX_USER_AGENT),
                               metadata={"description": "Default: the handshake's User-Agent header."})

    def load(self, data: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, many: bool | None = None,
             partial: bool | StrSequenceOrSet | None = None, unknown: UnknownOption | None = None) -> Any:
        """Most frames are plain text: those are read without marshmallow's machinery, which
        costs a tenth of a millisecond on the path to the first token of every turn. Anything
        else (attachments, a value of another type, an invalid one) goes through the schema;
        both give the same result (tests/chat/test_frames.py)."""
        if many is None and partial is None and unknown == marshmallow.EXCLUDE \
                and not (self.many or self.partial or self.only or self.exclude):
            plain = plain_message_frame(data)
            if plain is not None:
                return plain
        return super().load(data, many=many, partial=partial, unknown=unknown)


def plain_message_frame(data: object) -> dict | None:
    """`MessageFrame().load(data, unknown=EXCLUDE)` of a frame without attachments whose fields
    are all valid and of their exact types; None for any other frame."""
    if not isinstance(data, dict):
        return None
    content = data.get("content", "")
    client_msg_id = data.get("client_msg_id")
    timestamp = data.get("timestamp")
    session_id = data.get("session_id")
    mode = data.get("mode", "text")
    if type(content) is not str or (client_msg_id is not None and not (
            type(client_msg_id) is str and 0 < len(client_msg_id) <= 128)) \
            or (timestamp is not None and type(timestamp) is not int) \
            or (session_id is not None and not (type(session_id) is str and SESSION_ID.match(session_id))) \
            or type(mode) is not str or mode not in MODES or data.get("attachments", []) != []:
        return None
    frame: dict[str, Any] = {"session_id": session_id, "mode": mode, "content": content, "attachments": [],
                             "timestamp": timestamp, "client_msg_id": client_msg_id}
    for name, longest in CLIENT_FIELDS:
        value = data.get(name)
        if value is not None and not (type(value) is str and len(value) <= longest):
            return None
        frame[name] = value
    return frame


class HistoryFrame(marshmallow.Schema):
    session_id = fields.String(load_default=None, allow_none=True, validate=validate.Regexp(SESSION_ID))
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=200))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0))
    before_id = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=1))


class StopFrame(marshmallow.Schema):
    session_id = fields.String(load_default=None, allow_none=True, validate=validate.Regexp(SESSION_ID),
                               metadata={"description": "Default: the connection's session."})
    turn_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(min=1, max=64),
                            metadata={"description": "The reply to stop (its frames' `turn_id`); default: "
                                                     "whichever runs in the session."})


class RegenerateFrame(marshmallow.Schema):
    session_id = fields.String(load_default=None, allow_none=True, validate=validate.Regexp(SESSION_ID),
                               metadata={"description": "Default: the connection's session."})


class EditFrame(marshmallow.Schema):
    session_id = fields.String(load_default=None, allow_none=True, validate=validate.Regexp(SESSION_ID),
                               metadata={"description": "Default: the connection's session."})
    message_id = fields.Integer(required=True, validate=validate.Range(min=1),
                                metadata={"description": "The stored user message to replace."})
    content = fields.String(required=True, metadata={"description": "The message's new text."})
    client_msg_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(min=1, max=128),
                                  metadata={"description": "The new message's id on the device, as in `message`."})


def origin_allowed(request: web.Request, allowed: list[str], public_base_url: str) -> bool:
    """Browsers always send Origin on a WebSocket handshake; other clients may not, and cannot be
    hijacked cross-site. A browser page is accepted from the gateway's own origin, the public
    base URL's origin, or the configured allow-list (`*` accepts any)."""
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    origin = origin.rstrip("/").lower()
    if "*" in allowed or origin in {item.rstrip("/").lower() for item in allowed}:
        return True
    own = f"{request.scheme}://{request.host}".lower()
    if origin == own:
        return True
    if public_base_url:
        parts = urlsplit(public_base_url)
        if origin == f"{parts.scheme}://{parts.netloc}".lower():
            return True
    return False


# The handler itself, not a wrapper around it: a wrapping coroutine's frame would stay suspended
# for as long as each connection lives (bench/chat measures memory per idle connection).
@routes.get("/ws/chat", name="chat.ws", allow_head=False)
@websocket_endpoint("The chat channel: a person's messages in, the assistant's replies out", query=ConnectQuery)
@api_doc("Open the chat channel (WebSocket upgrade; frames: the AsyncAPI document)", query=HandshakeQuery,
         responses={101: None}, errors=(403, 404, 503),
         headers={"Upgrade": "`websocket`", "Origin": "A browser's page"},
         description="Only the administrator may connect unless [auth] chat_for_all_users is set; a browser "
                     "page's Origin must be allowed. `after` (`<turn id>:<sequence>`) resumes a reply.")
async def handle_connect(request: web.Request) -> web.StreamResponse:
    chat = request.config_dict[CHAT_CHANNEL]
    context = get_context(request)
    # Who first: a request without a credential is a 401 whatever its Origin.
    identity = await require_chat_user(request)  # the assistant's one access rule, as at the AI core's doors
    if not origin_allowed(request, chat.allowed_origins, context.config.settings.core.public_base_url):
        raise Forbidden("This Origin may not open the chat channel.", error_type="origin_not_allowed",
                        hint="Add the page's origin to [plugins.chat] allowed_origins.")
    query = parse_query(request, ConnectQuery())
    language = request.headers.get("Accept-Language")  # a new session's default title
    if query["session_id"]:
        session_id = query["session_id"]
        await chat.conversations.ensure_session(identity.user_id, session_id, language=language)
    else:  # the sessions plugin owns session ids: it makes one
        session_id = (await chat.conversations.create_session(identity.user_id, language=language))["id"]
    after = None
    if query["after"]:
        turn_id, _, seq = query["after"].rpartition(":")
        after = (turn_id, int(seq))
    resume, client_id, device_name = query["resume"], query["client_id"], query["device_name"]
    del query  # locals live as long as the connection: keep only what is used

    user_agent = request.headers.get("User-Agent", "")[:MAX_USER_AGENT]
    await chat.presence.arriving(identity.user_id, client_id, device_name, user_agent)
    ws = web.WebSocketResponse(heartbeat=chat.heartbeat, max_msg_size=chat.max_frame_bytes, compress=chat.compress)
    try:
        await ws.prepare(request)
    except BaseException:
        await chat.presence.not_arrived(client_id)
        raise
    connection = await context.hub.register(
        ws, identity.user_id, identity=identity, client_id=client_id, device_name=device_name,
        user_agent=user_agent, max_pending=chat.max_pending, data={SESSION_KEY: session_id}, hold=resume)
    try:
        await chat.presence.mark(connection)
        if resume:
            await chat.replay.replay_into(connection, session_key(identity.user_id, session_id), after)
        async for frame in ws:
            if frame.type == WSMsgType.TEXT:
                await dispatch_frame(request.app, connection, frame.data, error_fields=error_fields)
            elif frame.type == WSMsgType.BINARY:
                connection.send(error_frame("binary frames are not accepted on /ws/chat; send JSON text"))
            elif frame.type == WSMsgType.ERROR:
                break
    finally:
        await context.hub.unregister(connection)
        await chat.presence.disconnected(connection)
    return ws


def register_frames(registrar: Registrar, chat: ChatChannel) -> None:
    """The frames a person sends on /ws/chat, each to its handler."""
    register_conversation_frames(registrar, chat)
    register_control_frames(registrar, chat)


def register_conversation_frames(registrar: Registrar, chat: ChatChannel) -> None:
    """`message` (a new turn), `ping`, and `history` (a page of the session's messages)."""
    @registrar.ws_message("message", MessageFrame())
    async def on_message(connection: "Connection", frame: dict) -> None:
        identity = require_identity(connection)
        # Stored in the frame: an error frame (gateway.ws.dispatch_frame) names the session it is about.
        session_id = frame["session_id"] = frame["session_id"] or connection.data[SESSION_KEY]
        content = frame["content"] or ""
        if len(content) > chat.max_message_chars:
            connection.send(error_frame(f"content is longer than {chat.max_message_chars} characters",
                                        errorType=MESSAGE_TOO_LONG, client_msg_id=frame["client_msg_id"]))
            return
        if not content.strip() and not frame["attachments"]:
            connection.send(error_frame("a message needs content or an attachment",
                                        client_msg_id=frame["client_msg_id"]))
            return
        client_id, device_name, user_agent = frame["client_id"], frame["device_name"], frame["user_agent"]
        turn = Turn(session_id=session_id, user_id=identity.user_id, text=content, mode=frame["mode"],
                    attachments=frame["attachments"], client_msg_id=frame["client_msg_id"], sender=connection.id,
                    client=client_info(client_id or connection.client_id, device_name or connection.device_name,
                                       user_agent or connection.user_agent))
        await chat.turns.submit(turn, session_known=session_id == connection.data[SESSION_KEY])

    @registrar.ws_message("ping")
    async def on_ping(connection: "Connection", frame: dict) -> None:
        connection.send({"type": "pong", "msg_type": "system_info", "timestamp": now_ms()})

    @registrar.ws_message("history", HistoryFrame())
    async def on_history(connection: "Connection", frame: dict) -> None:
        identity = require_identity(connection)
        session_id = frame["session_id"] = frame["session_id"] or connection.data[SESSION_KEY]
        # The caller's own session (ids are per owner; the administrator reads other users' over HTTP).
        session = await chat.conversations.get_session(identity.user_id, session_id)
        if session is None:
            raise NotFound(f"no session {session_id}", error_type="session_not_found")
        limit = frame["limit"]
        if frame["before_id"] is not None:
            page = await chat.conversations.list_messages(identity.user_id, session_id, limit=limit + 1,
                                                          before_id=frame["before_id"])
            has_more, messages = len(page) > limit, page[-limit:]
        else:
            page = await chat.conversations.list_messages(identity.user_id, session_id, limit=limit + 1,
                                                          offset=frame["offset"])
            has_more, messages = len(page) > limit, page[:limit]
        connection.send({"type": "history_response", "msg_type": "chat", "session_id": session_id,
                         "messages": messages, "has_more": has_more, "limit": limit,
                         "offset": frame["offset"], "before_id": frame["before_id"], "timestamp": now_ms()})


def register_control_frames(registrar: Registrar, chat: ChatChannel) -> None:
    """`stop` (the running reply), and the rewrites: `regenerate` and `edit`."""
    @registrar.ws_message("stop", StopFrame())
    async def on_stop(connection: "Connection", frame: dict) -> None:
        """Stop the user's running reply wherever it runs: here at once, else every instance
        is asked over the bus (one of them runs it). A stop finding no running turn is ignored."""
        identity = require_identity(connection)
        session_id = frame["session_id"] = frame["session_id"] or connection.data[SESSION_KEY]
        await chat.request_stop(identity.user_id, session_id, frame["turn_id"])

    @registrar.ws_message("regenerate", RegenerateFrame())
    async def on_regenerate(connection: "Connection", frame: dict) -> None:
        identity = require_identity(connection)
        session_id = frame["session_id"] = frame["session_id"] or connection.data[SESSION_KEY]
        if await chat.conversations.get_session(identity.user_id, session_id) is None:
            raise NotFound(f"no session {session_id}", error_type="session_not_found")
        asked = await chat.conversations.last_message(identity.user_id, session_id, "user")
        if asked is None:
            raise Conflict("This session has no message to answer again.", error_type="nothing_to_regenerate")
        turn = Turn(session_id=session_id, user_id=identity.user_id, text=asked["content"], mode="text",
                    sender=connection.id, reuse=asked,
                    client=client_info(connection.client_id, connection.device_name, connection.user_agent))

        async def rewrite() -> None:
            await chat.truncate(identity.user_id, session_id, asked["id"] + 1, "regenerate")

        await chat.turns.submit_rewrite(turn, rewrite)

    @registrar.ws_message("edit", EditFrame())
    async def on_edit(connection: "Connection", frame: dict) -> None:
        identity = require_identity(connection)
        session_id = frame["session_id"] = frame["session_id"] or connection.data[SESSION_KEY]
        content = frame["content"]
        chat.check_length(content)
        if not content.strip():
            raise BadRequest("an edited message needs content", error_type="invalid_frame")
        edited = await chat.conversations.get_message(identity.user_id, session_id, frame["message_id"])
        if edited is None or edited["role"] != "user":
            raise NotFound(f"no message {frame['message_id']} of yours in session {session_id}",
                           error_type="message_not_found")
        turn = Turn(session_id=session_id, user_id=identity.user_id, text=content, mode="text",
                    client_msg_id=frame["client_msg_id"], sender=connection.id,
                    client=client_info(connection.client_id, connection.device_name, connection.user_agent))

        async def rewrite() -> None:
            await chat.truncate(identity.user_id, session_id, edited["id"], "edit")

        await chat.turns.submit_rewrite(turn, rewrite)
