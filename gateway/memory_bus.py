"""The in-process bus (see bus.py): for a single instance, nothing to install; nothing leaves
the process."""
from __future__ import annotations

import builtins
import collections
import json
import time
from typing import Callable, Sequence

from .bus import Bus, Claim, Entry, Record


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

    async def acquire(self, key: str, owner: str, ttl: float, *, marks: Sequence[Claim] = (),
                      present: Sequence[str] = (), absent: Sequence[str] = (),
                      then: Claim | None = None) -> tuple[bool, bool | None]:
        if not await self.set(key, owner, ttl, only_if_absent=True):
            return False, None
        for name, member, mark_ttl in marks:
            await self.mark(name, member, mark_ttl)
        if any(self._live(name) is None for name in present) or any(self._live(name) for name in absent):
            return True, None
        return True, then is None or await self.set(then[0], then[1], then[2], only_if_absent=True)

    async def release_unless(self, key: str, owner: str, mark: str, *,
                             unmark: tuple[str, str] | None = None) -> bool:
        if self._live(mark) is not None:
            del self._values[mark]
            return False
        if unmark is not None:
            await self.unmark(*unmark)
        await self.delete_if(key, owner)
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

    def stream_append_nowait(self, key: str, entry: Entry, *, max_len: int | None = None,
                             then: Callable[[], object] | None = None) -> bool:
        stream = self._streams.get(key)  # runs per frame of a reply: _stream's checks inlined
        if stream is None or (stream.expires is not None and stream.expires <= time.monotonic()):
            stream = self._streams[key] = _Stream()
        stream.entries.append(entry)  # kept as given: entries are built for the call
        if max_len is not None:
            while len(stream.entries) > max_len:
                stream.entries.popleft()
        if then is not None:
            then()
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
