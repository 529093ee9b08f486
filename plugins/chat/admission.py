"""Admission of a turn: the session's turn lock, the queue behind it, and de-duplication by
`client_msg_id`, decided on the bus when it can vouch and by the database when it cannot.

A message becomes a row of `chat_turn_queue` (PostgreSQL, shared by all instances). Whoever
wins the session's turn lock on the bus (`SET NX` with a TTL, renewed while it works; the same step
says whether the bus vouches for the message, `Admission.lock`) runs the session's turns; everyone else
queues theirs and tells the sender `queued`. The bus remembers every admitted id of a session
once `admitted_key` is set, so an idle session's new message is admitted without a database
round trip (docs/chat.md, "How a turn starts")."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plugins.sessions.contract import CONVERSATIONS, Conversations

from . import store
from .frames import now_ms, queued_frame
from .keys import (MESSAGE_ID_TTL, QUEUED_MARK_TTL, RUNNING_TURNS, SessionRef, admitted_key, lock_key, message_key,
                   queued_key, running_marks)

if TYPE_CHECKING:
    from gateway.context import Context

log = logging.getLogger("plugins.chat.admission")


@dataclass(slots=True)
class Turn:
    """One message to answer."""
    session_id: str
    user_id: str
    text: str
    mode: str = "text"
    attachments: list[dict] = field(default_factory=list)  # resolved: each with a `url` the AI core fetches
    client_msg_id: str | None = None
    sender: str | None = None  # the connection it came from: no echo there; it alone gets `queued` and errors
    metadata: dict | None = None  # stored with the user's message instead of {"mode": mode}
    client: dict | None = None  # the device it came from, as its echo's `client_info` (frames.client_info)
    turn_id: str = field(default_factory=lambda: secrets.token_hex(8))  # chosen here: frames carry it before the row exists
    recorded: bool = False  # its queue row is written (else the relay writes it beside the turn)
    # A stored user message answered again (`regenerate`): not stored twice, nor echoed; the
    # model's history is what came before it.
    reuse: dict | None = None
    session: SessionRef = field(init=False, repr=False, compare=False)  # made once: a turn reads it often

    def __post_init__(self) -> None:
        self.session = SessionRef(self.user_id, self.session_id)

    @classmethod
    def from_row(cls, row: dict) -> "Turn":
        attachments, metadata = _decoded(row["attachments"]), _decoded(row.get("metadata"))
        return cls(row["session_id"], row["user_id"], row["text"], row["mode"], attachments, row["client_msg_id"],
                   row["sender_connection"], metadata, _decoded(row.get("client_info")), turn_id=row["turn_id"],
                   recorded=True)

    def columns(self) -> dict:
        """What `store.enqueue` writes."""
        return {"turn_id": self.turn_id, "session_id": self.session_id, "user_id": self.user_id, "text": self.text,
                "mode": self.mode, "attachments": self.attachments, "client_msg_id": self.client_msg_id,
                "sender_connection": self.sender, "metadata": self.metadata, "client_info": self.client}


def _decoded(value: Any) -> Any:
    """A JSON column's value, which may come still encoded."""
    return json.loads(value) if isinstance(value, str) else value


