"""The schemas of the frames chat sends on `/ws/chat` (built in frames.py, channel.py and relay.py),
declared with the core so the service's AsyncAPI document lists them (`register_frame_schemas`).
tests/chat/test_frame_documents.py checks every frame of real turns against them."""
from __future__ import annotations

from typing import Any

import marshmallow
from marshmallow import fields, validate

from gateway.asyncapi import ErrorFrame
from gateway.plugins import Registrar

# spec: ServerMessage
MSG_TYPES = ("chat", "action", "thinking", "tool_progress", "system_info", "markdown", "code")
ROLES = ("user", "assistant", "action", "system")
REVIEW_TYPES = ("action", "chat", "markdown", "code", "search_result")
TOOL_STATUSES = ("started", "running", "completed", "failed")
LEVELS = ("info", "warning", "error")
RESPONSE_MODES = ("text", "voice_msg", "voice_assistant")
MULTI_MESSAGE_TYPES = ("chat", "action", "system_info")


def response_mode(**options: Any) -> fields.String:
    """The mode of the turn a frame belongs to (spec: ServerMessage.response_mode): `text`, or a
    spoken reply's `voice_msg` / `voice_assistant`."""
    return fields.String(validate=validate.OneOf(RESPONSE_MODES), **options,
                         metadata={"description": "The mode of the message this reply answers: `text`, "
                                                  "`voice_msg` or `voice_assistant`."})


def _msg_type(**options: Any) -> fields.String:
    return fields.String(validate=validate.OneOf(MSG_TYPES), **options,
                         metadata={"description": "How a client renders it; always filled by the backend."})


class TurnFrame(marshmallow.Schema):
    """The fields every frame of a reply carries: the reply it belongs to and its place in it
    (`seq`, what a reconnecting client passes back as `after=<turn_id>:<seq>`)."""

    role = fields.String(required=True, validate=validate.OneOf(ROLES))
    msg_type = _msg_type(required=True)
    message_id = fields.String(required=True, metadata={"description": "`reply_<turn_id>` for every frame of a reply."})
    session_id = fields.String(required=True)
    turn_id = fields.String(required=True)
    seq = fields.Integer(required=True, metadata={"description": "The frame's number within its turn."})
    response_mode = response_mode(required=True)
    timestamp = fields.Integer(required=True, metadata={"description": "Milliseconds since the epoch."})


class StreamStartFrame(TurnFrame):
    pass


class StreamChunkFrame(TurnFrame):
    content = fields.String(required=True, metadata={"description": "The next piece of the reply's text."})


class ThinkingFrame(TurnFrame):
    """The model's thinking during a reply; or (without `session_id`, `turn_id` and `seq`, with
    `thinking_status` `finished`) a finished background thought of the thinking job (plugin
    `thinking`, docs/memory.md), its `message_id` `thinking_<entry id>`."""

    session_id = fields.String()
    turn_id = fields.String()
    seq = fields.Integer(metadata={"description": "The frame's number within its turn."})
    response_mode = response_mode()
    thinking_status = fields.String(required=True)
    thinking_content = fields.String(required=True)


class ToolProgress(marshmallow.Schema):
    tool_name = fields.String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(TOOL_STATUSES))
    progress = fields.Float(required=True, metadata={"description": "0 to 1."})
    message = fields.String(required=True)


class ToolProgressFrame(TurnFrame):
    tool_progress = fields.Nested(ToolProgress, required=True)


class SystemInfo(marshmallow.Schema):
    level = fields.String(required=True, validate=validate.OneOf(LEVELS))
    message = fields.String(required=True)
    action = fields.String(required=True, metadata={
        "description": "What a client may offer, e.g. `retry`; empty for none. `confirm`: a tool call with an effect "
                       "that is physical or hard to undo waits for the person's yes; the person's next message in "
                       "the session decides (`yes`, `ok`, `确认`, `是`... runs it once; anything else cancels it), "
                       "so a client's Confirm button sends the message `yes` (`确认`) and Cancel sends `no` (`取消`)."})
    effect = fields.String(metadata={"description": "`confirm`: what the call would do, exactly, in the person's "
                                                    "language (\"Unlock the front door lock\")."})
    confirmation_id = fields.String(metadata={"description": "`confirm`: the waiting call's id (a newer one in the "
                                                             "session replaces it)."})
    expires_at = fields.String(metadata={"description": "`confirm`: when the call stops being confirmable (RFC 3339)."})


