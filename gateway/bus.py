"""The bus: publish/subscribe between service instances, atomic counters with expiry, a
small key-value store with expiry (locks, presence, de-duplication), and streams (append-only
logs that expire, such as the frames of a reply a reconnecting device is replayed).

Two implementations behind one interface: in-process (one instance, nothing to install) and
Redis (`REDIS_URL`, shared by every instance). Messages are JSON objects in both, so code
tested on one behaves the same on the other. Handlers of one channel run in publish order."""
from __future__ import annotations

import abc
import asyncio
import builtins
import collections
import contextlib
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, cast

from .batching import Batcher
from .text import dumps_text

if TYPE_CHECKING:
    from redis.asyncio.client import PubSub
    from redis.commands.core import AsyncScript

log = logging.getLogger("gateway.bus")

Handler = Callable[[dict], Awaitable[None]]
# Seconds between attempts to subscribe again while Redis is away: doubling from the first to the
# most, so an outage costs few attempts and a return is noticed within the most.
RESUBSCRIBE_FIRST_DELAY = 0.1
RESUBSCRIBE_MAX_DELAY = 2.0
Entry = dict[str, str]
# An entry to append to a stream: (key, entry, max_len), see `Bus.stream_append`.
Record = tuple[str, Entry, "int | None"]


def _log_listener_failure(task: "asyncio.Task") -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("a listener of the bus's return failed: %r", task.exception())


def _fields(entry: Entry) -> list[str]:
    """A stream entry as a script's arguments: field, value, field, value..."""
    return [item for pair in entry.items() for item in pair]


def _stream_args(entry: Entry, max_len: int | None) -> list:
    """A stream entry as the appending scripts take it in ARGV (`_APPEND_LUA`): max_len ('' for
    none), then the entry's fields."""
    return ["" if max_len is None else max_len, *_fields(entry)]


def redis_exceptions():
    import redis.exceptions

    return redis.exceptions


def unavailable(error: BaseException) -> bool:
    """Whether `error` says Redis cannot be reached now (down, restarting, the connection lost).
    The client reconnects at the next command, and subscriptions are made again (`RedisBus`)."""
    exceptions = redis_exceptions()
    return isinstance(error, (exceptions.ConnectionError, exceptions.TimeoutError))


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

    def stream_append_nowait(self, key: str, entry: Entry, *, max_len: int | None = None) -> bool:
        """`stream_append` done before returning, where the bus can do it without waiting (the
        in-process bus always can); False, and nothing appended, where it cannot: call
        `stream_append`. A relay appends every frame of a reply, and one coroutine less per
        frame counts."""
        return False

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


