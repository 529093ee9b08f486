"""The scheduler core: repeats on the wall clock of a zone (month ends, leap years, daylight-saving
changes in New York and Berlin), cron, the lateness policy, and the due loop on a manual clock."""
import asyncio
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from gateway.clock import ManualClock, SystemClock, rfc3339
from gateway.context import Context
from gateway.schedule import DueLoop, Repeat, judge_lateness, localize, next_occurrence, zone_named

UTC = timezone.utc
NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")
SHANGHAI = ZoneInfo("Asia/Shanghai")


def local(zone, *fields):
    return localize(datetime(*fields), zone)


def series(repeat, anchor, zone, count):
    """`anchor` and the `count - 1` occurrences after it, as local wall times."""
    instants = [anchor]
    for _ in range(count - 1):
        instants.append(next_occurrence(repeat, anchor, instants[-1], zone))
    return [instant.astimezone(zone).replace(tzinfo=None) for instant in instants]


def test_monthly_keeps_the_anchor_day_through_short_months():
    anchor = local(SHANGHAI, 2026, 1, 31, 8, 0)
    days = [(w.month, w.day, w.hour) for w in series("monthly", anchor, SHANGHAI, 6)]
    assert days == [(1, 31, 8), (2, 28, 8), (3, 31, 8), (4, 30, 8), (5, 31, 8), (6, 30, 8)]


def test_monthly_in_a_leap_year_and_from_the_29th_of_february():
    anchor = local(BERLIN, 2028, 1, 30, 12, 0)
    assert [(w.month, w.day) for w in series("monthly", anchor, BERLIN, 3)] == [(1, 30), (2, 29), (3, 30)]
    leap_day = local(BERLIN, 2028, 2, 29, 12, 0)
    assert [(w.month, w.day) for w in series("monthly", leap_day, BERLIN, 3)] == [(2, 29), (3, 29), (4, 29)]
    # Once a year on the 29th of February: cron, read on the wall clock.
    nxt = next_occurrence(Repeat("cron", cron="0 9 29 2 *"), leap_day, leap_day, BERLIN)
    assert nxt.astimezone(BERLIN).replace(tzinfo=None) == datetime(2032, 2, 29, 9, 0)


def test_daily_stays_at_nine_local_across_both_changes_in_new_york():
    anchor = local(NEW_YORK, 2026, 3, 6, 9, 0)  # the clocks go forward on Sunday 8 March 2026
    walls = series("daily", anchor, NEW_YORK, 4)
    assert [w.hour for w in walls] == [9, 9, 9, 9]
    instants = [localize(w, NEW_YORK) for w in walls]
    assert [i.astimezone(UTC).hour for i in instants] == [14, 14, 13, 13]  # EST then EDT
    autumn = local(NEW_YORK, 2026, 10, 31, 9, 0)  # back on Sunday 1 November 2026
    following = next_occurrence("daily", autumn, autumn, NEW_YORK)
    assert following == datetime(2026, 11, 1, 14, 0, tzinfo=UTC)
    assert following - autumn == timedelta(hours=25)


def test_weekly_across_the_berlin_change_keeps_the_wall_time():
    anchor = local(BERLIN, 2026, 3, 22, 9, 30)  # Sunday; summer time starts 29 March
    following = next_occurrence("weekly", anchor, anchor, BERLIN)
    assert following.astimezone(BERLIN).replace(tzinfo=None) == datetime(2026, 3, 29, 9, 30)
    assert following - anchor == timedelta(days=7, hours=-1)


def test_a_wall_time_in_the_spring_gap_fires_at_the_first_valid_instant():
    # 02:30 does not exist in New York on 8 March 2026: 03:00 EDT, the instant the clocks jump.
    assert local(NEW_YORK, 2026, 3, 8, 2, 30) == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
    assert local(BERLIN, 2026, 3, 29, 2, 30) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    anchor = local(NEW_YORK, 2026, 3, 6, 2, 30)
    walls = series("daily", anchor, NEW_YORK, 4)
    assert [(w.day, w.hour, w.minute) for w in walls] == [(6, 2, 30), (7, 2, 30), (8, 3, 0), (9, 2, 30)]
    cron = Repeat("cron", cron="30 2 * * *")
    nxt = next_occurrence(cron, anchor, datetime(2026, 3, 7, 12, 0, tzinfo=UTC), NEW_YORK)
    assert nxt == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)