class SystemInfoFrame(TurnFrame):
    """A notice during a reply, or (without `message_id` and `seq`) after a failed turn."""

    message_id = fields.String()
    seq = fields.Integer()
    system_info = fields.Nested(SystemInfo, required=True)


class ReviewMetadata(marshmallow.Schema):
    language = fields.String(metadata={"description": "A `code` part's language (`text` when unnamed)."})
    url = fields.String(metadata={"description": "A search summary's source."})


class ReviewMessage(marshmallow.Schema):
    type = fields.String(required=True, validate=validate.OneOf(REVIEW_TYPES))
    content = fields.String(required=True)
    delay_ms = fields.Integer(required=True, metadata={"description": "A reading pause before showing this part."})
    metadata = fields.Nested(ReviewMetadata, required=True)


class ReviewFrame(TurnFrame):
    review_messages = fields.List(fields.Nested(ReviewMessage), required=True)


class StreamEndFrame(TurnFrame):
    text = fields.String(required=True, metadata={"description": "The reply's full text (what arrived of it when it failed)."})
    content = fields.String(required=True, metadata={"description": "The same as `text`."})
    finish_reason = fields.String(required=True, metadata={
        "description": "`stop`, `length` (cut at the reply limit), `stopped` (the person stopped it: a `stop` "
                       "frame), `error`, ..."})
    user_message_id = fields.Integer(metadata={"description": "The stored user message this reply answers "
                                                              "(what `edit` names); absent when the turn failed."})
    model = fields.String(metadata={"description": "The model that answered."})
    stored_message_ids = fields.List(fields.Integer(), metadata={"description": "The stored parts of the reply."})
    full_audio_url = fields.String(metadata={"description": "A spoken reply (modes `voice_msg`, `voice_assistant`): "
                                                            "the whole reply's audio (docs/voice.md); added by a "
                                                            "reply tap."})


class EchoAttachment(marshmallow.Schema):
    """An attachment as stored with the message (its `url` left out)."""

    type = fields.String(required=True)
    file_id = fields.String()
    thumbnail_url = fields.String()
    filename = fields.String()
    width = fields.Integer()
    height = fields.Integer()
    size = fields.Integer()
    description = fields.String()
    kb_id = fields.String(metadata={"description": "`document`: the knowledge base the file was added to."})


class ClientInfo(marshmallow.Schema):
    """The device a message came from: its own values when the message named them, else those of
    its connection's handshake (`client_id`, `device_name` query parameters; the User-Agent header)."""

    client_id = fields.String(required=True)
    device_name = fields.String(required=True)
    user_agent = fields.String(required=True)


class EchoFrame(marshmallow.Schema):
    role = fields.String(required=True, validate=validate.OneOf(("user", "assistant")), metadata={
        "description": "`user`: the user's message; `assistant`: a message the assistant posted unasked "
                       "(an automation rule's `message` action)."})
    msg_type = _msg_type(required=True)
    session_id = fields.String(required=True)
    message_id = fields.String(required=True, metadata={"description": "The stored message's id."})
    content = fields.String(required=True)
    text = fields.String(required=True)
    attachments = fields.List(fields.Nested(EchoAttachment), required=True)
    client_msg_id = fields.String(required=True, allow_none=True)
    timestamp = fields.Integer(required=True)
    client_info = fields.Nested(ClientInfo, metadata={
        "description": "The user's message only: the device it was sent from (a client shows \"from <device_name>\"); "
                       "absent when it came from no device (a webhook, an automation rule)."})


class MultiMessageItem(marshmallow.Schema):
    index = fields.Integer(required=True, metadata={"description": "Its place among the messages, from 0."})
    content = fields.String(required=True)
    msg_type = fields.String(required=True, validate=validate.OneOf(MULTI_MESSAGE_TYPES))
    message_id = fields.String(required=True, metadata={"description": "The stored message's id."})


class MultiMessage(marshmallow.Schema):
    messages = fields.List(fields.Nested(MultiMessageItem), required=True)


