"""Reminders in PostgreSQL, and their firing.

Each pending reminder that has something to fire carries `next_run_at`. The scheduler
(`gateway.schedule.DueLoop`) calls `claim_and_fire` on every gateway instance; each due row is
claimed with `FOR UPDATE SKIP LOCKED` inside one transaction that also pushes the notification
(under an id derived from the reminder and the occurrence, so a retry after a crash never sends it
twice) and stores the reminder's next state: so exactly one instance fires each occurrence, once,
across restarts. What fell due while every instance was down is judged by the lateness policy:
within `grace_seconds` it fires late, saying so; older, it is skipped and recorded; either way a
repeat moves on to its next occurrence after now."""
from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo

import aiopg

from gateway import database, redis_bus
from gateway.context import Context
from gateway.database import execute, fetch_all, fetch_one, fetch_value, transaction
from gateway.errors import BadRequest, Conflict, NotFound
from gateway.clock import rfc3339
from gateway.schedule import DueLoop, Repeat, check_instant, judge_lateness, localize, next_occurrence, zone_named
from gateway.text import HAN
from plugins.auth.contract import PERSON_ZONES
from plugins.notifications.contract import NOTIFICATIONS
from .schemas import ReminderSettings

log = logging.getLogger("plugins.reminders")

_COLUMNS = ("id, user_id, title, description, remind_at, timezone, status, repeat_type, repeat_rule, "
            "repeat_anchor, session_id, notified, next_run_at, last_fired_at, created_at, updated_at, completed_at")
# Notification ids of occurrences: the same reminder and due time always give the same id.
_OCCURRENCE_NAMESPACE = uuid.UUID("0f6f3f4e-5d0b-4c7e-9a53-3c1f1d7d6a10")
_HEX = set("0123456789abcdef")
FALLBACK_ZONE = "UTC"
POISON_RETRY = timedelta(minutes=5)
# Tries at one occurrence that raises (its stored data broken) before the reminder is `failed`.
MAX_FIRE_ATTEMPTS = 3


def _bad_time(text: str, reason: str) -> BadRequest:
    return BadRequest(f"remind_at {text!r} is not an ISO 8601 date and time: {reason}", error_type="invalid_remind_at",
                      hint="Send e.g. 2026-11-25T09:00:00+08:00 (with an offset) or 2026-11-25T09:00 (read in "
                           "the reminder's time zone, by default the person's).")


def parse_remind_at(text: str, zone: ZoneInfo) -> datetime:
    """An ISO 8601 date and time: its own offset, or none read on the clocks of `zone`."""
    stripped = text.strip()
    if len(stripped) < 16 or stripped[10:11] not in ("T", "t", " "):
        raise _bad_time(text, "a date and a time are needed")
    try:
        moment = datetime.fromisoformat(stripped.replace("z", "Z"))
        if moment.tzinfo is None:
            return check_instant(localize(moment, zone))
        return check_instant(moment.astimezone(ZoneInfo("UTC")))
    except (OverflowError, ValueError) as error:
        raise _bad_time(text, str(error)) from None


def _zone(name: str) -> ZoneInfo:
    try:
        return zone_named(name)
    except ValueError as error:
        raise BadRequest(str(error), error_type="invalid_timezone",
                         hint="Use an IANA zone name, e.g. Asia/Shanghai, Europe/Berlin or UTC.") from None


def _repeat(kind: str, rule: str) -> Repeat:
    try:
        return Repeat(kind, cron=rule if kind == "cron" else "")
    except ValueError as error:
        raise BadRequest(str(error), error_type="invalid_repeat",
                         hint="repeat_type cron needs repeat_rule, e.g. '30 7 * * 1-5'.") from None


def _not_found(reminder_id: str) -> NotFound:
    return NotFound(f"No reminder {reminder_id!r}.", error_type="reminder_not_found",
                    hint="List your reminders with GET /api/v1/reminders.")


def _wall(instant: datetime, zone_name: str) -> str:
    try:
        return instant.astimezone(ZoneInfo(zone_name)).isoformat(timespec="seconds")
    except OverflowError:  # a year-9999 row stored before times were bounded: shown in UTC
        return instant.astimezone(ZoneInfo("UTC")).isoformat(timespec="seconds")




def present(row: dict) -> dict:
    """A row as the API shows it."""
    return {"id": row["id"], "user_id": row["user_id"], "title": row["title"], "description": row["description"],
            "remind_at": _wall(row["remind_at"], row["timezone"]), "status": row["status"],
            "repeat_type": row["repeat_type"], "repeat_rule": row["repeat_rule"], "timezone": row["timezone"],
            "session_id": row["session_id"], "notified": row["notified"],
            "next_run_at": rfc3339(row["next_run_at"]), "last_fired_at": rfc3339(row["last_fired_at"]),
            "created_at": rfc3339(row["created_at"]), "updated_at": rfc3339(row["updated_at"]),
            "completed_at": rfc3339(row["completed_at"])}


