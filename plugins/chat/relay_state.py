"""What a turn's relay (turn_relay.py) shares with the instance's `Relay` (relay.py): the
turn's control a stop request finds, and the parts of the `Relay` a turn uses."""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from plugins.ai_core.contract import AiCore, StreamStop
from plugins.sessions.contract import Conversations

from . import store
from .admission import Admission
from .keys import SessionRef
from .replay import Replay, Snapshot
from .taps import ReplyTapRegistry

if TYPE_CHECKING:
    from gateway.context import Context
    from gateway.hub import WebSocketHub


class TurnControl:
    """A turn this instance is running, as a stop request finds it (`Relay.request_stop`).
    A stop ends the AI core's stream (`StreamStop`): a read waiting for the next event returns
    at once and the stream simply ends. The relay also reads `stopped` before each read, so a
    stop while it sends an event ends the reply there. Nothing is cancelled: the turn ends in
    its own task, wherever that task is."""

    __slots__ = ("user_id", "session_id", "stream", "stopped")

    def __init__(self, user_id: str, session_id: str, stream: StreamStop):
        self.user_id, self.session_id, self.stream = user_id, session_id, stream
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        self.stream.request()


class RelayState(Protocol):
    """What a turn's relay uses of the instance's `Relay` (relay.py): its parts, its limits, and
    what its turns share (the live turns, how many wait for their first event)."""

    context: "Context"
    hub: "WebSocketHub"
    taps: ReplyTapRegistry
    admission: Admission
    replay: Replay
    ai: AiCore
    store_after: float
    max_reply_chars: int
    records: store.TurnRecords
    live: dict[str, TurnControl]
    awaiting_first_event: int

    @property
    def conversations(self) -> Conversations: ...

    async def end_dead_turn(self, session: SessionRef, dead: Snapshot, latest: bool = False) -> None: ...