class MultiMessageFrame(marshmallow.Schema):
    role = fields.String(required=True, validate=validate.Equal("assistant"))
    msg_type = _msg_type(required=True)
    session_id = fields.String(required=True)
    timestamp = fields.Integer(required=True)
    multi_message = fields.Nested(MultiMessage, required=True)


class HistoryChangedFrame(marshmallow.Schema):
    session_id = fields.String(required=True)
    from_message_id = fields.Integer(required=True, metadata={
        "description": "The session's stored messages from this id on were deleted: drop them."})
    reason = fields.String(required=True, validate=validate.OneOf(("edit", "regenerate")))
    msg_type = _msg_type(required=True)
    timestamp = fields.Integer(required=True)


class QueuedFrame(marshmallow.Schema):
    session_id = fields.String(required=True)
    client_msg_id = fields.String(required=True, allow_none=True)
    turn_id = fields.String(required=True)
    position = fields.Integer(required=True, metadata={"description": "Turns waiting in the session, this one included."})
    msg_type = _msg_type(required=True)
    timestamp = fields.Integer(required=True)


class ChatErrorFrame(ErrorFrame):
    msg_type = _msg_type(required=True)
    turn_id = fields.String()
    seq = fields.Integer(metadata={"description": "An error within a reply (`reply_too_large`): its place in it."})
    response_mode = response_mode()
    timestamp = fields.Integer()


class PongFrame(marshmallow.Schema):
    msg_type = _msg_type(required=True)
    timestamp = fields.Integer(required=True)


class StoredMessage(marshmallow.Schema):
    """A message of the session's history, as the sessions plugin stores it."""

    id = fields.Integer(required=True)
    session_id = fields.String(required=True)
    user_id = fields.String(required=True)
    role = fields.String(required=True)
    msg_type = fields.String(required=True)
    content = fields.String(required=True)
    metadata = fields.Dict(required=True)
    client_msg_id = fields.String(required=True, allow_none=True)
    created_at = fields.Integer(required=True, metadata={"description": "Milliseconds since the epoch."})


class HistoryResponseFrame(marshmallow.Schema):
    msg_type = _msg_type(required=True)
    session_id = fields.String(required=True)
    messages = fields.List(fields.Nested(StoredMessage), required=True)
    has_more = fields.Boolean(required=True)
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)
    before_id = fields.Integer(required=True, allow_none=True)
    timestamp = fields.Integer(required=True)


SERVER_FRAMES: dict[str, tuple[type[marshmallow.Schema], str]] = {
    "stream_start": (StreamStartFrame, "The assistant starts a reply (to every device of the user)."),
    "stream_chunk": (StreamChunkFrame, "The next piece of the reply's text."),
    "thinking": (ThinkingFrame, "The model's thinking, as it streams."),
    "tool_progress": (ToolProgressFrame, "A tool the model called: started, running, completed or failed."),
    "system_info": (SystemInfoFrame, "A notice for the person: a warning during the reply, or a failed turn."),
    "review": (ReviewFrame, "The finished reply split by format, before `stream_end`."),
    "stream_end": (StreamEndFrame, "The reply ended, whichever way: its full text and finish reason."),
    "response": (EchoFrame, "The user's message, once stored, to the user's other devices; or an assistant "
                            "message posted without a turn (an automation rule), to every device."),
    "multi_message": (MultiMessageFrame, "Several assistant messages posted together without a turn (an automation "
                                         "run's consecutive `message` actions into one session), to every device."),
    "history_changed": (HistoryChangedFrame, "The session's history was cut back (an `edit` or `regenerate`), to "
                                             "every device of the user, before the new reply's frames."),
    "queued": (QueuedFrame, "The session is busy: the message waits its turn (to its sender)."),
    "error": (ChatErrorFrame, "A frame that could not be taken, or a turn that failed (to its sender)."),
    "pong": (PongFrame, "The answer to `ping`."),
    "history_response": (HistoryResponseFrame, "The answer to `history`: a page of the session's messages."),
}


def register_frame_schemas(registrar: Registrar) -> None:
    for kind, (schema, description) in SERVER_FRAMES.items():
        registrar.ws_server_message(kind, schema, description)
