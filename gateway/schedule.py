"""Time for features that act at a moment: the next instant of a repeat in a person's time
zone, the lateness policy, and the due loop that wakes when something is due.

- What "now" is comes from the service's clock (`context.clock`, gateway/clock.py): the real
  time, or a test's `ManualClock`, whose moves wake whatever sleeps on it, so no test waits.
- `next_occurrence(repeat, anchor, after, zone)`: the first instant of the repeat strictly
  after `after`, in UTC. Repeats are computed on the wall clock of `zone` from the `anchor` (the
  first occurrence), never from the previous occurrence: a monthly reminder set on the 31st falls
  on the 30th in a 30-day month and on the 31st again after, and a 09:00 daily one stays 09:00
  local across a daylight-saving change. A wall time that does not exist (the spring gap) fires
  at the first valid instant after it; an ambiguous one (the autumn overlap) fires once, at its
  first passing.
- `judge_lateness(due, now, grace)`: on time, late (within the grace window: act, and say so),
  or missed (older: skip, and record it).
- `DueLoop`: sleeps until the next due instant and calls the owner's `claim_and_fire()`, which
  claims its due rows in PostgreSQL (`FOR UPDATE SKIP LOCKED`) so that each fires once however
  many instances run. `notify_due(instant)` wakes every instance's loop early (over the bus)."""
from __future__ import annotations

import asyncio
import calendar
import contextlib
import logging
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from typing import TYPE_CHECKING, Awaitable, Callable, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .clock import aware_utc

if TYPE_CHECKING:
    from .bus import Subscription
    from .context import Context

log = logging.getLogger("gateway.schedule")

UTC = timezone.utc
# The instants the scheduler takes, 1970-01-01T00:00:00Z to 9998-12-31T23:59:59Z: each can be
# shown on the clocks of every zone (a year-1 or year-9999 one cannot: OverflowError) and its
# lateness, in seconds, fits the 32-bit columns that record it until 2038 (`MAX_LATE_SECONDS`).
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(9998, 12, 31, 23, 59, 59, tzinfo=UTC)
MAX_LATE_SECONDS = 2**31 - 1


# ---------------------------------------------------------------- zones and wall times

def zone_named(name: str) -> ZoneInfo:
    """The IANA zone `name`; ValueError naming it when there is no such zone."""
    try:
        if not name or name != name.strip():
            raise ValueError
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ValueError(f"unknown time zone {name!r}: use an IANA name such as Asia/Shanghai "
                         f"or America/New_York") from None


def check_instant(instant: datetime) -> datetime:
    """`instant` when the scheduler takes it (`EARLIEST_INSTANT` to `LATEST_INSTANT`); a
    ValueError saying the range otherwise."""
    if not EARLIEST_INSTANT <= instant <= LATEST_INSTANT:
        raise ValueError("the time is outside the years 1970 to 9998 (UTC) that can be scheduled")
    return instant