class InProcessBus(Bus):
    """For a single instance: nothing leaves the process."""

    shared = False

    def __init__(self, prefix: str = "assistant:"):
        super().__init__(prefix)
        self._values: dict[str, tuple[str, float | None]] = {}
        self._sets: dict[str, dict[str, float]] = {}
        self._streams: dict[str, _Stream] = {}

    async def publish(self, channel: str, message: dict) -> None:
        payload = json.dumps(message)
        if channel in self._handlers:
            self._deliver(channel, payload)

    def _live(self, key: str) -> tuple[str, float | None] | None:
        entry = self._values.get(key)
        if entry is not None and entry[1] is not None and entry[1] <= time.monotonic():
            del self._values[key]
            return None
        return entry

    async def incr(self, key: str, ttl: float) -> tuple[int, float]:
        entry = self._live(key)
        now = time.monotonic()
        expires: float | None  # None: a key `set` without a ttl
        if entry is None:
            count, expires = 1, now + ttl
        else:
            count, expires = int(entry[0]) + 1, entry[1]
        self._values[key] = (str(count), expires)
        return count, max(0.0, (expires or now) - now)

    async def set(self, key: str, value: str, ttl: float | None = None, only_if_absent: bool = False) -> bool:
        if only_if_absent and self._live(key) is not None:
            return False
        self._values[key] = (value, time.monotonic() + ttl if ttl else None)
        return True

    async def get(self, key: str) -> str | None:
        entry = self._live(key)
        return entry[0] if entry else None

    async def get_many(self, keys: list[str]) -> list[str | None]:
        return [entry[0] if (entry := self._live(key)) else None for key in keys]

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)
        self._sets.pop(key, None)
        self._streams.pop(key, None)

    async def delete_if(self, key: str, value: str) -> bool:
        if (entry := self._live(key)) is None or entry[0] != value:
            return False
        del self._values[key]
        return True

    async def renew_if(self, key: str, value: str, ttl: float) -> bool:
        if (entry := self._live(key)) is None or entry[0] != value:
            return False
        self._values[key] = (value, time.monotonic() + ttl)
        return True

    async def mark(self, key: str, member: str, ttl: float) -> None:
        self._sets.setdefault(key, {})[member] = time.monotonic() + ttl

    async def unmark(self, key: str, member: str) -> None:
        self._sets.get(key, {}).pop(member, None)

    async def members(self, key: str) -> builtins.set[str]:
        now = time.monotonic()
        entries = self._sets.get(key, {})
        for member in [m for m, expires in entries.items() if expires <= now]:
            del entries[member]
        return set(entries)

    def _stream(self, key: str) -> "_Stream | None":
        stream = self._streams.get(key)
        if stream is not None and stream.expires is not None and stream.expires <= time.monotonic():
            del self._streams[key]
            return None
        return stream

    async def stream_append(self, key: str, entry: Entry, *, max_len: int | None = None,
                            ttl: float | None = None) -> None:
        self.stream_append_nowait(key, entry, max_len=max_len)
        if ttl is not None:
            self._streams[key].expires = time.monotonic() + ttl

    def stream_append_nowait(self, key: str, entry: Entry, *, max_len: int | None = None) -> bool:
        stream = self._streams.get(key)  # runs per frame of a reply: _stream's checks inlined
        if stream is None or (stream.expires is not None and stream.expires <= time.monotonic()):
            stream = self._streams[key] = _Stream()
        stream.entries.append(entry)  # kept as given: entries are built for the call
        if max_len is not None:
            while len(stream.entries) > max_len:
                stream.entries.popleft()
        return True

    async def stream_read(self, key: str) -> list[Entry]:
        stream = self._stream(key)
        return [dict(entry) for entry in stream.entries] if stream is not None else []

    async def stream_restart(self, key: str, entry: Entry, ttl: float, *,
                             finished: tuple[str, str]) -> list[Entry]:
        old = self._stream(key)
        stream = self._streams[key] = _Stream(time.monotonic() + ttl)
        stream.entries.append(dict(entry))
        if old is None or not old.entries or old.entries[-1].get(finished[0]) == finished[1]:
            return []
        return list(old.entries)

    async def fan_out(self, holders: str, channel_prefix: str, origin: str, message: dict, *,
                      record: Record | None = None) -> None:
        if record is not None:
            await self.stream_append(record[0], record[1], max_len=record[2])
        for holder in await self.members(holders):
            if holder != origin:
                await self.publish(channel_prefix + holder, message)


class _Stream:
    __slots__ = ("entries", "expires")

    def __init__(self, expires: float | None = None):
        self.entries: collections.deque[Entry] = collections.deque()
        self.expires = expires


_INCR_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {count, redis.call('PTTL', KEYS[1])}
"""

_DELETE_IF_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_RENEW_IF_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""


# The old stream's entries come back only when its last entry lacks the `finished` mark.
_STREAM_RESTART_SCRIPT = """
local previous = {}
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last > 0 then
  local fields, finished = last[1][2], false
  for i = 1, #fields, 2 do
    if fields[i] == ARGV[2] and fields[i + 1] == ARGV[3] then finished = true end
  end
  if not finished then previous = redis.call('XRANGE', KEYS[1], '-', '+') end
