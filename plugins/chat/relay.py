"""The relay of chat turns: each turn's history read, then its reply relayed (turn_relay.py); a
stop request finds the turn this instance runs; a turn whose instance died mid-reply is ended for
the devices."""
from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from gateway.text import dumps_text
from plugins.ai_core.contract import AiCore
from plugins.sessions.contract import CONVERSATIONS, Conversations

from . import store
from .admission import Admission, Turn
from .contract import ReplyTap, TurnFailed, TurnReply
from .frames import error_frame, now_ms, stream_end_frame, turn_error_text
from .keys import SessionRef
from .outcomes import storage_error_type
from .replay import Replay, Snapshot
from .taps import ReplyTapRegistry
from .relay_state import TurnControl
from .turn_relay import TurnRelay

if TYPE_CHECKING:
    from gateway.context import Context

log = logging.getLogger("plugins.chat.relay")


class Relay:
    def __init__(self, context: "Context", *, admission: Admission, replay: Replay, ai: AiCore,
                 history_limit: int, store_after: float, max_reply_chars: int,
                 taps: ReplyTapRegistry | None = None):
        self.context, self.hub = context, context.hub
        self.taps = taps or ReplyTapRegistry()
        self.admission, self.replay, self.ai = admission, replay, ai
        self.history_limit, self.store_after = history_limit, store_after
        self.max_reply_chars = max_reply_chars
        self.records = store.TurnRecords(context)
        self.live: dict[str, TurnControl] = {}  # turn id → the turns this instance runs now
        # Turns of this instance waiting for the AI core's first event: while any waits, a turn
        # that got its own leaves its writes to the `store_after` timer (see TurnRelay).
        self.awaiting_first_event = 0

    @property
    def conversations(self) -> Conversations:
        return self.context.contracts.require(CONVERSATIONS)

    def request_stop(self, user_id: str, session_id: str, turn_id: str | None) -> bool:
        """Stop the user's turn `turn_id` (any turn of the session when None) if this instance
        runs it: it ends as a reply cut at its limit does, with `finish_reason` `stopped`.
        False when it does not run here (or is another user's, or already ended)."""
        if turn_id is not None:
            control = self.live.get(turn_id)
            found = [control] if control is not None else []
        else:
            found = list(self.live.values())
        stopped = False
        for control in found:
            if control.user_id == user_id and control.session_id == session_id:
                control.stop()
                stopped = True
        return stopped

    async def run(self, turn: Turn, watcher: ReplyTap | None = None) -> tuple[str, TurnReply | TurnFailed]:
        """One turn; its final status ("done", "failed", "duplicate") and its reply or failure.
        `watcher`: a tap of the turn's own (its waiter's, see waiters.py) beside the plugins'.
        The AI core is called first; the turn's row (when the submitter did not write it yet)
        and the user's message are stored while it thinks. The sender sees the reply's frames
        as they come; the user's other devices see the echo of the message first (it carries the
        stored id), then the same frames (see EchoGate)."""
        try:
            history = await self._history(turn)
        except Exception as error:  # nothing sent or stored yet: tell the sender, allow a re-send
            log.error("reading the history of session %s failed: %r", turn.session_id, error)
            return "failed", await self._history_failed(turn, error)
        return await TurnRelay(self, turn, history, watcher).run()

    async def _history(self, turn: Turn) -> list[dict]:
        """The messages the AI core reads before the turn's own."""
        if turn.reuse is None:
            return await self.conversations.recent_history(turn.user_id, turn.session_id, self.history_limit)
        # The stored message is answered again: the history before it.
        history = await self.conversations.recent_history(turn.user_id, turn.session_id,
                                                          self.history_limit + 1)
        if history and history[-1]["role"] == "user":
            history = history[:-1]
        return history[-self.history_limit:]

    async def _history_failed(self, turn: Turn, error: Exception) -> TurnFailed:
        await self.admission.forget_message_id(turn)
        error_type = storage_error_type(error)
        failure = TurnFailed(turn_error_text(error_type), error_type)
        if turn.sender is not None:
            await self.hub.send_to_user(turn.user_id, error_frame(
                failure.error, errorType=failure.error_type, session_id=turn.session_id, turn_id=turn.turn_id,
                response_mode=turn.mode, client_msg_id=turn.client_msg_id), only=turn.sender)
        return failure

    async def end_dead_turn(self, session: SessionRef, dead: Snapshot, latest: bool = False) -> None:
        """The previous turn's reply stopped mid-stream (its instance died): every device gets
        its stream_end, with what arrived of the text, before the next turn's stream_start.
        `latest`: no turn began since, so the replay keeps the dead turn and takes the frame too."""
        frames = [json.loads(payload) for _, payload in dead.frames]
        if frames[-1].get("type") == "stream_end":  # it had ended; its instance stopped before recording that
            return
        text = "".join(str(frame.get("content") or "") for frame in frames if frame.get("type") == "stream_chunk")
        seq = max(seq for seq, _ in dead.frames) + 1
        user_id, session_id = session.user_id, session.session_id
        log.warning("turn %s of session %s never ended (its instance stopped); ending it", dead.turn_id, session_id)
        # The dead turn's mode, as its frames carried it.
        mode = str(frames[0].get("response_mode") or "text")
        payload = dumps_text(stream_end_frame(dead.turn_id, text, "error", session_id=session_id, seq=seq,
                                              response_mode=mode, timestamp=now_ms()))
        if latest:
            await self.replay.append(session.key, dead.turn_id, seq, payload)
        await self.hub.send_to_user(user_id, payload, run_id=dead.turn_id, seq=seq)