def test_an_ambiguous_autumn_time_fires_once():
    # 01:30 happens twice in New York on 1 November 2026: the first (EDT) only.
    assert local(NEW_YORK, 2026, 11, 1, 1, 30) == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)
    anchor = local(NEW_YORK, 2026, 10, 31, 1, 30)
    first = next_occurrence("daily", anchor, anchor, NEW_YORK)
    assert first == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)
    second = next_occurrence("daily", anchor, first, NEW_YORK)
    assert second.astimezone(NEW_YORK).replace(tzinfo=None) == datetime(2026, 11, 2, 1, 30)
    cron = Repeat("cron", cron="30 1 * * *")
    assert next_occurrence(cron, anchor, anchor, NEW_YORK) == first
    assert next_occurrence(cron, anchor, first, NEW_YORK) == second
    # Asked from inside the second passing, the one already fired is not fired again.
    assert next_occurrence(cron, anchor, datetime(2026, 11, 1, 6, 15, tzinfo=UTC), NEW_YORK) == second
    # An every-15-minutes cron through Berlin's overlap: each wall time once.
    quarter = Repeat("cron", cron="*/15 * * * *")
    instant = datetime(2026, 10, 25, 0, 0, tzinfo=UTC)  # 02:00 CEST, the first passing
    walls = []
    for _ in range(6):
        instant = next_occurrence(quarter, instant, instant, BERLIN)
        walls.append(instant.astimezone(BERLIN).strftime("%H:%M"))
    assert walls == ["02:15", "02:30", "02:45", "03:00", "03:15", "03:30"]


def test_weekdays_and_cron_in_a_zone():
    anchor = local(SHANGHAI, 2026, 11, 27, 7, 30)  # a Friday
    walls = series(Repeat("weekdays"), anchor, SHANGHAI, 4)
    assert [(w.strftime("%a"), w.hour, w.minute) for w in walls] == [
        ("Fri", 7, 30), ("Mon", 7, 30), ("Tue", 7, 30), ("Wed", 7, 30)]
    weekend = Repeat("weekdays", weekdays=frozenset({5, 6}))
    assert series(weekend, anchor, SHANGHAI, 3)[1:] == [datetime(2026, 11, 28, 7, 30), datetime(2026, 11, 29, 7, 30)]
    cron = Repeat("cron", cron="30 7 * * 1-5")
    assert next_occurrence(cron, anchor, anchor, SHANGHAI) == local(SHANGHAI, 2026, 11, 30, 7, 30)


def test_none_bad_input_and_before_the_anchor():
    anchor = local(SHANGHAI, 2026, 11, 25, 9, 0)
    assert next_occurrence("none", anchor, anchor, SHANGHAI) is None
    assert next_occurrence("daily", anchor, anchor - timedelta(days=3), SHANGHAI) == anchor
    assert next_occurrence("monthly", anchor, anchor - timedelta(days=90), "Asia/Shanghai") == anchor
    for bad in ("hourly", "Daily"):
        with pytest.raises(ValueError, match="unknown repeat"):
            Repeat(bad)
    for expression in ("", "* * *", "61 * * * *", "a b c d e", "0 9 * * * *", "0 0 30 2 *"):
        with pytest.raises(ValueError, match="invalid cron|never occurs"):
            Repeat("cron", cron=expression)
    with pytest.raises(ValueError, match="weekdays"):
        Repeat("weekdays", weekdays=frozenset({7}))
    for name in ("Mars/Olympus", "", " UTC", "../etc/passwd"):
        with pytest.raises(ValueError, match="unknown time zone"):
            zone_named(name)
    with pytest.raises(ValueError):
        next_occurrence("daily", datetime(2026, 1, 1), anchor, SHANGHAI)


def test_lateness_policy():
    due = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
    grace = timedelta(hours=1)
    assert judge_lateness(due, due + timedelta(seconds=2), grace).verdict == "on_time"
    late = judge_lateness(due, due + timedelta(minutes=20), grace)
    assert late.verdict == "late" and late.fires and late.late_by_seconds == 1200
    missed = judge_lateness(due, due + timedelta(hours=3), grace)
    assert missed.verdict == "missed" and not missed.fires
    assert judge_lateness(due, due - timedelta(seconds=5), grace).late_by == timedelta(0)
    assert rfc3339(due) == "2026-11-24T09:00:00.000Z"


