"""The inbox: every notification stored first, sent live to each device of the person, and
sent again, on that connection only, to a device that was away when it came (each device's last
moment seen connected is kept). Provided as the `NOTIFICATIONS` contract."""
from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

import aiopg

from gateway.clock import rfc3339
from gateway.connection import Connection
from gateway.context import Context
from gateway.database import execute, fetch_all, fetch_one
from gateway.errors import NotFound

from .offpage import OffPageDelivery

_COLUMNS = "id::text AS id, user_id, type, title, body, data, created_at, read_at"


def _inbox_item(row: dict) -> dict:
    return {"id": row["id"], "type": row["type"], "title": row["title"], "body": row["body"],
            "data": row["data"] or {}, "user_id": row["user_id"], "timestamp": rfc3339(row["created_at"]),
            "read": row["read_at"] is not None,
            "read_at": rfc3339(row["read_at"]) if row["read_at"] is not None else None}


def _frame(row: dict, context: Context, missed: bool = False) -> dict:
    frame: dict = {"type": "notification",
                   "notification": {"id": row["id"], "type": row["type"], "title": row["title"],
                                    "body": row["body"], "timestamp": rfc3339(row["created_at"]),
                                    "data": row["data"] or {}},
                   "timestamp": int(context.clock.now().timestamp() * 1000)}
    if missed:
        frame["missed"] = True
    return frame


