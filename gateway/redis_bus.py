"""The Redis bus (see bus.py): `REDIS_URL`, shared by every instance that points at the same
Redis. Commands of many tasks go out pipelined, and the frames of replies are folded into one
script call per batch (redis_scripts.py)."""
from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import logging
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from .batching import Batcher
from .bus import Bus, Claim, Entry, Record
from .redis_frames import fold_frames
from .redis_scripts import (ACQUIRE_SCRIPT, DELETE_IF_SCRIPT, FAN_OUT_SCRIPT, FRAMES_SCRIPT, HOLD_SCRIPT, INCR_SCRIPT,
                            MEMBERS_SCRIPT, RELEASE_UNLESS_SCRIPT, RENEW_IF_SCRIPT, STREAM_APPEND_EXPIRING_SCRIPT,
                            STREAM_RESTART_SCRIPT, fields, stream_args)

if TYPE_CHECKING:
    from redis.asyncio.client import PubSub
    from redis.commands.core import AsyncScript

log = logging.getLogger("gateway.redis_bus")

# Seconds between attempts to subscribe again while Redis is away: doubling from the first to the
# most, so an outage costs few attempts and a return is noticed within the most.
RESUBSCRIBE_FIRST_DELAY = 0.1
RESUBSCRIBE_MAX_DELAY = 2.0


def redis_exceptions() -> ModuleType:
    import redis.exceptions

    return redis.exceptions


def unavailable(error: BaseException) -> bool:
    """Whether `error` says Redis cannot be reached now (down, restarting, the connection lost).
    The client reconnects at the next command, and subscriptions are made again (`RedisBus`)."""
    exceptions = redis_exceptions()
    return isinstance(error, (exceptions.ConnectionError, exceptions.TimeoutError))


def milliseconds(seconds: float) -> int:
    """A ttl as the scripts' PEXPIRE and SET PX want it: whole milliseconds, at least 1 (0 is
    an error to Redis)."""
    return max(1, int(seconds * 1000))


