"""What the chat plugin offers other plugins: the one rule of who may talk to the assistant,
handing text in as a chat turn (and waiting for its reply), who is connected to which session,
and taps on the replies as they stream."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Awaitable, Callable, Collection, Protocol

from aiohttp import web

from gateway.config import Config
from gateway.context import get_context
from gateway.contracts import ContractKey
from gateway.errors import Forbidden
from gateway.identity import ADMIN_USER_ID, Identity
from plugins.auth.contract import require_scope

if TYPE_CHECKING:
    from gateway.connection import Connection


# ---------------------------------------------------------------- who may chat

def may_chat(config: Config, user_id: str) -> bool:
    """The one rule of who may talk to the assistant (docs/chat.md, "Who may chat"): the
    administrator always, every other account only while `[auth] chat_for_all_users`
    (`CHAT_FOR_ALL_USERS`) is on. Every way a person starts a turn asks it: the chat channel,
    the AI core's doors, the turns handed in through `CHAT_TURNS` (voice, automation, the
    platform bridge), so a second door cannot widen the first. Pure: a service without the
    chat plugin (the AI core) asks it too, from the same configuration."""
    return user_id == ADMIN_USER_ID or config.settings.auth.chat_for_all_users


def chat_refused() -> Forbidden:
    """The answer of every door to a person `may_chat` refuses (403, the spec's `admin_only`)."""
    return Forbidden("Chatting with the assistant is limited to the administrator.", error_type="admin_only",
                     hint="Log in as the administrator, or have the operator set [auth] chat_for_all_users = "
                          "true (CHAT_FOR_ALL_USERS).")


async def require_chat_user(request: web.Request) -> Identity:
    """The caller of a door to the assistant, when `may_chat` lets them in (else 403); a service
    always, since it names the person it acts for and the turn it hands in asks for them. A
    personal API key needs its `chat` scope (403 `insufficient_scope`)."""
    identity = await require_scope(request, "chat")
    if not (identity.kind == "service" or identity.is_admin
            or may_chat(get_context(request).config, identity.user_id)):
        raise chat_refused()
    return identity


# ---------------------------------------------------------------- turns


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
    """Every turn handed in here asks `may_chat` for its user first and is refused with
    `chat_refused()` (Forbidden, `admin_only`) for a person who may not chat. `external=True`
    only for a sender who is no gateway account at all (the webhooks' `ext_` users), let in by
    the operator's own credential (WEBHOOK_KEY): the rule is about accounts."""

    async def submit_turn(self, user_id: str, session_id: str, text: str, mode: str = "text",
                          attachments: list[dict] | None = None,
                          exclude_connection_id: str | None = None, client_msg_id: str | None = None) -> dict:
        """Queue `text` as a turn of the session, like a `message` frame (voice hands recognised
        speech in this way). `exclude_connection_id`: the device it came from gets no echo, and
        it alone gets `queued` and errors. `client_msg_id`: de-duplicates a re-sent message as
        for a `message` frame. Returns {"status": "started" | "queued" | "duplicate", "turn_id",
        ...}. Raises Forbidden for a person who may not chat, ApiError for a bad request, and
        TooManyRequests (`rate_limited`, `queue_full`) past the user's message rate or queue
        bound ([plugins.chat], the same as for a device)."""
        ...

    def session_of(self, connection: "Connection") -> str:
        """The session a `/ws/chat` connection talks in (its `session_id` at the handshake): a
        frame handler of another plugin uses it when the frame names no session."""
        ...

    async def submit_and_wait(self, user_id: str, session_id: str, text: str, mode: str = "text", *,
                              metadata: dict | None = None, timeout: float | None = None,
                              on_piece: Callable[[str], None] | None = None, external: bool = False) -> TurnReply:
        """Run `text` as a turn of the session (queued behind a running one, under the same lock
        and de-duplication as a `message`) and wait for its end, on whichever instance runs it.
        `metadata`: stored with the user's message instead of `{"mode": mode}`. `on_piece`: called
        with each piece of the reply's text as devices get it, in order, all before this returns
        (from whichever instance or worker runs the turn; it must not block). Raises
        TurnFailed when the turn ends without a reply or `timeout` seconds pass (the turn goes
        on); Forbidden for a person who may not chat (unless `external`); ApiError for a bad
        request, TooManyRequests past the user's message rate or queue bound (as `submit_turn`)."""
        ...

    async def post_message(self, user_id: str, session_id: str, text: str, *, metadata: dict | None = None,
                           title: str | None = None) -> dict:
        """Store `text` as an assistant message of the user's session (created, titled `title`,
        when missing) and send it as a `response` frame (role `assistant`) to every device of
        the user: something the assistant says unasked (an automation rule's message). No turn
        runs. Returns the stored message."""
        ...

    async def post_messages(self, user_id: str, session_id: str, texts: list[str], *, metadata: dict | None = None,
                            title: str | None = None) -> list[dict]:
        """`post_message` for several texts said together (an automation run's consecutive
        messages): each stored in order, and all sent as one `multi_message` frame to every
        device of the user (one text: a `response`, as `post_message`). When storing one fails
        the devices are sent those stored before it, and the failure is raised. Returns the
        stored messages."""
        ...


class Presence(Protocol):
    async def known_clients(self, user_id: str | None = None) -> list[dict]: ...

    async def set_client_note(self, client_id: str, note: str) -> dict | None: ...

    async def session_state(self, session_id: str) -> dict | None:
        """The live state of a session with this id; session ids are per owner, so of the user
        whose session with it was most recently active."""
        ...

    async def live_sessions(self) -> list[dict]: ...


@dataclass(frozen=True)
class ReplyStream:
    """The reply a tap watches. `emit(frame)` sends a frame of the tap's own as the reply's next
    frame: to every device of the user, numbered (`seq`) and kept for replay like the reply's
    own frames, always after `stream_start` and before `stream_end`; `session_id`, `turn_id`,
    `seq` and `timestamp` are filled in."""
    user_id: str
    session_id: str
    turn_id: str
    mode: str
    message_id: str  # the reply's frames' message_id
    emit: Callable[[dict], Awaitable[None]]


class ReplyTap(Protocol):
    """One reply seen as it streams (see ReplyTaps). Its failures are logged and never harm the
    reply: the text still streams and is stored."""

    def feed(self, text: str) -> None:
        """The next piece of the reply's text, in order, as devices get it. Runs on the
        reply's path: it must not wait; start tasks for slow work."""
        ...

    async def finish(self, text: str) -> dict:
        """The reply is complete (`text`, all of it): finish the pending work and return fields
        to add to `stream_end` (e.g. `full_audio_url`). `stream_end` waits for this."""
        ...

    async def abort(self) -> None:
        """The reply failed or the turn stopped: drop the pending work."""
        ...


ReplyTapFactory = Callable[[ReplyStream], "ReplyTap | None"]


class ReplyTaps(Protocol):
    def add(self, modes: Collection[str], factory: ReplyTapFactory) -> None:
        """Call `factory(stream)` at the start of each reply to a turn of one of `modes`
        (`text`, `voice_msg`, `voice_assistant`); it returns a ReplyTap, or None to leave this
        reply alone. Register during setup: replies started before are not tapped."""
        ...


CHAT_TURNS: ContractKey[ChatTurns] = ContractKey("chat.turns", "hand text in as a chat turn")
PRESENCE: ContractKey[Presence] = ContractKey("chat.presence", "connected devices and live sessions")
REPLY_TAPS: ContractKey[ReplyTaps] = ContractKey("chat.reply_taps", "watch chat replies as they stream")
