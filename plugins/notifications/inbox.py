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
from gateway.errors import NotFound

from . import store
from .offpage import OffPageDelivery
from .schemas import NotificationSettings

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

    def __init__(self, context: Context, settings: NotificationSettings, offpage: OffPageDelivery):
        self.context = context
        self.max_missed = settings.max_missed
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
        inserted = await store.insert_notification(self.db, {**row, "data": json.dumps(row["data"])})
        hub = self.context.hub
        # Asked before sending: whether anyone was there to receive it.
        delivered = await hub.is_online(user_id)
        if inserted is None:  # pushed before under this id (a retry): the stored one, not sent again
            stored = await store.notification_by_id(self.db, row["id"])
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
        rows, counts = await store.inbox_page(self.db, user_id, unread_only=unread_only, type=type, limit=limit,
                                              offset=offset)
        return {"notifications": [_inbox_item(row) for row in rows], "count": len(rows),
                "total": int(counts.get("total") or 0), "unread": int(counts.get("unread") or 0),
                "limit": limit, "offset": offset}

    async def get(self, user_id: str, notification_id: str) -> dict:
        row = await store.notification_of(self.db, user_id, _uuid_or_404(notification_id))
        if row is None:
            raise _not_found(notification_id)
        return _inbox_item(row)

    async def mark_read(self, user_id: str, notification_id: str) -> dict:
        now = self.context.clock.now()
        row = await store.mark_read(self.db, user_id, _uuid_or_404(notification_id), now)
        if row is None:
            raise _not_found(notification_id)
        return _inbox_item(row)

    async def mark_all_read(self, user_id: str) -> int:
        return await store.mark_all_read(self.db, user_id, self.context.clock.now())

    async def delete(self, user_id: str, notification_id: str) -> None:
        if not await store.delete_notification(self.db, user_id, _uuid_or_404(notification_id)):
            raise _not_found(notification_id)

    # -- devices coming and going
    async def on_connect(self, connection: Connection) -> None:
        """Send a returning device, on this connection alone, the unread notifications that came
        while it was away (oldest first, the newest `max_missed` of them)."""
        if not connection.client_id:
            return
        now = self.context.clock.now()
        device = await store.device_connected(self.db, connection.user_id, connection.client_id, now)
        if device is None or not device["known"]:
            return  # a device seen for the first time was never away
        missed = await store.missed_notifications(self.db, connection.user_id, device["last_seen"], now,
                                                  self.max_missed)
        for row in missed:
            await self.context.hub.send_to_user(connection.user_id, _frame(row, self.context, missed=True),
                                                only=connection.id)
        await store.device_seen(self.db, connection.user_id, connection.client_id, now)

    async def on_disconnect(self, connection: Connection) -> None:
        if not connection.client_id:
            return
        # Shielded: the connection's handler is usually being cancelled (the client went), and
        # a goodbye left unwritten would have the device re-sent what it saw live.
        goodbye = asyncio.ensure_future(store.device_left(self.db, connection.user_id, connection.client_id,
                                                          self.context.clock.now()))
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
        await store.devices_seen(self.db, list(users), list(clients), self.context.clock.now())

    async def prune(self, retention_days: int) -> int:
        cutoff = self.context.clock.now() - timedelta(days=retention_days)
        return await store.delete_notifications_before(self.db, cutoff)


def _uuid_or_404(notification_id: str) -> str:
    try:
        return str(uuid.UUID(notification_id))
    except ValueError:
        raise _not_found(notification_id) from None


def _not_found(notification_id: str) -> NotFound:
    return NotFound(f"No notification {notification_id!r} in your inbox.", error_type="notification_not_found",
                    hint="List your notifications with GET /api/v1/notifications.")