def localize(wall: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant at which the clocks of `zone` show the naive `wall` time. A time the
    clocks skip (the spring gap) becomes the first instant after the gap; a time they show
    twice (the autumn overlap) its first passing. ValueError for a wall time whose instant is
    outside what a datetime holds (year 1 east of UTC, year 9999 west of it)."""
    try:
        return _localize(wall, zone)
    except OverflowError:
        raise ValueError("the time is outside the years 1970 to 9998 (UTC) that can be scheduled") from None


def _localize(wall: datetime, zone: ZoneInfo) -> datetime:
    first = wall.replace(tzinfo=zone, fold=0)
    instant = first.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) == wall:
        return instant  # exists (and fold=0 is the first of two, when ambiguous)
    # In the gap: fold=0 reads the wall time with the offset before the change, fold=1 with the
    # one after; the change lies between the two instants. Find it to the second.
    low = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    high = instant
    if low > high:
        low, high = high, low
    after_offset = high.astimezone(zone).utcoffset()
    while (high - low) > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).utcoffset() == after_offset:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


# ---------------------------------------------------------------- repeats

RepeatKind = Literal["none", "daily", "weekly", "monthly", "weekdays", "cron"]
REPEAT_KINDS: tuple[str, ...] = ("none", "daily", "weekly", "monthly", "weekdays", "cron")
MONDAY_TO_FRIDAY = frozenset(range(5))


@dataclass(frozen=True)
class Repeat:
    """How something repeats. `weekdays`: the days (0 Monday … 6 Sunday) of a `weekdays`
    repeat, Monday to Friday when empty; `cron`: a five-field expression read on the wall clock
    of the zone (`cron` kind)."""
    kind: str = "none"
    weekdays: frozenset[int] = field(default_factory=frozenset)
    cron: str = ""

    def __post_init__(self) -> None:
        if self.kind not in REPEAT_KINDS:
            raise ValueError(f"unknown repeat {self.kind!r}: one of {', '.join(REPEAT_KINDS)}")
        if any(day not in range(7) for day in self.weekdays):
            raise ValueError("weekdays are 0 (Monday) to 6 (Sunday)")
        if self.kind == "cron":
            check_cron(self.cron)


def check_cron(expression: str) -> None:
    """ValueError when `expression` is no five-field cron expression, or names no date."""
    from croniter import CroniterBadDateError, croniter

    if not isinstance(expression, str) or len(expression.split()) != 5 or not croniter.is_valid(expression):
        raise ValueError(f"invalid cron expression {expression!r}: five fields, minute hour day-of-month "
                         f"month day-of-week, e.g. '30 7 * * 1-5'")
    try:  # valid fields may still name no date at all ("0 0 30 2 *": the 30th of February)
        croniter(expression, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        raise ValueError(f"cron expression {expression!r} never occurs") from None


def _days_in_month(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def _month_shift(day: date, months: int, anchor_day: int) -> date:
    index = day.year * 12 + (day.month - 1) + months
    year, month = divmod(index, 12)
    month += 1
    return date(year, month, min(anchor_day, _days_in_month(year, month)))


# Far enough for any real repeat (a cron for 29 February of a weekday waits up to 28 years).
_MAX_STEPS = 20000


def next_occurrence(repeat: Repeat | str, anchor: datetime, after: datetime, zone: ZoneInfo | str) -> datetime | None:
    """The first occurrence of `repeat` strictly after `after`, in UTC; None for `none`.

    `anchor` is the first occurrence (aware): its wall time in `zone` gives the time of day, its
    date the day of the month (kept when a month is shorter) or of the week."""
    if isinstance(repeat, str):
        repeat = Repeat(repeat)
    if isinstance(zone, str):
        zone = zone_named(zone)
    anchor, after = aware_utc(anchor), aware_utc(after)
    if repeat.kind == "none":
        return None
    local_anchor = anchor.astimezone(zone).replace(tzinfo=None)
    wall_time = local_anchor.time()
    if repeat.kind == "cron":
        return _next_cron(repeat.cron, after, zone)
    after_day = after.astimezone(zone).date()
    if repeat.kind == "monthly":
        months = max(0, (after_day.year - local_anchor.year) * 12 + after_day.month - local_anchor.month - 1)
        for step in range(months, months + 30):
            candidate = _at(_month_shift(local_anchor.date(), step, local_anchor.day), wall_time, zone)
            if candidate > after:
                return candidate
        return None  # unreachable: a month always has the day (clamped)
    if repeat.kind in ("daily", "weekly"):
        period = 1 if repeat.kind == "daily" else 7
        # Start a period before `after`'s local day: the wall time there may still be ahead.
        days = max(0, (after_day - local_anchor.date()).days - period)
        days -= days % period
        for step in range(days, days + 3 * period + 2, period):
            candidate = _at(local_anchor.date() + timedelta(days=step), wall_time, zone)
            if candidate > after:
                return candidate
        return None  # unreachable
    weekdays = repeat.weekdays or MONDAY_TO_FRIDAY
    day = max(after_day - timedelta(days=1), local_anchor.date())
    for _ in range(15):
        if day.weekday() in weekdays:
            candidate = _at(day, wall_time, zone)
            if candidate > after and candidate >= anchor:
                return candidate
        day += timedelta(days=1)
    return None  # unreachable


def _at(day: date, wall_time: time, zone: ZoneInfo) -> datetime:
    return localize(datetime.combine(day, wall_time), zone)


def _next_cron(expression: str, after: datetime, zone: ZoneInfo) -> datetime | None:
    """Cron read on the wall clock: croniter walks naive local times (no DST to trip on) and
    `localize` places each; a wall time seen twice is taken once, the first time."""
    from croniter import CroniterBadDateError, croniter

    # An hour back: an occurrence in an autumn overlap may come after `after` on the clock face.
    start = after.astimezone(zone).replace(tzinfo=None) - timedelta(hours=1, seconds=1)
    walker = croniter(expression, start)
    for _ in range(_MAX_STEPS):
        try:
            wall = walker.get_next(datetime)
        except CroniterBadDateError:  # no date left (an expression checked by check_cron has one)
            return None
        candidate = localize(wall, zone)
        if candidate > after:
            return candidate
    return None


# ---------------------------------------------------------------- lateness

@dataclass(frozen=True)
class Lateness:
    """`on_time`: fired within `punctual` of its due time; `late`: after that but within the
    grace window (fire, and say by how much); `missed`: older (skip it, and record that)."""
    verdict: Literal["on_time", "late", "missed"]
    late_by: timedelta

    @property
    def fires(self) -> bool:
        return self.verdict != "missed"

    @property
    def late_by_seconds(self) -> int:
        """At most `MAX_LATE_SECONDS`, so it always fits a 32-bit column."""
        return min(int(self.late_by.total_seconds()), MAX_LATE_SECONDS)


DEFAULT_PUNCTUAL = timedelta(seconds=60)


def judge_lateness(due: datetime, now: datetime, grace: timedelta,
                   punctual: timedelta = DEFAULT_PUNCTUAL) -> Lateness:
    late_by = max(timedelta(0), now - due)
    if late_by <= punctual:
        return Lateness("on_time", late_by)
    if late_by <= grace:
        return Lateness("late", late_by)
    return Lateness("missed", late_by)


# ---------------------------------------------------------------- the due loop

ClaimAndFire = Callable[[], Awaitable["datetime | None"]]
DUE_CHANNEL = "schedule.due"


class DueLoop:
    """Runs `claim_and_fire()` whenever something may be due, on every instance.

    `claim_and_fire()` fires what is due now (claiming rows with `FOR UPDATE SKIP LOCKED`, so two
    instances never fire the same one) and returns the next due instant it knows of, or None.
    The loop then sleeps until that instant, at most `max_sleep` seconds of the clock (so an
    instance that missed a wake-up, or a row another instance changed, is looked at again), or
    until `notify_due` says something sooner is due. A failing call is logged and retried after
    `retry_delay` seconds."""

    def __init__(self, context: "Context", name: str, claim_and_fire: ClaimAndFire, *,
                 max_sleep: float = 60.0, retry_delay: float = 5.0):
        self.context = context
        self.name = name
        self.claim_and_fire = claim_and_fire
        self.max_sleep = max_sleep
        self.retry_delay = retry_delay
        self._wake = asyncio.Event()
        self._planned: datetime | None = None
        self._subscription: Subscription | None = None
        self.rounds = 0  # how many times claim_and_fire ran (tests and logs)
        context.on_clock_change(self._wake.set)

    async def notify_due(self, instant: datetime) -> None:
        """Something is due at `instant`: wake this instance's loop, and the other instances'
        (over the bus), if they planned to sleep past it."""
        self._consider(aware_utc(instant))
        if self.context.has("bus") and getattr(self.context.bus, "shared", False):
            await self.context.bus.publish(DUE_CHANNEL, {"loop": self.name, "due": aware_utc(instant).isoformat()})

    def _consider(self, instant: datetime) -> None:
        if self._planned is None or instant < self._planned:
            self._wake.set()

    async def _on_bus(self, message: dict) -> None:
        if message.get("loop") != self.name:
            return
        with contextlib.suppress(KeyError, TypeError, ValueError):
            self._consider(datetime.fromisoformat(message["due"]))

    async def run(self) -> None:
        """The loop; start it as a plugin job (`registrar.job`). Runs until cancelled."""
        bus = self.context.bus if self.context.has("bus") else None
        if bus is not None and getattr(bus, "shared", False):
            self._subscription = await bus.subscribe(DUE_CHANNEL, self._on_bus)
        try:
            while True:
                self._wake.clear()
                clock = self.context.clock
                try:
                    next_due = await self.claim_and_fire()
                    self.rounds += 1
                    ceiling = clock.now() + timedelta(seconds=self.max_sleep)
                    self._planned = min(next_due, ceiling) if next_due is not None else ceiling
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("scheduler %s: claim_and_fire failed; retrying in %.0fs", self.name,
                                  self.retry_delay)
                    self._planned = clock.now() + timedelta(seconds=self.retry_delay)
                    # A failure (the database away) is retried in real seconds, whatever the clock.
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout=self.retry_delay)
                    continue
                await clock.sleep_until(self._planned, self._wake)
        finally:
            if self._subscription is not None:
                await self._subscription.close()
                self._subscription = None
