"""Reminders firing on the injected clock: to every device of the person and no one else's, once
with two gateway instances sharing PostgreSQL and Redis, after a restart late (within the grace
window) or skipped (beyond it), and repeating across month ends and daylight-saving changes."""
from datetime import datetime, timedelta

from gateway.clock import ManualClock
from gateway.context import get_context
from gateway.database import execute, fetch_all
from tests.notifications.devices import device_away, device_known, nothing_arrives, until

from .conftest import START, UTC


async def occurrences(gateway, reminder_id):
    return (await gateway.call("GET", f"/reminders/{reminder_id}/occurrences"))["occurrences"]


async def test_a_reminder_due_in_seconds_reaches_both_devices_of_its_person_only(gateway):
    reminder = await gateway.create(title="Take the pizza out", description="", remind_at="2026-11-24T14:00:30+08:00",
                                    session_id="session_kitchen")
    async with gateway.ws("alice", "phone") as phone, gateway.ws("alice", "laptop") as laptop, \
            gateway.ws("bob", "bobs-phone") as bob:
        await device_known(gateway.app, "user_bob", "bobs-phone")
        gateway.clock.advance(29)
        await nothing_arrives(phone, 0.2)
        gateway.clock.advance(1)
        frames = [await phone.receive_json(timeout=5), await laptop.receive_json(timeout=5)]
        for frame in frames:
            assert frame["type"] == "notification"
            notification = frame["notification"]
            assert notification["type"] == "reminder" and notification["title"] == "Take the pizza out"
            assert notification["body"] == "Take the pizza out"
            assert notification["timestamp"] == "2026-11-24T06:00:30.000Z"
            assert notification["data"] == {"reminder_id": reminder["id"], "remind_at": "2026-11-24T14:00:30+08:00",
                                            "repeat_type": "none", "session_id": "session_kitchen", "late": False,
                                            "late_by": 0}
        assert frames[0] == frames[1]
        await nothing_arrives(bob)
        await nothing_arrives(phone, 0.1)
    fired = await gateway.until_reminder(reminder["id"], lambda r: r["notified"])
    assert fired["status"] == "pending" and fired["next_run_at"] is None
    assert fired["last_fired_at"] == "2026-11-24T06:00:30.000Z"
    assert [o["outcome"] for o in await occurrences(gateway, reminder["id"])] == ["fired"]
    # It is in the inbox too.
    inbox = await gateway.call("GET", "/notifications")
    assert [n["data"]["reminder_id"] for n in inbox["notifications"]] == [reminder["id"]]
    assert (await gateway.call("GET", "/notifications", "bob"))["total"] == 0


async def test_two_instances_fire_each_reminder_exactly_once(make_gateway, redis_url, bus_prefix):
    clock = ManualClock(START)
    shared = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    first = await make_gateway(clock, shared)
    second = await make_gateway(clock, shared)
    ids = set()
    for index in range(12):
        instance = first if index % 2 else second
        ids.add((await instance.create(title=f"r{index}", remind_at="2026-11-24T14:01:00+08:00"))["id"])
    async with second.ws("alice", "phone") as phone, first.ws("alice", "laptop") as laptop:
        await device_known(second.app, "user_alice", "phone")
        await device_known(first.app, "user_alice", "laptop")
        clock.advance(60)
        for device in (phone, laptop):
            seen = [await device.receive_json(timeout=5) for _ in range(12)]
            assert {frame["notification"]["data"]["reminder_id"] for frame in seen} == ids
            await nothing_arrives(device, 0.5)
    rows = await fetch_all(get_context(first.app).db, "SELECT reminder_id, outcome FROM reminder_occurrences")
    assert sorted(row["reminder_id"] for row in rows) == sorted(ids)
    assert {row["outcome"] for row in rows} == {"fired"}
    assert (await first.call("GET", "/notifications"))["total"] == 12
    # Both schedulers ran (each may have claimed some); neither fired anything twice.
    assert len(rows) == 12


