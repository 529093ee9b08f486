"""The bus: publish/subscribe between service instances, atomic counters with expiry, a
small key-value store with expiry (locks, presence, de-duplication), and streams (append-only
logs that expire, such as the frames of a reply a reconnecting device is replayed).

Two implementations behind this interface: in-process (`memory_bus.py`: one instance, nothing to
install) and Redis (`redis_bus.py`: `REDIS_URL`, shared by every instance); `bus_factory.py`
picks one. Messages are JSON objects in both, so code tested on one behaves the same on the
other. Handlers of one channel run in publish order."""
from __future__ import annotations

import abc
import asyncio
import builtins
import contextlib
import json
import logging
from typing import Any, Awaitable, Callable, Coroutine, Sequence

log = logging.getLogger("gateway.bus")

Handler = Callable[[dict], Awaitable[None]]
Entry = dict[str, str]
# An entry to append to a stream: (key, entry, max_len), see `Bus.stream_append`.
Record = tuple[str, Entry, "int | None"]
# A key to set unless it exists: (key, value, ttl), see `Bus.acquire`.
Claim = tuple[str, str, float]


def _log_listener_failure(task: "asyncio.Task") -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("a listener of the bus's return failed: %r", task.exception())



class Subscription:
    def __init__(self, bus: "Bus", channel: str, handler: Handler):
        self.bus, self.channel, self.handler = bus, channel, handler

    async def close(self) -> None:
        await self.bus._remove(self)


