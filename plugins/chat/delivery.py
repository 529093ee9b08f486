"""Delivery of chat frames to a user's devices on every instance, and the replay buffer that
lets a device that reconnects during a reply catch up.

The chat plugin delivers its own frames (rather than through `hub.send_to_user`) because a
resuming connection must hold live frames while its replay is read, then drop the ones the
replay already covered: only the deliverer can do that. Frames of a turn carry `turn_id` and
`seq` (per turn, from 0); the envelope carries them too, so filtering never parses JSON.

Replay: every frame of a running turn that goes to all devices is appended to the session's
buffer before it is published, so a frame a device sees live is always in the buffer too.
With Redis the buffer is a Redis Stream per session (`<prefix>chat:replay:<session_id>`),
shared by all instances; otherwise a list in this process."""
from __future__ import annotations

import abc
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.context import Context
    from gateway.hub import Connection

log = logging.getLogger("plugins.chat.delivery")

CHANNEL = "chat.deliver"
HELD = "chat_held"          # connection.data: frames held while a replay is read
REPLAYED = "chat_replayed"  # connection.data: {turn_id: last seq the replay sent}


class Delivery:
    def __init__(self, context: "Context"):
        self.context = context
        self._subscription = None

    async def start(self) -> None:
        bus = self.context.bus
        if bus.shared:
            self._subscription = await bus.subscribe(CHANNEL, self._on_remote)

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None

    async def send(self, user_id: str, message: dict, *, exclude: str | None = None, only: str | None = None,
                   turn_id: str | None = None, seq: int = -1) -> None:
        """To every device of `user_id` (all instances), except `exclude`, or only to `only`."""
        await self.send_payload(user_id, json.dumps(message, ensure_ascii=False), exclude=exclude, only=only,
                                turn_id=turn_id, seq=seq)

    async def send_payload(self, user_id: str, payload: str, *, exclude: str | None = None,
                           only: str | None = None, turn_id: str | None = None, seq: int = -1) -> None:
        self.deliver_local(user_id, payload, exclude, only, turn_id, seq)
        bus = self.context.bus
        if bus.shared:
            await bus.publish(CHANNEL, {"origin": self.context.hub.instance_id, "user_id": user_id,
                                        "payload": payload, "exclude": exclude, "only": only,
                                        "turn_id": turn_id, "seq": seq})

    def deliver_local(self, user_id: str, payload: str, exclude: str | None, only: str | None,
                      turn_id: str | None, seq: int) -> None:
        for connection in self.context.hub.connections(user_id):
            if connection.id == exclude or (only is not None and connection.id != only):
                continue
            self.deliver_to(connection, payload, turn_id, seq)

    @staticmethod
    def deliver_to(connection: "Connection", payload: str, turn_id: str | None, seq: int) -> None:
        held = connection.data.get(HELD)
        if held is not None:
            held.append((payload, turn_id, seq))
            return
        if turn_id is not None and connection.data.get(REPLAYED, {}).get(turn_id, -1) >= seq:
            return  # the replay already sent it
        connection.send(payload)

    async def _on_remote(self, envelope: dict) -> None:
        if envelope.get("origin") == self.context.hub.instance_id:
            return
        self.deliver_local(envelope["user_id"], envelope["payload"], envelope.get("exclude"),
                           envelope.get("only"), envelope.get("turn_id"), int(envelope.get("seq", -1)))

    async def replay_into(self, connection: "Connection", replay: "ReplayBuffer", session_id: str,
                          after: tuple[str, int] | None) -> int:
        """Send `connection` (registered with `HELD` set) what it missed of the session's current
        turn, then release what arrived live meanwhile. Returns how many frames were replayed."""
        sent = 0
        try:
            snapshot = await replay.read(session_id)
        except Exception:
            log.exception("reading the replay buffer of %s failed", session_id)
            snapshot = None
        if snapshot is not None:
            after_seq = after[1] if after and after[0] == snapshot.turn_id else -1
            # A finished turn is replayed only to a device that saw part of it.
            if snapshot.running or (after is not None and after[0] == snapshot.turn_id):
                last = after_seq
                for seq, payload in snapshot.frames:
                    if seq > after_seq:
                        connection.send(payload)
                        sent += 1
                    last = max(last, seq)
                connection.data.setdefault(REPLAYED, {})[snapshot.turn_id] = last
        held = connection.data.pop(HELD, None) or []
        for payload, turn_id, seq in held:
            self.deliver_to(connection, payload, turn_id, seq)
        return sent


@dataclass
class Snapshot:
    turn_id: str
    running: bool
    frames: list[tuple[int, str]] = field(default_factory=list)


class ReplayBuffer(abc.ABC):
    """Frames of each session's latest turn, kept `ttl` seconds after the turn ends."""

    def __init__(self, ttl: float = 120.0, max_frames: int = 20000):
        self.ttl = ttl
        self.max_frames = max_frames

    @abc.abstractmethod
    async def begin(self, session_id: str, turn_id: str) -> Snapshot | None:
        """A new turn: forget the previous one's frames. Returns them when that turn never
        finished (its instance died mid-reply: turns of a session never overlap)."""

    @abc.abstractmethod
    async def append(self, session_id: str, turn_id: str, seq: int, payload: str) -> None:
        """One frame of the running turn."""

    @abc.abstractmethod
    async def finish(self, session_id: str, turn_id: str) -> None:
        """The turn ended; its frames expire `ttl` seconds from now."""

    @abc.abstractmethod
    async def read(self, session_id: str) -> Snapshot | None:
        """The latest turn's frames, None when nothing is kept."""


