"""The frames chat sends: what each AI core event becomes, how a reply ends, and the notices
around a turn. Every frame carries `msg_type` and a `timestamp` (spec: filled by the backend)."""
from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from gateway.clock import now_ms
from gateway.text import dumps_text
from gateway.ws import error_frame as core_error_frame

if TYPE_CHECKING:
    from plugins.ai_core.contract import ChatEvent


def error_fields() -> dict:
    """The spec gives every frame on /ws/chat a msg_type and a timestamp; the core's error
    frames get them here (`dispatch_frame`'s error_fields)."""
    return {"msg_type": "system_info", "timestamp": now_ms()}


_encode = json.JSONEncoder(ensure_ascii=False).encode


# What a client is told when a turn fails, by errorType: fixed sentences. The text of an exception
# or of a service behind the gateway (hosts, ports, addresses, statuses) goes to the log only.
TURN_ERRORS = {
    "ai_core_unreachable": "The assistant service cannot be reached right now; please try again in a moment.",
    "ai_core_failed": "The assistant service could not answer this message.",
    "model_failed": "The language model stopped while answering.",
    "all_models_failed": "No language model could answer this message right now.",
    "reply_too_large": "The reply was too large to deliver.",
    "storage_failed": "The message could not be stored; please send it again.",
    "database_unavailable": "The assistant's storage is unavailable for a moment; please send it again shortly.",
    "bus_unavailable": "The assistant's message bus is unavailable for a moment; please send it again shortly.",
    "internal_error": "The server failed while relaying the reply.",
    "duplicate_message": "This message was already received.",
    "timeout": "No reply came in time; the turn goes on and its reply is stored.",
}
# An errorType the AI core sends is passed on when it looks like one; otherwise this one.
ERROR_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")


def turn_error_type(error_type: object) -> str:
    return error_type if isinstance(error_type, str) and ERROR_TYPE.match(error_type) else "ai_core_failed"


def turn_error_text(error_type: str) -> str:
    return TURN_ERRORS.get(error_type, TURN_ERRORS["ai_core_failed"])


def error_frame(error: str, **extra: Any) -> dict:
    return core_error_frame(error, **(error_fields() | extra))


def reply_id(turn_id: str) -> str:
    """The message_id of a turn's reply frames."""
    return f"reply_{turn_id}"


def stream_start_frame(turn_id: str) -> dict:
    return {"type": "stream_start", "role": "assistant", "msg_type": "chat", "message_id": reply_id(turn_id)}


def client_info(client_id: str, device_name: str, user_agent: str) -> dict:
    """The device a person's message came from (spec: ServerMessage.client_info), as its echo
    carries it to the person's other devices."""
    return {"client_id": client_id, "device_name": device_name, "user_agent": user_agent}


# What a `system_info` with action `confirm` adds: the call's effect in the person's words, its id
# and when it lapses (docs/ai-core.md, "Confirmation").
CONFIRM_FIELDS = ("effect", "confirmation_id", "expires_at")


def event_frame(event: "ChatEvent", turn_id: str) -> dict | None:
    """The frame for an AI core event other than `delta`, `error` and `done`; None for a kind
    that has none."""
    kind = event.get("type")
    if kind == "thinking":
        return {"type": "thinking", "role": "assistant", "msg_type": "thinking", "message_id": reply_id(turn_id),
                "thinking_status": event.get("status") or "thinking",
                "thinking_content": event.get("content") or ""}
    if kind == "tool_progress":
        return {"type": "tool_progress", "role": "assistant", "msg_type": "tool_progress",
                "message_id": reply_id(turn_id), "tool_progress": {
                    "tool_name": event.get("tool_name") or "", "status": event.get("status") or "running",
                    "progress": event.get("progress") or 0, "message": event.get("message") or ""}}
    if kind == "system_info":
        info = {"level": event.get("level") or "info", "message": event.get("message") or "",
                "action": event.get("action") or ""}
        for key in CONFIRM_FIELDS:  # a call that waits for the person's yes (action `confirm`)
            if isinstance(event.get(key), str):
                info[key] = event[key]  # type: ignore[literal-required]
        return {"type": "system_info", "role": "system", "msg_type": "system_info", "system_info": info}
    return None


