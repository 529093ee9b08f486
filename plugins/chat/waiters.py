"""Plugins waiting for the end of a turn they handed in without a device (a webhook's)."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .contract import TurnFailed, TurnReply
from .keys import TURN_ENDED

if TYPE_CHECKING:
    from gateway.bus import Bus, Subscription


class TurnWaiters:
    """Plugins waiting for the end of a turn they handed in without a device (a webhook's).
    The turn may run on another instance (it queued behind a turn there): with a shared bus,
    the end of such a turn that nobody here waits for is published for the others."""

    def __init__(self, bus: "Bus"):
        self.bus = bus
        self._waiting: dict[str, asyncio.Future] = {}
        self._subscription: Subscription | None = None

    async def start(self) -> None:
        if self.bus.shared:
            self._subscription = await self.bus.subscribe(TURN_ENDED, self._on_remote)

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None

    def expect(self, turn_id: str) -> asyncio.Future:
        future = self._waiting[turn_id] = asyncio.get_running_loop().create_future()
        return future

    def forget(self, turn_id: str) -> None:
        self._waiting.pop(turn_id, None)

    async def settle(self, turn_id: str, outcome: TurnReply | TurnFailed) -> None:
        if not self._resolve(turn_id, outcome) and self.bus.shared:
            ended = ({"reply": {"text": outcome.text, "model": outcome.model, "finish_reason": outcome.finish_reason,
                                "message_ids": outcome.message_ids}} if isinstance(outcome, TurnReply)
                     else {"failure": {"error": outcome.error, "error_type": outcome.error_type}})
            await self.bus.publish(TURN_ENDED, {"turn_id": turn_id, **ended})

    async def _on_remote(self, message: dict) -> None:
        if "reply" in message:
            self._resolve(message["turn_id"], TurnReply(**message["reply"]))
        else:
            self._resolve(message["turn_id"], TurnFailed(**message["failure"]))

    def _resolve(self, turn_id: str, outcome: TurnReply | TurnFailed) -> bool:
        """Whether someone here waited for the turn."""
        future = self._waiting.pop(turn_id, None)
        if future is None:
            return False
        if not future.done():
            if isinstance(outcome, TurnFailed):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        return True
