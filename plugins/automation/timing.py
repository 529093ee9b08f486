"""When a time trigger is due: parsing what a person writes (an instant, a time of day, a cron
expression) and the next instant of a trigger after a given one, in UTC. The arithmetic of
repeats across time zones and daylight-saving changes is the scheduler core's
(gateway/schedule.py); this module only maps a trigger's fields onto it."""
from __future__ import annotations

import re
import zoneinfo
from datetime import datetime, time, timedelta, timezone

_CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)\Z")
WEEKDAY_NUMBERS = {"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}


def parse_clock(text: str) -> time:
    match = _CLOCK.match(text or "")
    if not match:
        raise ValueError(f"{text!r} is not a time of day as HH:MM (24-hour)")
    return time(int(match.group(1)), int(match.group(2)))


def parse_instant(text: str, zone: str) -> datetime:
    """ISO 8601; without an offset the time is read in `zone`."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise ValueError(f"{text!r} is not an ISO 8601 date and time (e.g. 2026-12-01T08:00:00+08:00)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zoneinfo.ZoneInfo(zone))
    return moment.astimezone(timezone.utc)


def parse_cron(expression: str) -> None:
    from croniter import croniter

    if len(expression.split()) != 5 or not croniter.is_valid(expression):
        raise ValueError(f"{expression!r} is not a five-field cron expression (minute hour day month weekday)")


def utc(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc)


def next_after(trigger: dict, zone: str, after: datetime) -> datetime | None:
    """The first instant of the trigger strictly after `after`, in UTC; None when a one-off
    instant has passed."""
    zone = trigger.get("timezone") or zone
    if trigger.get("at"):
        instant = parse_instant(trigger["at"], zone)
        return instant if instant > after else None
    tz = zoneinfo.ZoneInfo(zone)
    if trigger.get("cron"):
        from croniter import croniter

        return utc(croniter(trigger["cron"], after.astimezone(tz)).get_next(datetime))
    clock = parse_clock(trigger["time"])
    weekdays = {WEEKDAY_NUMBERS[day] for day in trigger.get("weekdays") or WEEKDAY_NUMBERS}
    day = after.astimezone(tz).date()
    for _ in range(9):
        if day.weekday() in weekdays:
            candidate = datetime.combine(day, clock, tzinfo=tz)
            if candidate > after:
                return utc(candidate)
        day += timedelta(days=1)
    return None


def first_run(trigger: dict, zone: str, now: datetime) -> datetime | None:
    return next_after(trigger, zone, now)
