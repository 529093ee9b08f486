"""Plugins waiting for a turn they handed in without a device (a webhook's, the bridge's): its
reply's pieces as they stream, and its end."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable

from .contract import TurnFailed, TurnReply
from .keys import WAITED_TURNS

if TYPE_CHECKING:
    from gateway.bus import Bus, Subscription

log = logging.getLogger("plugins.chat.waiters")

PieceListener = Callable[[str], None]


class TurnWaiters:
    """Plugins waiting for a turn they handed in without a device. The turn may run on another
    instance (it queued behind a turn there): with a shared bus, such a turn that nobody here
    waits for publishes its pieces and its end on one channel, in order, for the others."""

    def __init__(self, bus: "Bus"):
        self.bus = bus
        self._waiting: dict[str, asyncio.Future] = {}
        self._listeners: dict[str, PieceListener] = {}
        self._subscription: Subscription | None = None

    async def start(self) -> None:
        if self.bus.shared:
            self._subscription = await self.bus.subscribe(WAITED_TURNS, self._on_remote)

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None

    def expect(self, turn_id: str, on_piece: PieceListener | None = None) -> asyncio.Future:
        if on_piece is not None:
            self._listeners[turn_id] = on_piece
        future = self._waiting[turn_id] = asyncio.get_running_loop().create_future()
        return future

    def forget(self, turn_id: str) -> None:
        self._waiting.pop(turn_id, None)
        self._listeners.pop(turn_id, None)

    def watch(self, turn_id: str) -> "LocalPieces | RemotePieces | None":
        """The tap that hands a turn's pieces to its waiter (the turn was handed in without a
        device), or None when nobody can be waiting for them."""
        listener = self._listeners.get(turn_id)
        if listener is not None:
            return LocalPieces(listener)
        if turn_id in self._waiting or not self.bus.shared:  # waited here, without pieces
            return None
        return RemotePieces(self.bus, turn_id)

    async def settle(self, turn_id: str, outcome: TurnReply | TurnFailed) -> None:
        if not self._resolve(turn_id, outcome) and self.bus.shared:
            ended = ({"reply": {"text": outcome.text, "model": outcome.model, "finish_reason": outcome.finish_reason,
                                "message_ids": outcome.message_ids}} if isinstance(outcome, TurnReply)
                     else {"failure": {"error": outcome.error, "error_type": outcome.error_type}})
            await self.bus.publish(WAITED_TURNS, {"turn_id": turn_id, **ended})

    async def _on_remote(self, message: dict) -> None:
        turn_id = message["turn_id"]
        if "piece" in message:
            listener = self._listeners.get(turn_id)
            if listener is not None:
                listener(message["piece"])
        elif "reply" in message:
            self._resolve(turn_id, TurnReply(**message["reply"]))
        else:
            self._resolve(turn_id, TurnFailed(**message["failure"]))

    def _resolve(self, turn_id: str, outcome: TurnReply | TurnFailed) -> bool:
        """Whether someone here waited for the turn."""
        self._listeners.pop(turn_id, None)
        future = self._waiting.pop(turn_id, None)
        if future is None:
            return False
        if not future.done():
            if isinstance(outcome, TurnFailed):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        return True


class LocalPieces:
    """A reply tap (contract.py ReplyTap) handing each piece to a waiter of this instance."""

    def __init__(self, listener: PieceListener):
        self.feed = listener

    async def finish(self, text: str) -> dict:
        return {}

    async def abort(self) -> None:
        return None


class RemotePieces:
    """A reply tap (contract.py ReplyTap) publishing a turn's pieces for a waiter on another
    instance, in order: one publish in flight at a time, the pieces that arrive meanwhile joined
    into the next. `finish` returns once all went, so the turn's end, settled after it, comes
    last on the channel."""

    def __init__(self, bus: "Bus", turn_id: str):
        self.bus, self.turn_id = bus, turn_id
        self._pending: list[str] = []
        self._sender: asyncio.Task | None = None

    def feed(self, text: str) -> None:
        self._pending.append(text)
        if self._sender is None:
            self._sender = asyncio.create_task(self._send(), name=f"chat-pieces-{self.turn_id}")

    async def _send(self) -> None:
        try:
            while self._pending:
                piece, self._pending = "".join(self._pending), []
                await self.bus.publish(WAITED_TURNS, {"turn_id": self.turn_id, "piece": piece})
        except Exception as error:  # the waiter still gets the whole reply with the turn's end
            log.warning("publishing the pieces of turn %s failed: %r", self.turn_id, error)
            self._pending.clear()
        finally:
            self._sender = None

    async def finish(self, text: str) -> dict:
        if self._sender is not None:
            await asyncio.wait([self._sender])
        return {}

    async def abort(self) -> None:
        await self.finish("")