class ChunkFrames:
    """The reply's deltas are most of a turn's frames: their constant part is encoded once."""

    __slots__ = ("head",)

    def __init__(self, session_id: str, turn_id: str, response_mode: str):
        self.head = dumps_text({"type": "stream_chunk", "role": "assistant", "msg_type": "chat",
                                "message_id": reply_id(turn_id), "session_id": session_id, "turn_id": turn_id,
                                "response_mode": response_mode})[:-1]

    def encode(self, seq: int, content: str) -> str:
        return f'{self.head},"seq":{seq},"timestamp":{now_ms()},"content":{_encode(content)}}}'


def review_frame(turn_id: str, review: list[dict]) -> dict:
    return {"type": "review", "role": "assistant", "msg_type": "chat", "message_id": reply_id(turn_id),
            "review_messages": review}


def stream_end_frame(turn_id: str, text: str, finish_reason: str, **extra: Any) -> dict:
    """The frame that ends a turn's reply, whichever way it ended."""
    return {"type": "stream_end", "role": "assistant", "msg_type": "chat", "message_id": reply_id(turn_id),
            "turn_id": turn_id, "text": text, "content": text, "finish_reason": finish_reason, **extra}


def echo_frame(session_id: str, stored: dict, text: str, attachments: list[dict], client_msg_id: str | None,
               client: dict | None = None) -> dict:
    """The user's message, as the user's other devices see it once it is stored; `client`: the
    device it came from (`client_info`), None for a message handed in without one."""
    frame = {"type": "response", "role": "user", "msg_type": "chat", "session_id": session_id,
             "message_id": str(stored["id"]), "content": text, "text": text, "attachments": attachments,
             "client_msg_id": client_msg_id, "timestamp": stored.get("created_at") or now_ms()}
    if client is not None:
        frame["client_info"] = client
    return frame


def multi_message_frame(session_id: str, stored: list[dict], msg_type: str = "chat") -> dict:
    """Several assistant messages delivered together (spec: `multi_message`), one item each, in
    order; each item names its stored message."""
    return {"type": "multi_message", "role": "assistant", "msg_type": msg_type, "session_id": session_id,
            "timestamp": max((message.get("created_at") or 0 for message in stored), default=0) or now_ms(),
            "multi_message": {"messages": [
                {"index": index, "content": message["content"], "msg_type": msg_type,
                 "message_id": str(message["id"])} for index, message in enumerate(stored)]}}


def history_changed_frame(session_id: str, from_message_id: int, reason: str) -> dict:
    """The session's stored history lost its messages from `from_message_id` on (`reason`:
    `edit` or `regenerate`): a page drops those bubbles."""
    return {"type": "history_changed", "session_id": session_id, "from_message_id": from_message_id,
            "reason": reason, "msg_type": "system_info", "timestamp": now_ms()}


def queued_frame(session_id: str, client_msg_id: str | None, turn_id: str, position: int) -> dict:
    return {"type": "queued", "session_id": session_id, "client_msg_id": client_msg_id, "turn_id": turn_id,
            "position": position, "msg_type": "system_info", "timestamp": now_ms()}


def failure_frames(session_id: str, turn_id: str, error: str, error_type: str, response_mode: str) -> list[dict]:
    """What the sender of a failed turn is told: the error, and (unless sending again cannot
    help) a notice offering to retry."""
    frames = [error_frame(error, errorType=error_type, session_id=session_id, turn_id=turn_id,
                          response_mode=response_mode, timestamp=now_ms())]
    if error_type != "duplicate_message":
        frames.append({"type": "system_info", "role": "system", "msg_type": "system_info", "session_id": session_id,
                       "turn_id": turn_id, "response_mode": response_mode, "timestamp": now_ms(),
                       "system_info": {"level": "error", "action": "retry",
                                       "message": "The assistant could not answer this message. Please try again."}})
    return frames