class Bus(abc.ABC):
    """Interface; see the module docstring."""

    # True when other instances see what this one publishes and counts.
    shared: bool = False

    def __init__(self, prefix: str = "assistant:"):
        self.prefix = prefix
        self._handlers: dict[str, list[Subscription]] = {}
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._dispatcher: asyncio.Task | None = None
        self._closed = False
        self._restored_listeners: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._restoring: builtins.set[asyncio.Task] = builtins.set()

    # -- pub/sub
    @abc.abstractmethod
    async def publish(self, channel: str, message: dict) -> None:
        ...

    async def subscribe(self, channel: str, handler: Handler) -> Subscription:
        subscription = Subscription(self, channel, handler)
        if self._closed:  # a connection arriving while the service stops: nothing more to receive
            return subscription
        first = channel not in self._handlers
        self._handlers.setdefault(channel, []).append(subscription)
        if self._dispatcher is None:
            self._dispatcher = asyncio.create_task(self._dispatch(), name="bus-dispatch")
        if first:
            await self._listen(channel)
        return subscription

    async def _remove(self, subscription: Subscription) -> None:
        handlers = self._handlers.get(subscription.channel, [])
        if subscription in handlers:
            handlers.remove(subscription)
        if not handlers and subscription.channel in self._handlers:
            del self._handlers[subscription.channel]
            await self._unlisten(subscription.channel)

    def on_restored(self, listener: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """`await listener()` each time the bus answers again after it could not be reached: what
        it kept may be gone (a Redis restarted without its data), so marks are made again."""
        self._restored_listeners.append(listener)

    def _restored(self) -> None:
        for listener in self._restored_listeners:
            task = asyncio.create_task(listener(), name="bus-restored")
            self._restoring.add(task)
            task.add_done_callback(self._restoring.discard)
            task.add_done_callback(_log_listener_failure)

    async def ensure_listening(self) -> None:
        """Return once the subscriptions are live again if the bus was away (see RedisBus)."""

    async def _listen(self, channel: str) -> None:
        pass

    async def _unlisten(self, channel: str) -> None:
        pass

    def _deliver(self, channel: str, payload: str) -> None:
        self._queue.put_nowait((channel, payload))

    async def _dispatch(self) -> None:
        while True:
            channel, payload = await self._queue.get()
            message = json.loads(payload)
            for subscription in list(self._handlers.get(channel, ())):
                try:
                    await subscription.handler(message)
                except Exception:
                    log.exception("bus handler for %r failed", channel)

    # -- counters and keys
    @abc.abstractmethod
    async def incr(self, key: str, ttl: float) -> tuple[int, float]:
        """Add one to `key`; the key expires `ttl` seconds after its first increment.
        Returns the new count and the seconds left before it resets."""

    @abc.abstractmethod
    async def set(self, key: str, value: str, ttl: float | None = None, only_if_absent: bool = False) -> bool:
        ...

    @abc.abstractmethod
    async def get(self, key: str) -> str | None:
        ...

    @abc.abstractmethod
    async def get_many(self, keys: list[str]) -> list[str | None]:
        """The values of `keys`, in order, in one round trip."""

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        ...

    @abc.abstractmethod
    async def delete_if(self, key: str, value: str) -> bool:
        """Delete `key` only while it holds `value`, in one step: a lock is let go by its owner,
        never after it expired and someone else took it."""

    @abc.abstractmethod
    async def renew_if(self, key: str, value: str, ttl: float) -> bool:
        """Give `key` a new `ttl` only while it holds `value`, in one step."""

    @abc.abstractmethod
    async def acquire(self, key: str, owner: str, ttl: float, *, marks: Sequence[Claim] = (),
                      present: Sequence[str] = (), absent: Sequence[str] = (),
                      then: "Claim | None" = None) -> tuple[bool, bool | None]:
        """Take the lock `key` for `owner` (set for `ttl` seconds unless it exists) and, only when
        taken, `mark` each (set, member, ttl) of `marks`, look at other keys and claim one more,
        in one step: a chat turn's start asks all this at once, and each round trip it saves is
        saved by every turn. Returns (taken, claimed): claimed is None when the lock was not
        taken, a key of `present` is missing or a key of `absent` exists; else whether `then`
        (key, value, ttl) was set unless it existed (True when there is no `then`)."""

    @abc.abstractmethod
    async def release_unless(self, key: str, owner: str, mark: str, *,
                             unmark: tuple[str, str] | None = None) -> bool:
        """Let the lock `key` go (while `owner` holds it) and `unmark` (set, member), unless the
        key `mark` exists: then delete `mark` and keep both. One step: whoever sets `mark` and
        then tries the lock either is seen here or finds the lock free. True when let go."""

    # -- sets whose members expire (presence, live sessions)
    @abc.abstractmethod
    async def mark(self, key: str, member: str, ttl: float) -> None:
        """Add `member` to the set `key`, or renew it; it leaves by itself after `ttl` seconds."""

    @abc.abstractmethod
    async def unmark(self, key: str, member: str) -> None:
        """Remove `member` from the set `key` now."""

    # `builtins.set`: inside these classes `set` is the method above.
    @abc.abstractmethod
    async def members(self, key: str) -> builtins.set[str]:
        """The members of `key` that have not expired."""

    # -- streams: entries (dicts of strings) in the order appended
    @abc.abstractmethod
    async def stream_append(self, key: str, entry: Entry, *, max_len: int | None = None,
                            ttl: float | None = None) -> None:
        """Add `entry` at the end of stream `key`. `max_len`: the oldest entries go once there
        are more (Redis trims approximately: at least `max_len` stay); `ttl`: the stream expires
        `ttl` seconds from now, set in the same step."""

    def stream_append_nowait(self, key: str, entry: Entry, *, max_len: int | None = None,
                             then: Callable[[], object] | None = None) -> bool:
        """`stream_append` without waiting for it, and `then()` called once the entry is in:
        before returning (the in-process bus), or when the bus answers (Redis: sent before any
        command this instance gives the bus afterwards, so a later read, or a message that says
        "read now", finds it). `then` is called too when the entry could not be appended (the
        bus is away: no resume can read it; `stream_appended` and the next append raise the
        failure, so the reply ends, and its end covers the frame). False, nothing appended and
        `then` not called, where neither holds: call `stream_append`. A relay appends every frame of a reply: a
        device may be sent a frame only once a resume would find it in the replay (`then`),
        and yet the reply must not wait a round trip per frame."""
        return False

    async def stream_appended(self, key: str) -> None:
        """Return once what `stream_append_nowait` appended to `key` is in; raise the failure
        of an entry that could not be appended (a reply whose frames cannot be replayed fails,
        as it would have waiting for each)."""

    @abc.abstractmethod
    async def stream_read(self, key: str) -> list[Entry]:
        """Every entry of stream `key`, oldest first; [] when there is none."""

    @abc.abstractmethod
    async def stream_restart(self, key: str, entry: Entry, ttl: float, *,
                             finished: tuple[str, str]) -> list[Entry]:
        """Start stream `key` over with `entry` alone, expiring in `ttl` seconds, in one step.
        Returns the old entries when the old stream's last entry does not hold `finished`
        (field, value), the mark its writer appends at the end: that writer stopped before it
        finished. Otherwise [] (the old entries are not read)."""

    # -- delivery to the instances holding something (a user's devices)
    @abc.abstractmethod
    async def fan_out(self, holders: str, channel_prefix: str, origin: str, message: dict, *,
                      record: "Record | None" = None) -> None:
        """Publish `message` on `channel_prefix + holder` for every member of the expiring set
        `holders` (see `mark`) but `origin`; with `record` (stream key, entry, max_len), append
        the entry to that stream first, in the same step. One step: an instance that marks
        itself a holder and then reads the stream either finds the entry there or is sent the
        message. Instances that hold nothing are sent nothing, and neither is `origin` itself."""

    async def hold_and_tell(self, holders: str, member: str, ttl: float | None, channel_prefix: str,
                            message: dict) -> builtins.set[str]:
        """Publish `message` on `channel_prefix + holder` for every other member of the expiring
        set `holders`, then mark `member` there for `ttl` seconds (unmark it when `ttl` is None),
        in one step; returns the members told. A holder joining or leaving tells the others, so
        each knows who else holds a user without asking the bus per frame (gateway/hub.py).
        (One step on Redis; here, with no other instance to race, in turn.)"""
        told = await self.members(holders) - {member}
        for holder in told:
            await self.publish(channel_prefix + holder, message)
        if ttl is None:
            await self.unmark(holders, member)
        else:
            await self.mark(holders, member, ttl)
        return told

    async def close(self) -> None:
        self._closed = True
        for task in list(self._restoring):
            task.cancel()
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatcher
            self._dispatcher = None
        self._handlers.clear()
