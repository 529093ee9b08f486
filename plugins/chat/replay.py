"""The replay buffer: the frames of each session's latest turn, so that a device that connects
during a reply (or reconnects after missing part of it) catches up.

Every frame of a running turn that goes to all devices is appended before it is sent, so a
frame a device sees live is always in the buffer too. The buffer is a bus stream per session
(`chat:replay:<session key>`, keys.session_key: a Redis Stream shared by all instances with `REDIS_URL`, a list in
this process otherwise); its first entry names the turn, an `end` entry marks the turn's end."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Awaitable

from .keys import RUNNING_REPLAY_TTL, replay_key

if TYPE_CHECKING:
    from gateway.bus import Bus, Entry, Record
    from gateway.connection import Connection

log = logging.getLogger("plugins.chat.replay")

ENDED = ("kind", "end")


@dataclass
class Snapshot:
    turn_id: str
    running: bool
    frames: list[tuple[int, str]] = field(default_factory=list)


class Replay:
    """Frames of each session's latest turn, kept `ttl` seconds after the turn ends."""

    def __init__(self, bus: "Bus", ttl: float = 120.0, max_frames: int = 20000):
        self.bus = bus
        self.ttl = ttl
        self.max_frames = max_frames

    async def begin(self, session: str, turn_id: str) -> Snapshot | None:
        """A new turn: forget the previous one's frames. Returns them when that turn never
        finished (its instance died mid-reply: turns of a session never overlap)."""
        entries = await self.bus.stream_restart(replay_key(session), {"turn": turn_id, "kind": "begin"},
                                                RUNNING_REPLAY_TTL, finished=ENDED)
        return _snapshot(entries)

    def append(self, session: str, turn_id: str, seq: int, payload: str) -> Awaitable[None]:
        """One frame of the running turn. (The bus's coroutine itself, not one wrapping it: this
        runs for every frame.)"""
        key, entry, max_len = self.record(session, turn_id, seq, payload)
        return self.bus.stream_append(key, entry, max_len=max_len)

    def record(self, session: str, turn_id: str, seq: int, payload: str) -> "Record":
        """The entry `append` adds, for the hub to append as it sends the frame (`send_to_user`'s
        `record`: one step on a shared bus)."""
        return replay_key(session), {"turn": turn_id, "kind": "frame", "seq": str(seq), "payload": payload}, \
            self.max_frames

    async def appended(self, session: str) -> None:
        """Return once the frames the hub appended without waiting are in; raise if one is not
        (the bus went away: the reply fails, as it would have at the frame)."""
        await self.bus.stream_appended(replay_key(session))

    async def finish(self, session: str, turn_id: str) -> None:
        """The turn ended; its frames expire `ttl` seconds from now."""
        await self.bus.stream_append(replay_key(session), {"turn": turn_id, "kind": "end"}, ttl=self.ttl)

    async def read(self, session: str) -> Snapshot | None:
        """The latest turn's frames, None when nothing is kept."""
        return _snapshot(await self.bus.stream_read(replay_key(session)))

    async def replay_into(self, connection: "Connection", session: str, after: tuple[str, int] | None) -> int:
        """Send `connection` (registered holding its deliveries) what it missed of the session's
        current turn, then release what arrived live meanwhile. Returns how many frames were replayed."""
        sent, replayed = 0, {}
        try:
            try:
                snapshot = await self.read(session)
            except Exception:
                log.exception("reading the replay buffer of %s failed", session)
                snapshot = None
            # A finished turn is replayed only to a device that saw part of it.
            if snapshot is not None and (snapshot.running or (after is not None and after[0] == snapshot.turn_id)):
                after_seq = after[1] if after and after[0] == snapshot.turn_id else -1
                last = after_seq
                for seq, payload in snapshot.frames:
                    if seq > after_seq:
                        connection.send(payload)
                        sent += 1
                    last = max(last, seq)
                replayed[snapshot.turn_id] = last
        finally:
            connection.release(replayed)
        return sent


def _snapshot(entries: "list[Entry]") -> Snapshot | None:
    """The latest turn in a replay stream's entries."""
    snapshot: Snapshot | None = None
    for fields in entries:
        turn_id = fields.get("turn", "")
        if snapshot is None or snapshot.turn_id != turn_id:
            snapshot = Snapshot(turn_id, True)
        if fields.get("kind") == "frame":
            snapshot.frames.append((int(fields["seq"]), fields["payload"]))
        elif fields.get("kind") == "end":
            snapshot.running = False
    return snapshot