class Reminders:
    def __init__(self, context: Context, settings: ReminderSettings):
        self.context = context
        self.grace = timedelta(seconds=settings.grace_seconds)
        self.max_pending = settings.max_pending
        self._claimed: tuple[str, datetime] | None = None  # the row being fired and its due time
        self.loop = DueLoop(context, "reminders", self.claim_and_fire, max_sleep=settings.check_interval)

    @property
    def db(self) -> aiopg.Pool:
        return self.context.db

    def now(self) -> datetime:
        return self.context.clock.now()

    async def zone_of(self, user_id: str) -> str:
        """The person's IANA zone (their profile's, docs/auth.md "Time zones"); UTC in a
        service without the auth plugin."""
        zones = self.context.contracts.get(PERSON_ZONES)
        return await zones.zone_of(user_id) if zones is not None else FALLBACK_ZONE

    # -- the API's operations
    async def create(self, user_id: str, body: dict) -> dict:
        zone_name = body.get("timezone") or await self.zone_of(user_id)
        zone = _zone(zone_name)
        remind_at = parse_remind_at(body["remind_at"], zone)
        _repeat(body["repeat_type"], body["repeat_rule"])
        pending = await fetch_value(self.db, "SELECT count(*) FROM reminders WHERE user_id = %s AND status = 'pending'",
                                    (user_id,))
        if pending >= self.max_pending:
            raise Conflict(f"You already keep {pending} pending reminders, the most allowed.",
                           error_type="too_many_reminders", hint="Complete, cancel or delete some first.")
        now = self.now()
        row = {"id": uuid.uuid4().hex, "user_id": user_id, "title": body["title"],
               "description": body["description"], "remind_at": remind_at, "timezone": zone_name,
               "status": "pending", "repeat_type": body["repeat_type"],
               "repeat_rule": body["repeat_rule"] if body["repeat_type"] == "cron" else "",
               "repeat_anchor": remind_at, "session_id": body["session_id"], "notified": False,
               "next_run_at": remind_at, "last_fired_at": None, "created_at": now, "updated_at": now,
               "completed_at": None}
        stored = await fetch_one(self.db, f"""
            INSERT INTO reminders ({_COLUMNS}) VALUES (%(id)s, %(user_id)s, %(title)s, %(description)s,
                %(remind_at)s, %(timezone)s, %(status)s, %(repeat_type)s, %(repeat_rule)s, %(repeat_anchor)s,
                %(session_id)s, %(notified)s, %(next_run_at)s, %(last_fired_at)s, %(created_at)s,
                %(updated_at)s, %(completed_at)s)
            RETURNING {_COLUMNS}""", row)
        assert stored is not None, "INSERT ... RETURNING yields its row"
        await self.loop.notify_due(remind_at)
        return present(stored)

    async def page(self, user_id: str, status: str | None, limit: int, offset: int) -> dict:
        where = "user_id = %(user_id)s" + (" AND status = %(status)s" if status else "")
        params = {"user_id": user_id, "status": status, "limit": limit, "offset": offset}
        rows = await fetch_all(self.db, f"""
            SELECT {_COLUMNS} FROM reminders WHERE {where}
            ORDER BY remind_at, created_at, id LIMIT %(limit)s OFFSET %(offset)s""", params)
        total = await fetch_value(self.db, f"SELECT count(*) FROM reminders WHERE {where}", params)
        return {"reminders": [present(row) for row in rows], "count": len(rows), "total": int(total or 0),
                "limit": limit, "offset": offset}

    async def _row(self, owner: str | None, reminder_id: str, cursor: Any = None) -> dict:
        """The reminder, locked when read inside a transaction; 404 when it is not the owner's
        (`owner` None: the administrator looking at anyone's)."""
        if len(reminder_id) != 32 or not set(reminder_id) <= _HEX:
            raise _not_found(reminder_id)
        sql = f"SELECT {_COLUMNS} FROM reminders WHERE id = %s" + (" AND user_id = %s" if owner else "")
        params = (reminder_id, owner) if owner else (reminder_id,)
        if cursor is None:
            row = await fetch_one(self.db, sql, params)
        else:
            await cursor.execute(sql + " FOR UPDATE", params)
            found = await cursor.fetchone()
            row = dict(found) if found is not None else None
        if row is None:
            raise _not_found(reminder_id)
        return row

    async def get(self, owner: str | None, reminder_id: str) -> dict:
        return present(await self._row(owner, reminder_id))

    async def update(self, owner: str | None, reminder_id: str, changes: dict) -> dict:
        now = self.now()
        async with transaction(self.db) as cursor:
            row = await self._row(owner, reminder_id, cursor)
            if "timezone" in changes:
                _zone(changes["timezone"])
                row["timezone"] = changes["timezone"]
            zone = ZoneInfo(row["timezone"])
            for field in ("title", "description", "session_id"):
                if field in changes:
                    row[field] = changes[field]
            if "repeat_type" in changes or "repeat_rule" in changes:
                kind = changes.get("repeat_type", row["repeat_type"])
                rule = changes.get("repeat_rule", row["repeat_rule"]) if kind == "cron" else ""
                _repeat(kind, rule)
                row["repeat_type"], row["repeat_rule"] = kind, rule
                row["repeat_anchor"] = row["remind_at"]
            if "remind_at" in changes:
                row["remind_at"] = parse_remind_at(changes["remind_at"], zone)
                row["notified"] = False  # a snooze, or a new time: this occurrence is to fire again
                if row["status"] == "failed":
                    row["status"] = "pending"  # a new time is a new try
                if not (changes.get("snooze") and row["repeat_type"] != "none"):
                    row["repeat_anchor"] = row["remind_at"]
            if "status" in changes:  # completed or cancelled (from any state) writes completed_at
                row["status"] = changes["status"]
                row["completed_at"] = now if row["status"] != "pending" else None
            self._plan(row, now)
            row["updated_at"] = now
            await cursor.execute(f"""
                UPDATE reminders SET title = %(title)s, description = %(description)s, remind_at = %(remind_at)s,
                    timezone = %(timezone)s, status = %(status)s, repeat_type = %(repeat_type)s,
                    repeat_rule = %(repeat_rule)s, repeat_anchor = %(repeat_anchor)s, session_id = %(session_id)s,
                    notified = %(notified)s, next_run_at = %(next_run_at)s, updated_at = %(updated_at)s,
                    completed_at = %(completed_at)s
                WHERE id = %(id)s RETURNING {_COLUMNS}""", row)
            saved = dict(await cursor.fetchone())
        if saved["next_run_at"] is not None:
            await self.loop.notify_due(saved["next_run_at"])
        return present(saved)

    def _plan(self, row: dict, now: datetime) -> None:
        """What the scheduler has to fire for `row`, from its state: its occurrence when pending
        and not yet notified; a repeating one that had fired moves to its next occurrence."""
        if row["status"] != "pending":
            row["next_run_at"] = None
        elif not row["notified"]:
            row["next_run_at"] = row["remind_at"]
        elif row["repeat_type"] != "none":
            following = next_occurrence(Repeat(row["repeat_type"], cron=row["repeat_rule"]), row["repeat_anchor"],
                                        max(now, row["remind_at"]), row["timezone"])
            row["remind_at"], row["notified"], row["next_run_at"] = following, False, following
        else:
            row["next_run_at"] = None

    async def delete(self, owner: str | None, reminder_id: str) -> None:
        row = await self._row(owner, reminder_id)
        await execute(self.db, "DELETE FROM reminders WHERE id = %s", (row["id"],))

    async def occurrences(self, owner: str | None, reminder_id: str) -> list[dict]:
        row = await self._row(owner, reminder_id)
        rows = await fetch_all(self.db, """
            SELECT due_at, handled_at, outcome, late_by_seconds, notification_id FROM reminder_occurrences
            WHERE reminder_id = %s ORDER BY due_at DESC, id DESC LIMIT 100""", (row["id"],))
        return [{"due_at": rfc3339(r["due_at"]), "handled_at": rfc3339(r["handled_at"]), "outcome": r["outcome"],
                 "late_by_seconds": r["late_by_seconds"], "notification_id": r["notification_id"]} for r in rows]

    # -- firing
    async def claim_and_fire(self) -> datetime | None:
        """Fire every due occurrence (one claimed row per transaction, so instances share the
        work); return the next due instant."""
        while True:
            self._claimed = None
            try:
                if not await self._fire_one():
                    break
            except Exception as error:
                if self._claimed is None or database.unavailable(error) or redis_bus.unavailable(error):
                    raise  # the stores are away: the loop tries the whole round again
                await self._record_failure(*self._claimed)
        return cast("datetime | None", await fetch_value(
            self.db, "SELECT min(next_run_at) FROM reminders WHERE next_run_at IS NOT NULL"))

    async def _fire_one(self) -> bool:
        now = self.now()
        async with transaction(self.db) as cursor:
            await cursor.execute(f"""
                SELECT {_COLUMNS} FROM reminders WHERE next_run_at <= %s
                ORDER BY next_run_at LIMIT 1 FOR UPDATE SKIP LOCKED""", (now,))
            found = await cursor.fetchone()
            if found is None:
                return False
            row = dict(found)
            due = row["next_run_at"]
            self._claimed = row["id"], due
            lateness = judge_lateness(due, now, self.grace)
            notification_id = None
            if lateness.fires:
                notification_id = str(uuid.uuid5(_OCCURRENCE_NAMESPACE, f"{row['id']}@{due.isoformat()}"))
                await self._notify(row, due, lateness.verdict == "late", lateness.late_by_seconds, notification_id)
            else:
                log.info("reminder %s due at %s skipped: %ds late, beyond the grace window", row["id"],
                         rfc3339(due), lateness.late_by_seconds)
            outcome = {"on_time": "fired", "late": "fired_late", "missed": "skipped"}[lateness.verdict]
            await cursor.execute("""
                INSERT INTO reminder_occurrences (reminder_id, due_at, handled_at, outcome, late_by_seconds,
                                                  notification_id)
                VALUES (%s, %s, %s, %s, %s, %s)""",
                                 (row["id"], due, now, outcome, lateness.late_by_seconds, notification_id))
            following = None
            if row["repeat_type"] != "none":
                try:
                    following = next_occurrence(Repeat(row["repeat_type"], cron=row["repeat_rule"]),
                                                row["repeat_anchor"], max(now, due), row["timezone"])
                except ValueError:  # a repeat that cannot go on ends here, rather than block the others
                    log.exception("reminder %s: its repeat has no next occurrence", row["id"])
            if following is not None:
                await cursor.execute("""
                    UPDATE reminders SET remind_at = %s, next_run_at = %s, notified = false,
                        last_fired_at = coalesce(%s, last_fired_at), updated_at = %s WHERE id = %s""",
                                     (following, following, now if lateness.fires else None, now, row["id"]))
            else:
                await cursor.execute("""
                    UPDATE reminders SET next_run_at = NULL, notified = %s,
                        last_fired_at = coalesce(%s, last_fired_at), updated_at = %s WHERE id = %s""",
                                     (lateness.fires, now if lateness.fires else None, now, row["id"]))
        return True

    async def _record_failure(self, reminder_id: str, due: datetime) -> None:
        """One row that cannot be fired must not hold up the rows due after it: it is tried again
        `POISON_RETRY` later, each try recorded as a `failed` occurrence; after `MAX_FIRE_ATTEMPTS`
        tries in a row it is `failed` and never tried again (until a PUT gives it a new time
        or sets it pending)."""
        now = self.now()
        async with transaction(self.db) as cursor:
            await cursor.execute("""
                INSERT INTO reminder_occurrences (reminder_id, due_at, handled_at, outcome, late_by_seconds)
                VALUES (%s, %s, %s, 'failed', 0)""", (reminder_id, due, now))
            # The tries since the row last changed (a firing or a PUT writes updated_at; a failed try does not).
            await cursor.execute("""
                SELECT count(*) AS tries FROM reminder_occurrences o JOIN reminders r ON r.id = o.reminder_id
                WHERE o.reminder_id = %s AND o.outcome = 'failed' AND o.handled_at >= r.updated_at""", (reminder_id,))
            tries = (await cursor.fetchone())["tries"]
            if tries < MAX_FIRE_ATTEMPTS:
                log.exception("reminder %s could not be fired (try %d of %d); trying it again in %ds", reminder_id,
                              tries, MAX_FIRE_ATTEMPTS, int(POISON_RETRY.total_seconds()))
                await cursor.execute("UPDATE reminders SET next_run_at = %s WHERE id = %s",
                                     (now + POISON_RETRY, reminder_id))
            else:
                log.exception("reminder %s could not be fired %d times; it is marked failed", reminder_id, tries)
                await cursor.execute("UPDATE reminders SET status = 'failed', next_run_at = NULL, updated_at = %s "
                                     "WHERE id = %s", (now, reminder_id))

    async def _notify(self, row: dict, due: datetime, late: bool, late_by: int, notification_id: str) -> None:
        body = row["description"] or row["title"]
        if late:  # said in the reminder's own language, as far as its words tell
            due_at = _wall(due, row["timezone"])[11:16]
            body += (f"（晚了 {_duration(late_by).replace('min', '分钟').replace('h', '小时')}：原定 {due_at}）"
                     if HAN.search(body) else f" (late by {_duration(late_by)}: due at {due_at})")
        data = {"reminder_id": row["id"], "remind_at": _wall(due, row["timezone"]), "repeat_type": row["repeat_type"],
                "session_id": row["session_id"], "late": late, "late_by": late_by}
        await self.context.contracts.require(NOTIFICATIONS).push(
            row["user_id"], "reminder", row["title"], body, data, notification_id=notification_id)


def _duration(seconds: int) -> str:
    minutes = max(1, round(seconds / 60))
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"