class Admission:
    def __init__(self, context: "Context", lock_ttl: float):
        self.context = context
        self.lock_ttl = lock_ttl

    @property
    def owner(self) -> str:
        return self.context.hub.instance_id

    @property
    def conversations(self) -> Conversations:
        return self.context.contracts.require(CONVERSATIONS)

    # ------------------------------------------------------------------ the lock

    async def lock(self, session: SessionRef, turn: Turn | None = None) -> tuple[bool, bool | None]:
        """The session's turn lock for this instance (False while any instance holds it) and,
        with the `turn` to run, in the same step whether the bus admits it (`admit`'s `on_bus`):
        True, the message is new (its id is now taken) and no older turn waits; False, a
        re-send; None, the bus cannot tell — it does not hold this session's message ids (a
        restarted in-process bus, an expired mark), or turns may be waiting in the queue."""
        # The session is marked running (for the sweeper, until `release_unless_queued`) and live
        # with the lock; the holder renews both while it works (TurnMachine._renew).
        marks = running_marks(session.key)
        if turn is None:
            return await self.context.bus.acquire(lock_key(session.key), self.owner, self.lock_ttl,
                                                  marks=marks)
        client_msg_id = turn.client_msg_id
        # The value says when: a re-send may take the id over only from a turn long dead
        # (_reclaim_message_id).
        claim = None if client_msg_id is None else (message_key(session.key, client_msg_id), str(now_ms()),
                                                     MESSAGE_ID_TTL)
        return await self.context.bus.acquire(lock_key(session.key), self.owner, self.lock_ttl, marks=marks,
                                              present=[admitted_key(session.key)],
                                              absent=[queued_key(session.key)], then=claim)

    async def renew(self, session: SessionRef) -> bool:
        return await self.context.bus.renew_if(lock_key(session.key), self.owner, self.lock_ttl)

    async def release(self, session: SessionRef, *, turns_ended: bool = False) -> None:
        """Let the lock go; `turns_ended`: every turn ended, so the running mark goes first
        (nothing for the sweeper to end), a failure to end it logged."""
        if turns_ended:
            try:
                await self.context.bus.unmark(RUNNING_TURNS, session.key)
            except Exception:
                log.exception("unmarking the turns of session %s failed", session.session_id)
        await self.context.bus.delete_if(lock_key(session.key), self.owner)

    async def release_unless_queued(self, session: SessionRef) -> bool:
        """Let the lock go and end the session's running mark (nothing for the sweeper to end),
        unless a message was queued since the last look: then take that mark away and keep the
        lock (False: the caller drains the queue). One step, so a submitter that marks its
        queued row and then tries the lock either is seen here or finds the lock free."""
        bus = self.context.bus
        return await bus.release_unless(lock_key(session.key), self.owner, queued_key(session.key),
                                        unmark=(RUNNING_TURNS, session.key))

    # ------------------------------------------------------------------ admitting

    async def admit(self, turn: Turn, on_bus: bool | None) -> str:
        """With the session's lock held (`lock`, which says `on_bus`): "started" (the turn
        runs now; `turn.recorded` says whether its row was written), "queued" (older turns
        wait: its row is queued behind them) or "duplicate"."""
        session, client_msg_id = turn.session, turn.client_msg_id
        admitted = on_bus
        if admitted is False and await self._reclaim_message_id(session, client_msg_id):
            admitted = True
        if admitted:
            # The fast way: the bus vouches that the message is new, so the AI core is called
            # at once; the queue row is written beside the turn (see relay.py).
            return "started"
        if admitted is False:
            return "duplicate"
        # The bus cannot vouch: the database decides.
        row = await store.enqueue(self.context.db, **turn.columns(), start=True)
        if row is None and await self._reclaim_message_id(session, client_msg_id):
            row = await store.enqueue(self.context.db, **turn.columns(), start=True)
        if row is None:
            return "duplicate"
        await self._admitted(session, client_msg_id)
        turn.recorded = True
        return "started" if row["status"] == "running" else "queued"

    async def queue(self, turn: Turn) -> bool:
        """The session is busy (here or on another instance): queue the turn behind it. False
        for a duplicate."""
        session = turn.session
        # The running turn may not have written its row yet: the bus knows its id.
        vouched = bool(await self.context.bus.get(admitted_key(session.key)))
        if vouched and not await self._take_message_id(session, turn.client_msg_id) \
                and not await self._taken_by_dead_turn(session, turn.client_msg_id):
            return False
        # A new id, or one a dead turn took without storing its message: the queue decides (a row
        # the dead turn wrote keeps the id until the next holder releases it).
        if await store.enqueue(self.context.db, **turn.columns()) is None:
            return False
        turn.recorded = True
        # Set after the row is committed: whoever sees the mark finds the row.
        await self.context.bus.set(queued_key(session.key), "1", ttl=QUEUED_MARK_TTL)
        await self._admitted(session, turn.client_msg_id)
        return True

    async def tell_queued(self, turn: Turn) -> dict:
        position = await store.queue_length(self.context.db, turn.user_id, turn.session_id)
        if turn.sender is not None:
            await self.context.hub.send_to_user(
                turn.user_id, queued_frame(turn.session_id, turn.client_msg_id, turn.turn_id, position),
                only=turn.sender)
        return {"status": "queued", "turn_id": turn.turn_id, "session_id": turn.session_id, "position": position}

    async def forget_message_id(self, turn: Turn) -> None:
        """Nothing of the turn was stored: let a re-send of its message through."""
        if turn.client_msg_id is not None:
            with contextlib.suppress(Exception):
                await self.context.bus.delete(message_key(turn.session.key, turn.client_msg_id))

    # ------------------------------------------------------------------ message ids

    async def _reclaim_message_id(self, session: SessionRef, client_msg_id: str | None) -> bool:
        """A re-sent id is a duplicate while its message is stored or its turn may still run.
        Taken longer than a lock's lifetime ago, by a turn whose row is not waiting and whose
        message is not stored, it belongs to a turn that died before storing the message (its
        instance was killed between admitting the message and writing it); the caller holds the
        session's lock, so no turn of the session runs, and the id is given to this message.
        Younger ids are left alone: another instance may be between taking one and writing its row."""
        if client_msg_id is None or not await self._taken_by_dead_turn(session, client_msg_id):
            return False
        if not await store.release_message_id(self.context.db, session.user_id, session.session_id, client_msg_id,
                                              self.lock_ttl):
            return False
        await self.context.bus.set(message_key(session.key, client_msg_id), "1", ttl=MESSAGE_ID_TTL)
        log.warning("message %s of session %s was taken by a turn that never stored it; it runs now",
                    client_msg_id, session.session_id)
        return True

    async def _taken_by_dead_turn(self, session: SessionRef, client_msg_id: str | None) -> bool:
        """Whether a taken id may belong to a turn that died before storing its message: it was
        not taken in the last lock lifetime (a live turn may be about to write it) and no
        message with it is stored. The queue's rows have the last word (see callers)."""
        if client_msg_id is None:
            return False
        taken = await self.context.bus.get(message_key(session.key, client_msg_id)) or ""
        if taken.isdigit() and len(taken) > 1 and now_ms() - int(taken) < self.lock_ttl * 1000:
            return False
        return not await self.conversations.has_client_message(session.user_id, session.session_id, client_msg_id)

    async def _take_message_id(self, session: SessionRef, client_msg_id: str | None) -> bool:
        if client_msg_id is None:
            return True
        # The value says when: a re-send may take the id over only from a turn long dead (_reclaim_message_id).
        return await self.context.bus.set(message_key(session.key, client_msg_id), str(now_ms()), ttl=MESSAGE_ID_TTL,
                                          only_if_absent=True)

    async def _admitted(self, session: SessionRef, client_msg_id: str | None) -> None:
        """A message went into the database queue: record its id on the bus and, the first
        time, every id the queue still remembers for the session, so that the mark saying the
        bus holds them all is true."""
        bus = self.context.bus
        # Submitted together, each group is one round trip on a shared bus (in order).
        recorded = [] if client_msg_id is None else [bus.set(message_key(session.key, client_msg_id), "1",
                                                             ttl=MESSAGE_ID_TTL)]
        if (await asyncio.gather(*recorded, bus.get(admitted_key(session.key))))[-1]:
            return
        known = await store.message_ids(self.context.db, session.user_id, session.session_id)
        await asyncio.gather(*(bus.set(message_key(session.key, known_id), "1", ttl=MESSAGE_ID_TTL)
                               for known_id in known))
        await bus.set(admitted_key(session.key), "1", ttl=MESSAGE_ID_TTL)  # only once they all are
