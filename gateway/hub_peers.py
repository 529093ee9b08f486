"""Which other instances hold a user's devices, as this instance knows it without asking the bus
per frame (gateway/hub.py sends a frame for a user held nowhere else without touching the bus).

An instance that becomes a holder of a user tells the others in the same step as it marks
itself (`Bus.hold_and_tell`), and learns who they are; one that stops holding tells them too.
Each told holder sends its frames for that user through the bus from then on, and answers the
joiner (an ack) once it switched: the ack goes out after every frame it appended to a replay
without waiting (the bus keeps an instance's commands in order), so a joiner that waits for the
acks before reading a replay finds every frame it was not sent. A holder that does not answer
(it died; its mark outlives it for up to its ttl) is waited for `ACK_BOUND` seconds at most."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid

log = logging.getLogger("gateway.hub")

# How long a joining instance waits for the other holders' acks.
ACK_BOUND = 2.0
# Among a user's other holders: some may be unseen (the bus came back empty after an outage and
# they marked themselves again without telling this one). The bus is used for that user until
# its devices here are all gone.
UNKNOWN = "?"


class Join:
    """This instance becoming a holder of a user: the holders told, the acks come back."""

    __slots__ = ("id", "user_id", "told", "acked", "changed")

    def __init__(self, user_id: str) -> None:
        self.id, self.user_id = uuid.uuid4().hex, user_id
        self.told: set[str] = set()
        self.acked: set[str] = set()
        self.changed = asyncio.Event()

    @property
    def settled(self) -> bool:
        return self.told <= self.acked


class Peers:
    """See the module docstring. The hub calls it; it touches no bus itself."""

    def __init__(self) -> None:
        self._others: dict[str, set[str]] = {}  # user → the other holders known
        self._joins: dict[str, Join] = {}  # join id → a join waiting for acks
        self._joining: dict[str, Join] = {}  # user → the latest join of that user not settled

    def alone(self, user_id: str) -> bool:
        """No other holder of `user_id` is known (the hub also checks that this one holds it)."""
        return not self._others.get(user_id)

    def begin(self, user_id: str) -> Join:
        """Before the mark that tells the others: an ack or a notice may come before its answer."""
        join = self._joining[user_id] = Join(user_id)
        self._joins[join.id] = join
        return join

    def told(self, join: Join, holders: set[str]) -> None:
        """The mark was made and told `holders`: a union, since a notice may have come first."""
        join.told = holders
        self._others.setdefault(join.user_id, set()).update(holders)

    def joining(self, user_id: str) -> Join | None:
        """The user's join still waiting for acks: a second device waits for it too."""
        return self._joining.get(user_id)

    async def settle(self, join: Join) -> None:
        """Return once every holder told acked, or after `ACK_BOUND` seconds."""
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                async with asyncio.timeout(ACK_BOUND):
                    while not join.settled:
                        join.changed.clear()
                        await join.changed.wait()
            if not join.settled:
                log.warning("holders %s of user %s did not answer within %s s (gone?)",
                            sorted(join.told - join.acked), join.user_id, ACK_BOUND)
        finally:
            self.drop(join)

    def drop(self, join: Join) -> None:
        self._joins.pop(join.id, None)
        if self._joining.get(join.user_id) is join:
            del self._joining[join.user_id]

    def forget(self, user_id: str) -> None:
        """This instance stopped holding the user: what it knew of the others is stale."""
        self._others.pop(user_id, None)

    def unknown(self, user_id: str) -> None:
        self._others.setdefault(user_id, set()).add(UNKNOWN)

    # -- notices from the other instances (hub._on_remote)
    def joined(self, user_id: str, holder: str, holding: bool) -> None:
        """`holder` became a holder of the user. Kept while this one holds the user or is about
        to (its own mark may have been made just before and its answer not read yet)."""
        if holding or user_id in self._joining:
            self._others.setdefault(user_id, set()).add(holder)

    def left(self, user_id: str, holder: str) -> None:
        others = self._others.get(user_id)
        if others is not None:
            others.discard(holder)

    def acked(self, join_id: str, holder: str) -> None:
        join = self._joins.get(join_id)
        if join is not None:
            join.acked.add(holder)
            join.changed.set()