# At most this many streams' failed appends are kept for `stream_appended` to raise.
MAX_FAILED_APPENDS = 10000
# `stream_append_nowait` declines (the caller waits for its append) while this many commands wait
# for the batch under way: a burst's frames must not queue ahead of every other command unchecked.
NOWAIT_BACKLOG = 256


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
        # Round trips to Redis so far (subscriptions aside): what a chat turn costs is counted
        # in these (tests/chat/test_turn_round_trips.py), and each is CPU here and in Redis.
        self.round_trips = 0
        self._pubsub: PubSub | None = None
        self._reader: asyncio.Task | None = None
        self._subscriptions_lost = False  # the reader is waiting to reconnect
        self._reconnected = asyncio.Event()  # ensure_listening did: the reader reads on at once
        self._incr = self.client.register_script(INCR_SCRIPT)
        self._delete_if = self.client.register_script(DELETE_IF_SCRIPT)
        self._renew_if = self.client.register_script(RENEW_IF_SCRIPT)
        self._stream_restart = self.client.register_script(STREAM_RESTART_SCRIPT)
        self._fan_out = self.client.register_script(FAN_OUT_SCRIPT)
        self._frames = self.client.register_script(FRAMES_SCRIPT)
        self._members = self.client.register_script(MEMBERS_SCRIPT)
        self._hold = self.client.register_script(HOLD_SCRIPT)
        self._loaded_scripts: builtins.set[str] = builtins.set()  # shas Redis answered a load of
        # `stream_append_nowait`: the last append of each stream still out, and the first failure
        # of each stream not raised yet (`stream_appended`, the next append).
        self._appending: dict[str, asyncio.Future[Any]] = {}
        self._append_failures: dict[str, BaseException] = {}
        self._stream_append_expiring = self.client.register_script(STREAM_APPEND_EXPIRING_SCRIPT)
        self._acquire = self.client.register_script(ACQUIRE_SCRIPT)
        self._release_unless = self.client.register_script(RELEASE_UNLESS_SCRIPT)

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
            args += stream_args(entry, max_len)
        await self._script(self._fan_out, keys, args)

    async def _run_one(self, command: tuple) -> Any:
        self.round_trips += 1
        name, args, options = command
        if not isinstance(name, str):  # a script
            keys, script_args = args
            return await name(keys=keys, args=script_args)  # loads the script when Redis lacks it
        return await getattr(self.client, name)(*args, **options)

    async def _run_many(self, commands: list[tuple]) -> list[Any]:
        sent, folded = fold_frames(commands, frames=self._frames, fan_out=self._fan_out)
        results: list[Any] = []
        for result, count in zip(await self._pipeline(sent), folded):
            if not count:
                results.append(result)
            elif isinstance(result, Exception):  # the whole call failed: so did each of its items
                results.extend([result] * count)
            else:
                results.extend(result)
        return results

    async def _pipeline(self, commands: list[tuple]) -> list[Any]:
        """`commands` in one round trip: a result per command, an Exception for one that failed.
        A script this client has not seen Redis load yet is loaded first in the same round trip:
        one run again after the others (below) would break their order, which a frame appended
        without waiting relies on (`stream_append_nowait`)."""
        loading = {name.sha: name for name, _, _ in commands
                   if not isinstance(name, str) and name.sha not in self._loaded_scripts}
        self.round_trips += 1
        async with self.client.pipeline(transaction=False) as pipe:
            for script in loading.values():
                pipe.script_load(script.script)
            for name, args, options in commands:
                if not isinstance(name, str):
                    keys, script_args = args
                    pipe.evalsha(name.sha, len(keys), *keys, *script_args)
                else:
                    getattr(pipe, name)(*args, **options)
            results = await pipe.execute(raise_on_error=False)
        loads, results = results[:len(loading)], results[len(loading):]
        self._loaded_scripts.update(sha for sha, load in zip(loading, loads) if not isinstance(load, Exception))
        # A Redis that restarted has forgotten the scripts: those commands again, one by one,
        # which loads them.
        for index, result in enumerate(results):
            if isinstance(result, redis_exceptions().NoScriptError):
                self._loaded_scripts.discard(commands[index][0].sha)
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
        count, remaining_ms = await self._script(self._incr, [self.prefix + key], [milliseconds(ttl)])
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
        return bool(await self._script(self._renew_if, [self.prefix + key], [value, milliseconds(ttl)]))

    async def acquire(self, key: str, owner: str, ttl: float, *, marks: Sequence[Claim] = (),
                      present: Sequence[str] = (), absent: Sequence[str] = (),
                      then: Claim | None = None) -> tuple[bool, bool | None]:
        claim = ["", "", ""] if then is None else ["1", then[1], milliseconds(then[2])]
        keys = [self.prefix + key] + ([self.prefix + then[0]] if then is not None else [])
        keys += [self.prefix + name for name in (*present, *absent, *(mark[0] for mark in marks))]
        args: list = [owner, milliseconds(ttl), *claim, len(present), len(absent)]
        now = time.time()  # scored by expiry, as `mark` does
        for _, member, mark_ttl in marks:
            args += [member, now + mark_ttl]
        taken, claimed = await self._script(self._acquire, keys, args)
        return bool(taken), None if int(claimed) < 0 else bool(claimed)

    async def release_unless(self, key: str, owner: str, mark: str, *,
                             unmark: tuple[str, str] | None = None) -> bool:
        keys, args = [self.prefix + key, self.prefix + mark], [owner]
        if unmark is not None:
            keys.append(self.prefix + unmark[0])
            args.append(unmark[1])
        return bool(await self._script(self._release_unless, keys, args))

    # Expiring sets are sorted sets scored by each member's expiry time (Redis server clock via
    # TIME would cost a round trip; instances' clocks are assumed to agree within seconds).
    async def mark(self, key: str, member: str, ttl: float) -> None:
        expires = time.time() + ttl
        await self._command("zadd", self.prefix + key, {member: expires})

    async def unmark(self, key: str, member: str) -> None:
        await self._command("zrem", self.prefix + key, member)

    async def members(self, key: str) -> builtins.set[str]:
        return set(await self._script(self._members, [self.prefix + key], [time.time()]))

    async def hold_and_tell(self, holders: str, member: str, ttl: float | None, channel_prefix: str,
                            message: dict) -> builtins.set[str]:
        now = time.time()
        until = "" if ttl is None else now + ttl
        told = await self._script(self._hold, [self.prefix + holders],
                                  [now, member, until, self.prefix + channel_prefix, json.dumps(message)])
        return set(told)

    # Streams are Redis Streams; entry ids are Redis's own and stay inside.
    async def stream_append(self, key: str, entry: Entry, *, max_len: int | None = None,
                            ttl: float | None = None) -> None:
        if ttl is None:
            await self._command("xadd", self.prefix + key, entry, maxlen=max_len, approximate=True)
            return
        await self._script(self._stream_append_expiring, [self.prefix + key],
                           [milliseconds(ttl), *stream_args(entry, max_len)])

    def stream_append_nowait(self, key: str, entry: Entry, *, max_len: int | None = None,
                             then: Callable[[], object] | None = None) -> bool:
        """Submitted now, so it goes out before any later command of this instance (the
        batcher keeps their order), and `then` runs when Redis answered it, in the order
        submitted (a batch's answers are handed out in order), failed or not. An earlier append
        to `key` that failed is raised here (or by `stream_appended`), as no caller waited for
        it. False while the batcher is behind (`NOWAIT_BACKLOG`): then the caller waits, which
        slows its turn as waiting did."""
        failure = self._append_failures.pop(key, None)
        if failure is not None:
            raise failure
        if self._commands.backlog >= NOWAIT_BACKLOG:
            return False
        appending = self._appending[key] = self._command("xadd", self.prefix + key, entry, maxlen=max_len,
                                                         approximate=True)
        appending.add_done_callback(lambda done: self._appended(key, done, then))
        return True

    def _appended(self, key: str, done: "asyncio.Future[Any]", then: Callable[[], object] | None) -> None:
        if self._appending.get(key) is done:
            del self._appending[key]
        if done.cancelled():
            return
        # A failed append's frame is delivered too: Redis is away, so no resume could read the
        # replay anyway, the reply fails at its next append (below), and its end, sent to this
        # instance's devices whatever the bus, covers this frame's text.
        if then is not None:
            then()
        failure = done.exception()
        if failure is not None and key not in self._append_failures:
            if len(self._append_failures) >= MAX_FAILED_APPENDS:  # an outage: nobody asks for most
                self._append_failures.clear()
            self._append_failures[key] = failure

    async def stream_appended(self, key: str) -> None:
        appending = self._appending.get(key)
        if appending is not None:
            await asyncio.wait([appending])
        failure = self._append_failures.pop(key, None)
        if failure is not None:
            raise failure

    async def stream_read(self, key: str) -> list[Entry]:
        # Decoded (see `get`), and XRANGE answers a list, empty for a missing key: redis-py's
        # `bytes | str` and `| None` are for other settings and commands.
        entries = cast("list[tuple[str, Entry]]", await self._command("xrange", self.prefix + key))
        return [fields for _, fields in entries]

    async def stream_restart(self, key: str, entry: Entry, ttl: float, *,
                             finished: tuple[str, str]) -> list[Entry]:
        entries = await self._script(self._stream_restart, [self.prefix + key],
                                     [milliseconds(ttl), *finished, *fields(entry)])
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