async def test_a_restart_fires_late_within_the_grace_window_and_skips_beyond(make_gateway):
    clock = ManualClock(START)
    before = await make_gateway(clock)
    soon = await before.create(title="Stretch", remind_at="2026-11-24T14:10:00+08:00")
    chinese = await before.create(title="喝水", remind_at="2026-11-24T14:20:00+08:00")
    daily = await before.create(title="Pills", remind_at="2026-11-24T14:10:00+08:00", repeat_type="daily")
    async with before.ws("alice", "phone"):
        await device_known(before.app, "user_alice", "phone")
    await device_away(before.app, "user_alice", "phone")
    await before.client.close()  # every instance down
    # Back 20 minutes after they were due: within the hour of grace, both fire, saying how late.
    clock.set(START + timedelta(minutes=30))
    after = await make_gateway(clock)
    late = await after.until_reminder(soon["id"], lambda r: r["notified"])
    assert late["last_fired_at"] == "2026-11-24T06:30:00.000Z"
    [occurrence] = await occurrences(after, soon["id"])
    assert occurrence["outcome"] == "fired_late" and occurrence["late_by_seconds"] == 1200
    repeated = await after.until_reminder(daily["id"], lambda r: r["remind_at"].startswith("2026-11-25"))
    assert repeated["remind_at"] == "2026-11-25T14:10:00+08:00" and repeated["notified"] is False
    await after.until_reminder(chinese["id"], lambda r: r["notified"])
    inbox = {n["title"]: n for n in (await after.call("GET", "/notifications"))["notifications"]}
    assert {n["data"]["late"] for n in inbox.values()} == {True}
    assert inbox["Stretch"]["data"]["late_by"] == inbox["Pills"]["data"]["late_by"] == 1200
    assert inbox["Stretch"]["body"] == "Stretch (late by 20 min: due at 14:10)"
    assert inbox["喝水"]["body"] == "喝水（晚了 10 分钟：原定 14:20）"
    async with after.ws("alice", "phone") as phone:  # away meanwhile: sent all three on its return
        missed = [await phone.receive_json(timeout=5) for _ in range(3)]
        assert all(frame["missed"] for frame in missed)
    await after.client.close()
    # Down again for three days: the daily one's next occurrence (25 Nov 14:10) is older than the
    # grace window; skipped, recorded, and moved on to the next one after now.
    clock.set(datetime(2026, 11, 27, 12, 0, tzinfo=UTC))  # 20:00 in Shanghai
    again = await make_gateway(clock)
    moved = await again.until_reminder(daily["id"], lambda r: r["remind_at"].startswith("2026-11-28"))
    assert moved["remind_at"] == "2026-11-28T14:10:00+08:00"
    outcomes = [o["outcome"] for o in await occurrences(again, daily["id"])]
    assert outcomes == ["skipped", "fired_late"]
    assert (await again.call("GET", "/notifications"))["total"] == 3  # nothing more was sent


async def test_a_one_off_reminder_long_overdue_is_skipped_not_sent(make_gateway):
    clock = ManualClock(START)
    gateway = await make_gateway(clock, grace_seconds=600)
    reminder = await gateway.create(title="Old", remind_at="2026-11-24T13:00:00+08:00")  # an hour ago
    await until(lambda: _has_occurrence(gateway, reminder["id"]))
    [occurrence] = await occurrences(gateway, reminder["id"])
    assert occurrence["outcome"] == "skipped" and occurrence["late_by_seconds"] == 3600
    stored = await gateway.reminder(reminder["id"])
    assert stored["notified"] is False and stored["next_run_at"] is None and stored["status"] == "pending"
    assert (await gateway.call("GET", "/notifications"))["total"] == 0


async def _has_occurrence(gateway, reminder_id) -> bool:
    return bool(await occurrences(gateway, reminder_id))


async def fire_next(gateway, reminder_id):
    """Move the clock to the reminder's next occurrence and wait until it has moved on."""
    current = await gateway.reminder(reminder_id)
    due = datetime.fromisoformat(current["next_run_at"])
    gateway.clock.set(due)
    return await gateway.until_reminder(reminder_id, lambda r: r["remind_at"] != current["remind_at"])


async def test_monthly_repeats_keep_the_31st_through_short_months(make_gateway):
    gateway = await make_gateway(ManualClock(datetime(2027, 1, 30, 0, 0, tzinfo=UTC)))
    reminder = await gateway.create(title="Rent", remind_at="2027-01-31T09:00", repeat_type="monthly",
                                    timezone="Europe/Berlin")
    seen = []
    for _ in range(4):
        seen.append((await fire_next(gateway, reminder["id"]))["remind_at"])
    assert seen == ["2027-02-28T09:00:00+01:00", "2027-03-31T09:00:00+02:00", "2027-04-30T09:00:00+02:00",
                    "2027-05-31T09:00:00+02:00"]
    assert [o["outcome"] for o in await occurrences(gateway, reminder["id"])] == ["fired"] * 4


async def test_a_daily_reminder_stays_at_nine_local_across_the_dst_change(make_gateway):
    gateway = await make_gateway(ManualClock(datetime(2026, 3, 6, 12, 0, tzinfo=UTC)))
    reminder = await gateway.create(title="Walk", remind_at="2026-03-07T09:00", repeat_type="daily",
                                    timezone="America/New_York")
    async with gateway.ws("alice", "phone") as phone:
        await device_known(gateway.app, "user_alice", "phone")
        stamps = []
        for _ in range(3):
            await fire_next(gateway, reminder["id"])
            stamps.append((await phone.receive_json(timeout=5))["notification"]["timestamp"])
    # 09:00 EST is 14:00 UTC; from 8 March, 09:00 EDT is 13:00 UTC.
    assert stamps == ["2026-03-07T14:00:00.000Z", "2026-03-08T13:00:00.000Z", "2026-03-09T13:00:00.000Z"]
    assert (await gateway.reminder(reminder["id"]))["remind_at"] == "2026-03-10T09:00:00-04:00"


