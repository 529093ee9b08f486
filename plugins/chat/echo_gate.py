"""The delivery of one turn's frames (`EchoGate`): the user's other devices see the echo of the
user's message before the reply."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .outcomes import best_effort

if TYPE_CHECKING:
    from gateway.hub import WebSocketHub


class EchoGate:
    """Delivery of one turn's frames. The sender gets each frame at once. The user's other
    devices must see the echo of the user's message before the reply, and the echo waits for
    the message to be stored: their frames are held until `open`, then sent in order."""

    def __init__(self, hub: "WebSocketHub", user_id: str, sender: str | None, turn_id: str):
        self.hub, self.user_id, self.sender, self.turn_id = hub, user_id, sender, turn_id
        self._held: list[tuple[str, int]] | None = []
        self.opened = False  # every frame from now on goes to every device (read per frame)

    async def _sender_alone(self) -> bool:
        """Whether nobody but the sender could receive the echo and the held frames: no other
        device of the user is connected here, nor on another instance (a device that connects
        after this is replayed the frames, as one that connects after the echo)."""
        if self.sender is None or any(connection.id != self.sender
                                      for connection in self.hub.connections(self.user_id)):
            return False
        return not await self.hub.held_elsewhere(self.user_id)

    async def send(self, payload: str, seq: int) -> None:
        if self._held is None:
            await self.hub.send_to_user(self.user_id, payload, run_id=self.turn_id, seq=seq)
            return
        self._held.append((payload, seq))
        if self.sender is not None:
            await self.hub.send_to_user(self.user_id, payload, only=self.sender, run_id=self.turn_id, seq=seq)

    async def open(self, echo: dict | None) -> None:
        """Send `echo` (if any) to every device but the sender, then what was held; idempotent.
        A frame other instances could not be sent (the bus is down) does not hold back the
        rest from this instance's devices; the failure is raised once all went."""
        if self._held is None:
            return
        if await self._sender_alone():  # the usual device on its own: nothing to send twice
            self._held, self.opened = None, True
            return
        failure = None
        if echo is not None:
            failure = await best_effort(self.hub.send_to_user(self.user_id, echo, exclude=self.sender), "the echo")
        while self._held:  # frames sent meanwhile join the end of the list
            payload, seq = self._held.pop(0)
            failure = await best_effort(self.hub.send_to_user(
                self.user_id, payload, exclude=self.sender, run_id=self.turn_id, seq=seq), "a held frame") or failure
        self._held, self.opened = None, True
        if failure is not None:
            raise failure