async def test_a_manual_clock_wakes_its_sleepers_when_it_moves():
    clock = ManualClock(datetime(2026, 11, 24, 8, 0, tzinfo=UTC))
    wake = asyncio.Event()
    sleeper = asyncio.create_task(clock.sleep_until(datetime(2026, 11, 24, 9, 0, tzinfo=UTC), wake))
    await asyncio.sleep(0.01)
    assert not sleeper.done()
    clock.advance(timedelta(hours=1))
    await asyncio.wait_for(sleeper, 1)
    assert clock.now() == datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
    with pytest.raises(ValueError):
        ManualClock(datetime(2026, 1, 1))
    # The real clock returns at once for a past instant, and early when woken.
    real = SystemClock()
    await asyncio.wait_for(real.sleep_until(real.now() - timedelta(seconds=1), asyncio.Event()), 1)
    woken = asyncio.Event()
    woken.set()
    await asyncio.wait_for(real.sleep_until(real.now() + timedelta(hours=1), woken), 1)


async def test_the_due_loop_fires_at_the_due_instant_and_wakes_early_when_told(make_config):
    context = Context("test", make_config())
    start = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)
    context.clock = clock = ManualClock(start)
    due = [start + timedelta(minutes=30)]
    fired: list[datetime] = []

    async def claim_and_fire():
        now = clock.now()
        for instant in [d for d in due if d <= now]:
            due.remove(instant)
            fired.append(now)
        return min(due, default=None)

    loop = DueLoop(context, "test", claim_and_fire, max_sleep=3600)
    runner = asyncio.create_task(loop.run())
    try:
        await settle(lambda: loop.rounds == 1)
        clock.advance(timedelta(minutes=29))
        await settle(lambda: loop.rounds == 2)
        assert fired == []
        clock.advance(timedelta(minutes=1))
        await settle(lambda: fired == [start + timedelta(minutes=30)])
        # Something new is due sooner than the hour the loop planned to sleep: told, it wakes.
        due.append(clock.now())
        await loop.notify_due(clock.now())
        await settle(lambda: len(fired) == 2)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_a_clock_put_on_a_running_service_wakes_its_due_loop(make_config):
    context = Context("test", make_config())
    seen: list[datetime] = []

    async def claim_and_fire():
        seen.append(context.clock.now())
        return None

    loop = DueLoop(context, "switch", claim_and_fire, max_sleep=3600)
    runner = asyncio.create_task(loop.run())
    try:
        await settle(lambda: loop.rounds == 1)  # asleep for an hour of real time
        context.clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
        await settle(lambda: loop.rounds == 2)
        assert seen[-1] == datetime(2030, 1, 1, tzinfo=UTC)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_the_due_loop_survives_a_failing_round(make_config):
    context = Context("test", make_config())
    context.clock = ManualClock(datetime(2026, 11, 24, 8, 0, tzinfo=UTC))
    calls = []

    async def claim_and_fire():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the database is away")
        return None

    loop = DueLoop(context, "flaky", claim_and_fire, retry_delay=0.05)
    runner = asyncio.create_task(loop.run())
    try:
        await settle(lambda: loop.rounds == 1)
        assert len(calls) == 2
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def settle(condition, timeout: float = 3.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


async def test_notify_due_wakes_the_loops_of_other_instances_over_the_bus(make_config, redis_url, bus_prefix):
    from gateway.redis_bus import RedisBus

    contexts = []
    for _ in range(2):
        context = Context("test", make_config())
        context.bus = RedisBus(redis_url, prefix=bus_prefix)
        context.clock = ManualClock(datetime(2026, 11, 24, 8, 0, tzinfo=UTC))
        contexts.append(context)
    rounds = {0: 0, 1: 0}

    def counting(index):
        async def claim_and_fire():
            rounds[index] += 1
            return None
        return claim_and_fire

    loops = [DueLoop(context, "shared", counting(index), max_sleep=3600) for index, context in enumerate(contexts)]
    other = DueLoop(contexts[1], "someone-else", counting(1), max_sleep=3600)
    runners = [asyncio.create_task(loop.run()) for loop in loops]
    try:
        await settle(lambda: rounds == {0: 1, 1: 1})
        await asyncio.sleep(0.2)  # both subscribed
        await loops[0].notify_due(datetime(2026, 11, 24, 8, 30, tzinfo=UTC))
        await settle(lambda: rounds[1] == 2)  # the other instance woke, its clock unmoved
        await other.notify_due(datetime(2026, 11, 24, 8, 30, tzinfo=UTC))  # another loop's name: ignored
        await asyncio.sleep(0.2)
        assert rounds[1] == 2
    finally:
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        for context in contexts:
            await context.bus.close()