end
redis.call('DEL', KEYS[1])
redis.call('XADD', KEYS[1], '*', unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return previous
"""


_MEMBERS_SCRIPT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""

# Lua functions the scripts below share. `append`: add the fields entry[first], entry[first + 1]...
# to stream `key`, trimmed to about `max_len` entries ('' for no trimming); the entry's id.
_APPEND_LUA = """
local function append(key, max_len, entry, first)
  if max_len == '' then
    return redis.call('XADD', key, '*', unpack(entry, first))
  end
  return redis.call('XADD', key, 'MAXLEN', '~', max_len, '*', unpack(entry, first))
end
"""

# `fan_out`: publish `message` on `channel_prefix .. holder` for every holder of `holders` not
# expired by `now` but `origin`; how many were sent.
_FAN_OUT_LUA = """
local function fan_out(holders, now, origin, channel_prefix, message)
  local sent = 0
  for _, holder in ipairs(redis.call('ZRANGEBYSCORE', holders, now, '+inf')) do
    if holder ~= origin then
      redis.call('PUBLISH', channel_prefix .. holder, message)
      sent = sent + 1
    end
  end
  return sent
end
"""

# ARGV: ttl in ms, then the entry (`_stream_args`).
_STREAM_APPEND_EXPIRING_SCRIPT = _APPEND_LUA + """
append(KEYS[1], ARGV[2], ARGV, 3)
return redis.call('PEXPIRE', KEYS[1], ARGV[1])
"""


# KEYS[1]: the holders (a sorted set scored by expiry), KEYS[2] (optional): the stream to append to.
# ARGV: now, origin, channel prefix, message, then with KEYS[2] the entry (`_stream_args`).
_FAN_OUT_SCRIPT = _APPEND_LUA + _FAN_OUT_LUA + """
if #KEYS > 1 then append(KEYS[2], ARGV[5], ARGV, 6) end
return fan_out(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
"""


# Many frames (fan_outs and plain appends, `RedisBus._fold_frames`) in one call: one command to
# pack and one reply to parse instead of one each, which was most of what a frame cost this
# process. ARGV[1]: a JSON list of items, each naming its keys by their position in KEYS (every
# key the call touches, once each):
#   ["fan_out", holders, stream (0: none), now, origin, channel prefix, message[, max_len, fields]]
#   ["append", stream, max_len, fields]
# Each item runs on its own (pcall): one that fails (a key of the wrong type) answers its error
# in its place among the results, and the others still run.
_FRAMES_SCRIPT = _APPEND_LUA + _FAN_OUT_LUA + """
local function run(item)
  if item[1] == 'append' then return append(KEYS[item[2]], item[3], item[4], 1) end
  if item[3] > 0 then append(KEYS[item[3]], item[8], item[9], 1) end
  return fan_out(KEYS[item[2]], item[4], item[5], item[6], item[7])
end
local results = {}
for i, item in ipairs(cjson.decode(ARGV[1])) do
  local ok, result = pcall(run, item)
  if not ok then  -- an error reply among the results: redis-py makes it that item's ResponseError
    if type(result) == 'table' then result = result.err end
    result = {err = tostring(result)}
  end
  results[i] = result
end
return results
"""

# The options of `RedisBus.stream_append`'s XADD (no ttl), which `_FRAMES_SCRIPT` can do.
_FOLDABLE_XADD_OPTIONS = frozenset({"maxlen", "approximate"})


class _FrameKeys:
    """The KEYS of one `_FRAMES_SCRIPT` call: every key its items touch, once each."""

    __slots__ = ("keys", "_positions")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._positions: dict[str, int] = {}

    def position(self, key: str) -> int:
        """Where `key` is in KEYS, counted from 1 as Lua does."""
        number = self._positions.get(key)
        if number is None:
            self.keys.append(key)
            number = self._positions[key] = len(self.keys)
        return number


class RedisBus(Bus):
    """Shared by every instance that points at the same Redis."""

    shared = True

    def __init__(self, url: str, prefix: str = "assistant:", max_connections: int = 256):
        super().__init__(prefix)
        import redis.asyncio as redis

        self.url = url
        # A burst (hundreds of chat turns at once) needs more connections than redis-py's default
        # of 100, and one more than the most should wait for a free connection (up to 10 s), not
        # fail at once with "Too many connections".
        pool = redis.BlockingConnectionPool.from_url(url, decode_responses=True, max_connections=max_connections,
                                                     timeout=10)
        self.client = redis.Redis.from_pool(pool)
        # Every command (but subscriptions) of many tasks goes out in one pipeline while one is in
        # flight: each frame of a reply is one, a turn adds some twenty more, and a burst of turns
        # would otherwise cost a round trip (and its CPU, in this process and in Redis) each. Alone,
        # a command goes out at once.
        self._commands: Batcher[tuple, Any] = Batcher(self._run_one, self._run_many, max_batch=256)
        self._pubsub: PubSub | None = None
        self._reader: asyncio.Task | None = None
        self._subscriptions_lost = False  # the reader is waiting to reconnect
        self._reconnected = asyncio.Event()  # ensure_listening did: the reader reads on at once
        self._incr = self.client.register_script(_INCR_SCRIPT)
        self._delete_if = self.client.register_script(_DELETE_IF_SCRIPT)
        self._renew_if = self.client.register_script(_RENEW_IF_SCRIPT)
        self._stream_restart = self.client.register_script(_STREAM_RESTART_SCRIPT)
        self._fan_out = self.client.register_script(_FAN_OUT_SCRIPT)
        self._frames = self.client.register_script(_FRAMES_SCRIPT)
        self._members = self.client.register_script(_MEMBERS_SCRIPT)
        self._stream_append_expiring = self.client.register_script(_STREAM_APPEND_EXPIRING_SCRIPT)

    async def ping(self) -> None:
        await self.client.ping()

    def _command(self, name: str, *args: Any, **options: Any) -> "asyncio.Future[Any]":
        """A redis-py command, pipelined with the others in flight (see `_commands`)."""
        return self._commands.submit((name, args, options))

    def _script(self, script: "AsyncScript", keys: list, args: list) -> "asyncio.Future[Any]":
        return self._commands.submit((script, (keys, args), {}))

    async def publish(self, channel: str, message: dict) -> None:
        await self._command("publish", self.prefix + channel, json.dumps(message))

    async def fan_out(self, holders: str, channel_prefix: str, origin: str, message: dict, *,
                      record: Record | None = None) -> None:
        keys, args = [self.prefix + holders], [time.time(), origin, self.prefix + channel_prefix, json.dumps(message)]
        if record is not None:
            key, entry, max_len = record
            keys.append(self.prefix + key)
            args += _stream_args(entry, max_len)
        await self._script(self._fan_out, keys, args)

    async def _run_one(self, command: tuple) -> Any:
        name, args, options = command
        if not isinstance(name, str):  # a script
            keys, script_args = args
            return await name(keys=keys, args=script_args)  # loads the script when Redis lacks it
        return await getattr(self.client, name)(*args, **options)

    async def _run_many(self, commands: list[tuple]) -> list[Any]:
        sent, folded = self._fold_frames(commands)
        results: list[Any] = []
        for result, count in zip(await self._pipeline(sent), folded):
            if not count:
                results.append(result)
            elif isinstance(result, Exception):  # the whole call failed: so did each of its items
                results.extend([result] * count)
            else:
                results.extend(result)
        return results

    def _fold_frames(self, commands: list[tuple]) -> tuple[list[tuple], list[int]]:
        """`commands` with each run of two or more frames in a row (`_frame_item`) made one
        `_FRAMES_SCRIPT` call: a burst of replies costs a command per batch, not per frame. Only
        a run in a row is folded, so every command still reaches Redis in the order submitted.
        Returns the commands to send and, for each, how many of `commands` it answers for: 0
        for one sent as it was, else a list of that many results."""
        sent: list[tuple] = []
        folded: list[int] = []
        keys, items = _FrameKeys(), []
        index, total = 0, len(commands)
        while index < total:
            end = index
            while end < total and (item := self._frame_item(commands[end], keys)) is not None:
                items.append(item)
                end += 1
            if len(items) > 1:
                payload = dumps_text(items)
                sent.append((self._frames, (keys.keys, [payload]), {}))
                folded.append(len(items))
                index = end
            else:  # not a frame, or a frame alone: sent as it is
                sent.append(commands[index])
                folded.append(0)
                index += 1
            if items:
                keys, items = _FrameKeys(), []
        return sent, folded

    def _frame_item(self, command: tuple, keys: "_FrameKeys") -> list | None:
        """`command` as an item of `_FRAMES_SCRIPT` (its keys named by their place in `keys`),
        or None when it is not a frame: a `fan_out`, or a `stream_append` without a ttl."""
        name, args, options = command
        if name is self._fan_out:
            script_keys, script_args = args
            if len(script_keys) == 1:
                return ["fan_out", keys.position(script_keys[0]), 0, *script_args]
            return ["fan_out", keys.position(script_keys[0]), keys.position(script_keys[1]),
                    *script_args[:5], script_args[5:]]
        if name == "xadd" and options.keys() <= _FOLDABLE_XADD_OPTIONS and options.get("approximate", True):
            key, entry = args
            max_len = options.get("maxlen")
            return ["append", keys.position(key), "" if max_len is None else max_len, _fields(entry)]
        return None

    async def _pipeline(self, commands: list[tuple]) -> list[Any]:
        """`commands` in one round trip: a result per command, an Exception for one that failed."""
        async with self.client.pipeline(transaction=False) as pipe:
            for name, args, options in commands:
                if not isinstance(name, str):
                    keys, script_args = args
                    pipe.evalsha(name.sha, len(keys), *keys, *script_args)
                else:
                    getattr(pipe, name)(*args, **options)
            results = await pipe.execute(raise_on_error=False)
        # A Redis that restarted has forgotten the scripts: those commands again, one by one,
        # which loads them.
        for index, result in enumerate(results):
            if isinstance(result, redis_exceptions().NoScriptError):
                try:
                    results[index] = await self._run_one(commands[index])
                except Exception as error:
                    results[index] = error
        return results

    async def _listen(self, channel: str) -> None:
        if self._pubsub is None:
            self._pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        await self._pubsub.subscribe(self.prefix + channel)
        if self._reader is None:
            self._reader = asyncio.create_task(self._read(), name="bus-redis-reader")

    async def ensure_listening(self) -> None:
        """While Redis was away the reader tries again only every so often (up to
        RESUBSCRIBE_MAX_DELAY): reconnect now, which subscribes again to every channel. An
        instance about to say "send me these" (a hub's holder mark) must be listening first."""
        if self._pubsub is not None and self._subscriptions_lost:
            await self._pubsub.ping()
            self._reconnected.set()
            if self._subscriptions_lost:
                self._subscriptions_lost = False
                self._restored()

    async def _unlisten(self, channel: str) -> None:
        if self._pubsub is None:
            return
        name = self.prefix + channel
        try:
            await self._pubsub.unsubscribe(name)
        except Exception as error:  # Redis is away: its subscriptions went with the connection
            log.warning("unsubscribing from %s while Redis is away (%s)", channel, error)
        finally:
            # Forgotten now, not when Redis confirms: a reconnect meanwhile (redis-py's on_connect)
            # subscribes again to every channel it still lists, pending unsubscriptions included.
            # The closing side (a hub at shutdown, a connection leaving) must not fail either way.
            self._pubsub.channels.pop(name, None)
            self._pubsub.channels.pop(name.encode(), None)

    async def _read(self) -> None:
        """Deliver what the subscribed channels receive. While Redis is away each read tries to
        reconnect, less often the longer it lasts; once it answers, redis-py subscribes the new
        connection to the same channels (`PubSub.on_connect`). What was published meanwhile is
        lost, as Redis pub/sub never keeps messages."""
        assert self._pubsub is not None
        skip = len(self.prefix)
        retry_delay = 0.0  # 0 while connected
        while True:
            try:
                message = await self._pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self._subscriptions_lost = True
                if not retry_delay:
                    log.warning("lost the Redis subscription (%s); reconnecting", error)
                retry_delay = min(max(retry_delay * 2, RESUBSCRIBE_FIRST_DELAY), RESUBSCRIBE_MAX_DELAY)
                self._reconnected.clear()
                with contextlib.suppress(asyncio.TimeoutError):  # ensure_listening may reconnect sooner
                    await asyncio.wait_for(self._reconnected.wait(), retry_delay)
                continue
            if retry_delay:
                log.warning("Redis subscription restored")
                retry_delay = 0.0
                if self._subscriptions_lost:  # not already reconnected by ensure_listening
                    self._subscriptions_lost = False
                    self._restored()
            if message and message.get("type") == "message":
                self._deliver(message["channel"][skip:], message["data"])

    async def incr(self, key: str, ttl: float) -> tuple[int, float]:
        count, remaining_ms = await self._script(self._incr, [self.prefix + key], [max(1, int(ttl * 1000))])
        return int(count), max(0.0, int(remaining_ms) / 1000)

    async def set(self, key: str, value: str, ttl: float | None = None, only_if_absent: bool = False) -> bool:
        result = await self._command("set", self.prefix + key, value,
                                     px=int(ttl * 1000) if ttl else None, nx=only_if_absent)
        return bool(result)

    # The client decodes replies (`decode_responses=True`): values are str, where redis-py's
    # types, which do not follow that setting, say `bytes | str`.
    async def get(self, key: str) -> str | None:
        return cast("str | None", await self._command("get", self.prefix + key))

    async def get_many(self, keys: list[str]) -> list[str | None]:
        if not keys:
            return []
        return cast("list[str | None]", await self._command("mget", [self.prefix + key for key in keys]))

    async def delete(self, key: str) -> None:
        await self._command("delete", self.prefix + key)

    async def delete_if(self, key: str, value: str) -> bool:
        return bool(await self._script(self._delete_if, [self.prefix + key], [value]))

    async def renew_if(self, key: str, value: str, ttl: float) -> bool:
        return bool(await self._script(self._renew_if, [self.prefix + key], [value, max(1, int(ttl * 1000))]))

    # Expiring sets are sorted sets scored by each member's expiry time (Redis server clock via
    # TIME would cost a round trip; instances' clocks are assumed to agree within seconds).
    async def mark(self, key: str, member: str, ttl: float) -> None:
        expires = time.time() + ttl
        await self._command("zadd", self.prefix + key, {member: expires})

    async def unmark(self, key: str, member: str) -> None:
        await self._command("zrem", self.prefix + key, member)

    async def members(self, key: str) -> builtins.set[str]:
        return set(await self._script(self._members, [self.prefix + key], [time.time()]))

    # Streams are Redis Streams; entry ids are Redis's own and stay inside.
    async def stream_append(self, key: str, entry: Entry, *, max_len: int | None = None,
                            ttl: float | None = None) -> None:
        if ttl is None:
            await self._command("xadd", self.prefix + key, entry, maxlen=max_len, approximate=True)
            return
        await self._script(self._stream_append_expiring, [self.prefix + key],
                           [max(1, int(ttl * 1000)), *_stream_args(entry, max_len)])

    async def stream_read(self, key: str) -> list[Entry]:
        # Decoded (see `get`), and XRANGE answers a list, empty for a missing key: redis-py's
        # `bytes | str` and `| None` are for other settings and commands.
        entries = cast("list[tuple[str, Entry]]", await self._command("xrange", self.prefix + key))
        return [fields for _, fields in entries]

    async def stream_restart(self, key: str, entry: Entry, ttl: float, *,
                             finished: tuple[str, str]) -> list[Entry]:
        entries = await self._script(self._stream_restart, [self.prefix + key],
                                     [max(1, int(ttl * 1000)), *finished, *_fields(entry)])
        return [dict(zip(values[::2], values[1::2])) for _, values in entries or ()]

    async def close(self) -> None:
        self._closed = True  # before any await: no subscription may open a connection after this
        await self._commands.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
        if self._pubsub is not None:
            await self._pubsub.aclose()
            self._pubsub = None
        await super().close()
        await self.client.aclose()


async def create_bus(config) -> Bus:
    url = config.get("bus.redis_url")
    prefix = config.get("bus.prefix") or "assistant:"
    if not url:
        return InProcessBus(prefix)
    bus = RedisBus(url, prefix, int(config.get("bus.max_connections") or 256))
    try:
        await bus.ping()
    except Exception as error:
        await bus.close()
        raise ConnectionError(f"cannot reach Redis at REDIS_URL ({error}); unset REDIS_URL to run "
                              f"one instance on the in-process bus") from error
    return bus