class InProcessReplay(ReplayBuffer):
    def __init__(self, ttl: float = 120.0, max_frames: int = 20000):
        super().__init__(ttl, max_frames)
        self._turns: dict[str, Snapshot] = {}
        self._expires: dict[str, float] = {}

    def _sweep(self) -> None:
        now = time.monotonic()
        for session_id in [s for s, expires in self._expires.items() if expires <= now]:
            self._turns.pop(session_id, None)
            self._expires.pop(session_id, None)

    async def begin(self, session_id: str, turn_id: str) -> Snapshot | None:
        self._sweep()
        previous = self._turns.get(session_id)
        self._turns[session_id] = Snapshot(turn_id, True)
        self._expires.pop(session_id, None)
        return previous if previous is not None and previous.running else None

    async def append(self, session_id: str, turn_id: str, seq: int, payload: str) -> None:
        snapshot = self._turns.get(session_id)
        if snapshot is not None and snapshot.turn_id == turn_id and len(snapshot.frames) < self.max_frames:
            snapshot.frames.append((seq, payload))

    async def finish(self, session_id: str, turn_id: str) -> None:
        snapshot = self._turns.get(session_id)
        if snapshot is not None and snapshot.turn_id == turn_id:
            snapshot.running = False
            self._expires[session_id] = time.monotonic() + self.ttl

    async def read(self, session_id: str) -> Snapshot | None:
        self._sweep()
        snapshot = self._turns.get(session_id)
        if snapshot is None:
            return None
        return Snapshot(snapshot.turn_id, snapshot.running, list(snapshot.frames))


# A running turn's stream outlives a crashed instance by at most this long.
RUNNING_STREAM_TTL = 3600


# Start a turn's stream; return the previous stream's entries if its last one is not an `end`.
_BEGIN_SCRIPT = """
local previous = {}
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last > 0 then
  local fields, ended = last[1][2], false
  for i = 1, #fields, 2 do
    if fields[i] == 'kind' and fields[i + 1] == 'end' then ended = true end
  end
  if not ended then previous = redis.call('XRANGE', KEYS[1], '-', '+') end
end
redis.call('DEL', KEYS[1])
redis.call('XADD', KEYS[1], '*', 'turn', ARGV[1], 'kind', 'begin')
redis.call('EXPIRE', KEYS[1], ARGV[2])
return previous
"""


class RedisReplay(ReplayBuffer):
    """One Redis Stream per session; the first entry names the turn, `end` marks its end."""

    def __init__(self, client, prefix: str, ttl: float = 120.0, max_frames: int = 20000):
        super().__init__(ttl, max_frames)
        self.client = client
        self.prefix = prefix
        self._begin = client.register_script(_BEGIN_SCRIPT)

    def _key(self, session_id: str) -> str:
        return f"{self.prefix}chat:replay:{session_id}"

    async def begin(self, session_id: str, turn_id: str) -> Snapshot | None:
        # One round trip; the previous turn's entries come back only when it never ended.
        entries = await self._begin(keys=[self._key(session_id)], args=[turn_id, RUNNING_STREAM_TTL])
        return _snapshot([(entry_id, dict(zip(fields[::2], fields[1::2]))) for entry_id, fields in entries or ()])

    async def append(self, session_id: str, turn_id: str, seq: int, payload: str) -> None:
        await self.client.xadd(self._key(session_id), {"turn": turn_id, "kind": "frame", "seq": seq,
                                                       "payload": payload},
                               maxlen=self.max_frames, approximate=True)

    async def finish(self, session_id: str, turn_id: str) -> None:
        key = self._key(session_id)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.xadd(key, {"turn": turn_id, "kind": "end"})
            pipe.expire(key, max(1, int(self.ttl)))
            await pipe.execute()

    async def read(self, session_id: str) -> Snapshot | None:
        return _snapshot(await self.client.xrange(self._key(session_id)))


def _snapshot(entries) -> Snapshot | None:
    """The latest turn in a replay stream's entries."""
    snapshot: Snapshot | None = None
    for _, fields in entries:
        turn_id = fields.get("turn", "")
        if snapshot is None or snapshot.turn_id != turn_id:
            snapshot = Snapshot(turn_id, True)
        if fields.get("kind") == "frame":
            snapshot.frames.append((int(fields["seq"]), fields["payload"]))
        elif fields.get("kind") == "end":
            snapshot.running = False
    return snapshot


def create_replay(context: "Context", ttl: float, max_frames: int) -> ReplayBuffer:
    bus = context.bus
    client = getattr(bus, "client", None)
    if bus.shared and client is not None:
        return RedisReplay(client, bus.prefix, ttl, max_frames)
    return InProcessReplay(ttl, max_frames)
