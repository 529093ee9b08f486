"""When a time trigger is due: reading what a person writes (an instant, a time of day, a cron
expression) and mapping a trigger onto the scheduler core's repeats (gateway/schedule.py), which
does the arithmetic on the wall clock of the zone, across daylight-saving changes."""
from __future__ import annotations

import re
from datetime import datetime, time

from gateway.schedule import Repeat, check_cron, check_instant, localize, next_occurrence, zone_named

_CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)\Z")
WEEKDAY_NUMBERS = {"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}


def parse_clock(text: str) -> time:
    match = _CLOCK.match(text or "")
    if not match:
        raise ValueError(f"{text!r} is not a time of day as HH:MM (24-hour)")
    return time(int(match.group(1)), int(match.group(2)))


def parse_instant(text: str, zone: str) -> datetime:
    """ISO 8601; without an offset the wall time is read in `zone`. Within the scheduler's years
    (1970 to 9998 UTC, `gateway.schedule.check_instant`): so the wall time of a rule that names
    no zone, checked in UTC, can be placed in any person's zone later (`next_after`)."""
    return check_instant(_instant(text, zone))


def _instant(text: str, zone: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise ValueError(f"{text!r} is not an ISO 8601 date and time (e.g. 2026-12-01T08:00:00+08:00)") from None
    try:
        if moment.tzinfo is None:
            return localize(moment, zone_named(zone))
        return moment.astimezone(zone_named("UTC"))
    except OverflowError:  # an offset that takes year 1 or 9999 out of a datetime
        raise ValueError("the time is outside the years 1970 to 9998 (UTC) that can be scheduled") from None


def parse_cron(expression: str) -> None:
    check_cron(expression)


def check_zone(name: str) -> None:
    zone_named(name)


def next_after(trigger: dict, zone: str, after: datetime) -> datetime | None:
    """The first instant of the trigger strictly after `after`, in UTC; None when a one-off
    instant has passed."""
    zone = trigger.get("timezone") or zone
    if trigger.get("at"):
        instant = _instant(trigger["at"], zone)  # checked by parse_instant when the rule was saved
        return instant if instant > after else None
    tz = zone_named(zone)
    if trigger.get("cron"):
        return next_occurrence(Repeat("cron", cron=trigger["cron"]), after, after, tz)
    # The anchor only carries the time of day: today's wall clock at that time.
    anchor = localize(datetime.combine(after.astimezone(tz).date(), parse_clock(trigger["time"])), tz)
    if trigger["repeat"] == "daily":
        return next_occurrence("daily", anchor, after, tz)
    days = frozenset(WEEKDAY_NUMBERS[day] for day in trigger["weekdays"])
    return next_occurrence(Repeat("weekdays", weekdays=days), anchor, after, tz)
