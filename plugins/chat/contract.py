"""What the chat plugin offers other plugins: handing text in as a chat turn (and waiting for
its reply), and who is connected to which session."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gateway.contracts import ContractKey


@dataclass(frozen=True)
class TurnReply:
    """A turn that ended with a reply, as stored."""
    text: str
    model: str = ""
    finish_reason: str = "stop"
    message_ids: list[int] = field(default_factory=list)  # the stored reply's messages, in order


class TurnFailed(Exception):
    """A turn that ended without a reply: `error_type` as devices see it in the `error` frame
    (`ai_core_unreachable`, `ai_core_failed`, `storage_failed`, `timeout`, ...)."""

    def __init__(self, error: str, error_type: str = "ai_core_failed"):
        super().__init__(error)
        self.error, self.error_type = error, error_type


class ChatTurns(Protocol):
    async def submit_turn(self, user_id: str, session_id: str, text: str, mode: str = "text",
                          attachments: list[dict] | None = None,
                          exclude_connection_id: str | None = None) -> dict:
        """Queue `text` as a turn of the session, like a `message` frame (voice hands recognised
        speech in this way). `exclude_connection_id`: the device it came from gets no echo.
        Raises ApiError for a bad request, and TooManyRequests (`rate_limited`, `queue_full`) past
        the user's message rate or queue bound ([plugins.chat], the same as for a device)."""
        ...

    async def submit_and_wait(self, user_id: str, session_id: str, text: str, mode: str = "text", *,
                              metadata: dict | None = None, timeout: float | None = None) -> TurnReply:
        """Run `text` as a turn of the session (queued behind a running one, under the same lock
        and de-duplication as a `message`) and wait for its end, on whichever instance runs it.
        `metadata`: stored with the user's message instead of `{"mode": mode}`. Raises
        TurnFailed when the turn ends without a reply or `timeout` seconds pass (the turn goes
        on); ApiError for a bad request, TooManyRequests past the user's message rate or queue
        bound (as `submit_turn`)."""
        ...

    async def post_message(self, user_id: str, session_id: str, text: str, *, metadata: dict | None = None,
                           title: str | None = None) -> dict:
        """Store `text` as an assistant message of the user's session (created, titled `title`,
        when missing) and send it as a `response` frame (role `assistant`) to every device of
        the user: something the assistant says unasked (an automation rule's message). No turn
        runs. Returns the stored message."""
        ...


class Presence(Protocol):
    async def known_clients(self, user_id: str | None = None) -> list[dict]: ...

    async def set_client_note(self, client_id: str, note: str) -> dict | None: ...

    async def session_state(self, session_id: str) -> dict | None:
        """The live state of a session with this id; session ids are per owner, so of the user
        whose session with it was most recently active."""
        ...

    async def live_sessions(self) -> list[dict]: ...


CHAT_TURNS: ContractKey[ChatTurns] = ContractKey("chat.turns", "hand text in as a chat turn")
PRESENCE: ContractKey[Presence] = ContractKey("chat.presence", "connected devices and live sessions")