async def test_a_snoozed_repeating_reminder_keeps_its_series(gateway):
    reminder = await gateway.create(title="Pills", remind_at="2026-11-24T14:00:30+08:00", repeat_type="daily")
    await fire_next(gateway, reminder["id"])
    moved = await gateway.call("PUT", f"/reminders/{reminder['id']}",
                               json={"remind_at": "2026-11-24T15:00:00+08:00", "snooze": True})
    assert moved["reminder"]["remind_at"] == "2026-11-24T15:00:00+08:00"
    after = await fire_next(gateway, reminder["id"])
    assert after["remind_at"] == "2026-11-25T14:00:30+08:00"  # the series' own time again


async def test_a_row_that_cannot_be_fired_does_not_hold_up_the_others(gateway):
    broken = await gateway.create(title="Broken", remind_at="2026-11-24T14:00:10+08:00")
    fine = await gateway.create(title="Fine", remind_at="2026-11-24T14:00:20+08:00")
    # Its stored zone corrupted (no such zone any more, say, after an operator's edit).
    await execute(get_context(gateway.app).db, "UPDATE reminders SET timezone = 'Mars/Olympus' WHERE id = %s",
                  (broken["id"],))
    async with gateway.ws("alice", "phone") as phone:
        await device_known(gateway.app, "user_alice", "phone")
        gateway.clock.advance(30)
        frame = await phone.receive_json(timeout=5)
        assert frame["notification"]["data"]["reminder_id"] == fine["id"]
    row = await fetch_all(get_context(gateway.app).db, "SELECT next_run_at FROM reminders WHERE id = %s",
                          (broken["id"],))
    assert row[0]["next_run_at"] == START + timedelta(seconds=30) + timedelta(minutes=5)  # tried again later


async def test_a_stored_year_one_reminder_is_skipped_once_not_retried_forever(gateway):
    """Stored before times were bounded: its lateness (2025 years in seconds) overflowed the
    occurrence's integer column, and the row was retried every 300 s with a traceback, forever."""
    reminder = await gateway.create(title="Ancient", remind_at="2026-11-24T14:00:10+08:00")
    await execute(get_context(gateway.app).db, "UPDATE reminders SET remind_at = %s, repeat_anchor = %s, "
                  "next_run_at = %s WHERE id = %s", (datetime(1, 1, 1, tzinfo=UTC),) * 3 + (reminder["id"],))
    gateway.clock.advance(1)
    done = await gateway.until_reminder(reminder["id"], lambda r: r["next_run_at"] is None)
    assert done["status"] == "pending" and not done["notified"]
    [skipped] = await occurrences(gateway, reminder["id"])
    assert skipped["outcome"] == "skipped" and skipped["late_by_seconds"] == 2**31 - 1


async def test_a_reminder_that_keeps_failing_is_marked_failed(gateway):
    """Tried three times, five minutes apart, then `failed` and left alone; a new time revives it."""
    broken = await gateway.create(title="Broken", remind_at="2026-11-24T14:00:10+08:00")
    db = get_context(gateway.app).db
    await execute(db, "UPDATE reminders SET timezone = 'Mars/Olympus' WHERE id = %s", (broken["id"],))

    async def state():
        [row] = await fetch_all(db, "SELECT status, next_run_at FROM reminders WHERE id = %s", (broken["id"],))
        return row
    gateway.clock.advance(10)
    await until(lambda: _is(state(), next_run_at=START + timedelta(seconds=10, minutes=5)))
    gateway.clock.advance(timedelta(minutes=5))
    await until(lambda: _is(state(), next_run_at=START + timedelta(seconds=10, minutes=10)))
    gateway.clock.advance(timedelta(minutes=5))
    await until(lambda: _is(state(), status="failed", next_run_at=None))
    outcomes = await fetch_all(db, "SELECT outcome FROM reminder_occurrences WHERE reminder_id = %s", (broken["id"],))
    assert [o["outcome"] for o in outcomes] == ["failed"] * 3
    gateway.clock.advance(timedelta(hours=1))
    await until(lambda: _is(state(), status="failed", next_run_at=None))
    # Its zone repaired, it is listed as failed; a new time makes it pending again.
    await execute(db, "UPDATE reminders SET timezone = 'Asia/Shanghai' WHERE id = %s", (broken["id"],))
    assert (await gateway.call("GET", "/reminders", params={"status": "failed"}))["total"] == 1
    revived = (await gateway.call("PUT", f"/reminders/{broken['id']}",
                                  json={"remind_at": "2026-11-24T16:00:00+08:00"}))["reminder"]
    assert revived["status"] == "pending" and revived["next_run_at"] == "2026-11-24T08:00:00.000Z"
    assert (await gateway.call("GET", "/reminders", params={"status": "failed"}))["total"] == 0


async def _is(row, **expected) -> bool:
    found = await row
    return all(found[key] == value for key, value in expected.items())
