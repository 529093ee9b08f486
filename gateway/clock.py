"""Time in the core: what "now" is for a service (`Clock`: the real one, or a test's
`ManualClock`, read as `context.clock`), and how times are written: one RFC 3339 form for every
answer, and milliseconds since the epoch for every frame's `timestamp`. Imports nothing of the
gateway, so the context and the scheduler (gateway/schedule.py) both stand on it."""
from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol, overload


def now_ms() -> int:
    return int(time.time() * 1000)


@overload
def rfc3339(instant: datetime, timespec: Literal["seconds", "milliseconds"] = ...) -> str: ...
@overload
def rfc3339(instant: None, timespec: Literal["seconds", "milliseconds"] = ...) -> None: ...


def rfc3339(instant: datetime | None, timespec: Literal["seconds", "milliseconds"] = "milliseconds") -> str | None:
    """`2026-11-24T09:00:00.000Z` (or to the second where the spec shows seconds); None stays None."""
    if instant is None:
        return None
    return instant.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware, in UTC."""
        ...

    async def sleep_until(self, instant: datetime, wake: asyncio.Event) -> None:
        """Return at `instant`, or earlier when `wake` is set (or the clock moves); callers
        check the time again, so an early return is always safe."""
        ...


class SystemClock:
    """The real time."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, instant: datetime, wake: asyncio.Event) -> None:
        seconds = (instant - self.now()).total_seconds()
        if seconds <= 0:
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout=seconds)


class ManualClock:
    """A clock that stands still until a test sets or advances it; sleepers wake when it moves."""

    def __init__(self, start: datetime):
        self._now = aware_utc(start)
        self._sleepers: set[asyncio.Event] = set()

    def now(self) -> datetime:
        return self._now

    def set(self, instant: datetime) -> None:
        self._now = aware_utc(instant)
        for sleeper in list(self._sleepers):
            sleeper.set()

    def advance(self, by: timedelta | float) -> datetime:
        """Move forward by `by` (seconds or a timedelta); returns the new time."""
        self.set(self._now + (by if isinstance(by, timedelta) else timedelta(seconds=by)))
        return self._now

    async def sleep_until(self, instant: datetime, wake: asyncio.Event) -> None:
        if self._now >= instant:
            return
        self._sleepers.add(wake)
        try:
            await wake.wait()
        finally:
            self._sleepers.discard(wake)


def aware_utc(instant: datetime) -> datetime:
    """`instant` in UTC; a naive one is refused, since its zone would be a guess."""
    if instant.tzinfo is None:
        raise ValueError("a clock needs a timezone-aware datetime")
    return instant.astimezone(UTC)