class Notifications:
    """Provided as the `NOTIFICATIONS` contract; also the inbox's store."""

    def __init__(self, context: Context, settings: dict, offpage: OffPageDelivery):
        self.context = context
        self.max_missed = settings["max_missed"]
        self.offpage = offpage
        self._goodbyes: set[asyncio.Future] = set()

    @property
    def db(self) -> aiopg.Pool:
        return self.context.db

    async def push(self, user_id: str, type: str, title: str, body: str, data: dict | None = None, *,
                   notification_id: str | None = None) -> dict:
        """Store, then send to every device of `user_id`; return the spec's Notification object."""
        created_at = self.context.clock.now()
        row: dict = {"id": str(uuid.UUID(notification_id)) if notification_id else str(uuid.uuid4()),
                     "user_id": user_id, "type": type, "title": title, "body": body, "data": data or {},
                     "created_at": created_at, "read_at": None}
        inserted = await fetch_one(self.db, """
            INSERT INTO notifications (id, user_id, type, title, body, data, created_at)
            VALUES (%(id)s, %(user_id)s, %(type)s, %(title)s, %(body)s, %(data)s::jsonb, %(created_at)s)
            ON CONFLICT (id) DO NOTHING RETURNING id""", {**row, "data": json.dumps(row["data"])})
        hub = self.context.hub
        # Asked before sending: whether anyone was there to receive it.
        delivered = await hub.is_online(user_id)
        if inserted is None:  # pushed before under this id (a retry): the stored one, not sent again
            stored = await fetch_one(self.db, f"SELECT {_COLUMNS} FROM notifications WHERE id = %s", (row["id"],))
            if stored is not None:
                return {"id": stored["id"], "type": stored["type"], "title": stored["title"],
                        "user_id": stored["user_id"], "timestamp": rfc3339(stored["created_at"]),
                        "delivered": delivered}
        await hub.send_to_user(user_id, _frame(row, self.context))
        self.offpage.enqueue(user_id, row)
        return {"id": row["id"], "type": type, "title": title, "user_id": user_id,
                "timestamp": rfc3339(created_at), "delivered": delivered}

    # -- the inbox
    async def page(self, user_id: str, *, unread_only: bool, type: str | None, limit: int, offset: int) -> dict:
        filters = ["user_id = %(user_id)s"]
        if unread_only:
            filters.append("read_at IS NULL")
        if type:
            filters.append("type = %(type)s")
        where = " AND ".join(filters)
        params = {"user_id": user_id, "type": type, "limit": limit, "offset": offset}
        rows = await fetch_all(self.db, f"""
            SELECT {_COLUMNS} FROM notifications WHERE {where}
            ORDER BY created_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s""", params)
        counts = await fetch_one(self.db, f"""
            SELECT count(*) FILTER (WHERE {where}) AS total,
                   count(*) FILTER (WHERE read_at IS NULL) AS unread
            FROM notifications WHERE user_id = %(user_id)s""", params) or {}
        return {"notifications": [_inbox_item(row) for row in rows], "count": len(rows),
                "total": int(counts.get("total") or 0), "unread": int(counts.get("unread") or 0),
                "limit": limit, "offset": offset}

    async def get(self, user_id: str, notification_id: str) -> dict:
        row = await fetch_one(self.db, f"SELECT {_COLUMNS} FROM notifications WHERE id = %s AND user_id = %s",
                              (_uuid_or_404(notification_id), user_id))
        if row is None:
            raise _not_found(notification_id)
        return _inbox_item(row)

    async def mark_read(self, user_id: str, notification_id: str) -> dict:
        row = await fetch_one(self.db, f"""
            UPDATE notifications SET read_at = coalesce(read_at, %s)
            WHERE id = %s AND user_id = %s RETURNING {_COLUMNS}""",
                              (self.context.clock.now(), _uuid_or_404(notification_id), user_id))
        if row is None:
            raise _not_found(notification_id)
        return _inbox_item(row)

    async def mark_all_read(self, user_id: str) -> int:
        return await execute(self.db, "UPDATE notifications SET read_at = %s WHERE user_id = %s AND read_at IS NULL",
                             (self.context.clock.now(), user_id))

    async def delete(self, user_id: str, notification_id: str) -> None:
        if not await execute(self.db, "DELETE FROM notifications WHERE id = %s AND user_id = %s",
                             (_uuid_or_404(notification_id), user_id)):
            raise _not_found(notification_id)

    # -- devices coming and going
    async def on_connect(self, connection: Connection) -> None:
        """Send a returning device, on this connection alone, the unread notifications that came
        while it was away (oldest first, the newest `max_missed` of them)."""
        if not connection.client_id:
            return
        now = self.context.clock.now()
        device = await fetch_one(self.db, """
            INSERT INTO notification_devices (user_id, client_id, last_seen, connected)
            VALUES (%s, %s, %s, true)
            ON CONFLICT (user_id, client_id) DO UPDATE SET connected = true
            RETURNING last_seen, (xmax <> 0) AS known""", (connection.user_id, connection.client_id, now))
        if device is None or not device["known"]:
            return  # a device seen for the first time was never away
        missed = await fetch_all(self.db, f"""
            SELECT * FROM (SELECT {_COLUMNS} FROM notifications
                           WHERE user_id = %s AND read_at IS NULL AND created_at > %s AND created_at <= %s
                           ORDER BY created_at DESC LIMIT %s) AS newest
            ORDER BY created_at, id""", (connection.user_id, device["last_seen"], now, self.max_missed))
        for row in missed:
            await self.context.hub.send_to_user(connection.user_id, _frame(row, self.context, missed=True),
                                                only=connection.id)
        await execute(self.db, "UPDATE notification_devices SET last_seen = greatest(last_seen, %s) "
                               "WHERE user_id = %s AND client_id = %s", (now, connection.user_id, connection.client_id))

    async def on_disconnect(self, connection: Connection) -> None:
        if not connection.client_id:
            return
        # Shielded: the connection's handler is usually being cancelled (the client went), and
        # a goodbye left unwritten would have the device re-sent what it saw live.
        goodbye = asyncio.ensure_future(execute(self.db, """
            UPDATE notification_devices SET last_seen = greatest(last_seen, %s), connected = false
            WHERE user_id = %s AND client_id = %s""",
                                                (self.context.clock.now(), connection.user_id, connection.client_id)))
        self._goodbyes.add(goodbye)
        goodbye.add_done_callback(self._goodbyes.discard)
        await asyncio.shield(goodbye)

    async def seen_now(self) -> None:
        """Mark this instance's connected devices seen now: after a crash (no disconnect
        recorded) a device is re-sent at most what came since the last of these."""
        devices = {(c.user_id, c.client_id) for c in self.context.hub.connections() if c.client_id}
        if not devices:
            return
        users, clients = zip(*devices)
        await execute(self.db, """
            UPDATE notification_devices SET last_seen = greatest(last_seen, %s)
            WHERE (user_id, client_id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))""",
                      (self.context.clock.now(), list(users), list(clients)))

    async def prune(self, retention_days: int) -> int:
        cutoff = self.context.clock.now() - timedelta(days=retention_days)
        return await execute(self.db, "DELETE FROM notifications WHERE created_at < %s", (cutoff,))


def _uuid_or_404(notification_id: str) -> str:
    try:
        return str(uuid.UUID(notification_id))
    except ValueError:
        raise _not_found(notification_id) from None


def _not_found(notification_id: str) -> NotFound:
    return NotFound(f"No notification {notification_id!r} in your inbox.", error_type="notification_not_found",
                    hint="List your notifications with GET /api/v1/notifications.")
