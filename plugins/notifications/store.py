"""The notifications plugin's tables, beside its migrations: `notifications` (the inbox),
`notification_devices` (each device's last moment seen connected) and `push_subscriptions`
(the browsers a person subscribed for Web Push). The SQL lives here; inbox.py and offpage.py
decide what to do with the rows."""
from __future__ import annotations

from datetime import datetime

import aiopg

from gateway.database import execute, fetch_all, fetch_one

_COLUMNS = "id::text AS id, user_id, type, title, body, data, created_at, read_at"
_SUBSCRIPTION_COLUMNS = "id::text AS id, user_id, endpoint, p256dh, auth, device_name, created_at, last_push_at, last_error"


# -- the inbox
async def insert_notification(db: aiopg.Pool, row: dict) -> dict | None:
    """The new row's id; None when a notification with this id was stored before."""
    return await fetch_one(db, """
            INSERT INTO notifications (id, user_id, type, title, body, data, created_at)
            VALUES (%(id)s, %(user_id)s, %(type)s, %(title)s, %(body)s, %(data)s::jsonb, %(created_at)s)
            ON CONFLICT (id) DO NOTHING RETURNING id""", row)


async def notification_by_id(db: aiopg.Pool, notification_id: str) -> dict | None:
    return await fetch_one(db, f"SELECT {_COLUMNS} FROM notifications WHERE id = %s", (notification_id,))


async def inbox_page(db: aiopg.Pool, user_id: str, *, unread_only: bool, type: str | None, limit: int,
                     offset: int) -> tuple[list[dict], dict]:
    """(one page of the person's notifications, newest first; {total, unread} counts)."""
    filters = ["user_id = %(user_id)s"]
    if unread_only:
        filters.append("read_at IS NULL")
    if type:
        filters.append("type = %(type)s")
    where = " AND ".join(filters)
    params = {"user_id": user_id, "type": type, "limit": limit, "offset": offset}
    rows = await fetch_all(db, f"""
            SELECT {_COLUMNS} FROM notifications WHERE {where}
            ORDER BY created_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s""", params)
    counts = await fetch_one(db, f"""
            SELECT count(*) FILTER (WHERE {where}) AS total,
                   count(*) FILTER (WHERE read_at IS NULL) AS unread
            FROM notifications WHERE user_id = %(user_id)s""", params) or {}
    return rows, counts


async def notification_of(db: aiopg.Pool, user_id: str, notification_id: str) -> dict | None:
    return await fetch_one(db, f"SELECT {_COLUMNS} FROM notifications WHERE id = %s AND user_id = %s",
                           (notification_id, user_id))


async def mark_read(db: aiopg.Pool, user_id: str, notification_id: str, now: datetime) -> dict | None:
    """The notification, read (at `now` unless it was read before); None when it is not the person's."""
    return await fetch_one(db, f"""
            UPDATE notifications SET read_at = coalesce(read_at, %s)
            WHERE id = %s AND user_id = %s RETURNING {_COLUMNS}""",
                           (now, notification_id, user_id))


async def mark_all_read(db: aiopg.Pool, user_id: str, now: datetime) -> int:
    return await execute(db, "UPDATE notifications SET read_at = %s WHERE user_id = %s AND read_at IS NULL",
                         (now, user_id))


async def delete_notification(db: aiopg.Pool, user_id: str, notification_id: str) -> int:
    return await execute(db, "DELETE FROM notifications WHERE id = %s AND user_id = %s",
                         (notification_id, user_id))


async def delete_notifications_before(db: aiopg.Pool, cutoff: datetime) -> int:
    return await execute(db, "DELETE FROM notifications WHERE created_at < %s", (cutoff,))


# -- devices coming and going
async def device_connected(db: aiopg.Pool, user_id: str, client_id: str, now: datetime) -> dict | None:
    """{last_seen, known}: when the device was last seen, and whether it was seen before."""
    return await fetch_one(db, """
            INSERT INTO notification_devices (user_id, client_id, last_seen, connected)
            VALUES (%s, %s, %s, true)
            ON CONFLICT (user_id, client_id) DO UPDATE SET connected = true
            RETURNING last_seen, (xmax <> 0) AS known""", (user_id, client_id, now))


async def missed_notifications(db: aiopg.Pool, user_id: str, since: datetime, now: datetime,
                               limit: int) -> list[dict]:
    """The newest `limit` unread notifications that came between `since` and `now`, oldest first."""
    return await fetch_all(db, f"""
            SELECT * FROM (SELECT {_COLUMNS} FROM notifications
                           WHERE user_id = %s AND read_at IS NULL AND created_at > %s AND created_at <= %s
                           ORDER BY created_at DESC LIMIT %s) AS newest
            ORDER BY created_at, id""", (user_id, since, now, limit))


async def device_seen(db: aiopg.Pool, user_id: str, client_id: str, now: datetime) -> None:
    await execute(db, "UPDATE notification_devices SET last_seen = greatest(last_seen, %s) "
                      "WHERE user_id = %s AND client_id = %s", (now, user_id, client_id))


async def device_left(db: aiopg.Pool, user_id: str, client_id: str, now: datetime) -> None:
    await execute(db, """
            UPDATE notification_devices SET last_seen = greatest(last_seen, %s), connected = false
            WHERE user_id = %s AND client_id = %s""",
                  (now, user_id, client_id))


async def devices_seen(db: aiopg.Pool, users: list[str], clients: list[str], now: datetime) -> None:
    """Mark the devices (`users[i]`, `clients[i]`) seen at `now`."""
    await execute(db, """
            UPDATE notification_devices SET last_seen = greatest(last_seen, %s)
            WHERE (user_id, client_id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))""",
                  (now, users, clients))


# -- Web Push subscriptions
async def upsert_subscription(db: aiopg.Pool, subscription_id: str, user_id: str, endpoint: str, p256dh: str,
                              auth: str, device_name: str, now: datetime) -> dict:
    """The subscription's row, with `created`: whether it is new (else taken over by endpoint)."""
    row = await fetch_one(db, f"""
            INSERT INTO push_subscriptions (id, user_id, endpoint, p256dh, auth, device_name, created_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (endpoint) DO UPDATE SET user_id = excluded.user_id, p256dh = excluded.p256dh,
                auth = excluded.auth, device_name = excluded.device_name, last_error = NULL
            RETURNING {_SUBSCRIPTION_COLUMNS}, (xmax = 0) AS created""",
                          (subscription_id, user_id, endpoint, p256dh, auth, device_name, now))
    assert row is not None
    return row


async def keep_newest_subscriptions(db: aiopg.Pool, user_id: str, bound: int) -> None:
    """Forget the person's oldest subscriptions beyond `bound`."""
    await execute(db, """
            DELETE FROM push_subscriptions WHERE user_id = %s AND id NOT IN (
                SELECT id FROM push_subscriptions WHERE user_id = %s ORDER BY position DESC LIMIT %s)""",
                  (user_id, user_id, bound))


async def subscriptions_in_order(db: aiopg.Pool, user_id: str) -> list[dict]:
    return await fetch_all(db, f"SELECT {_SUBSCRIPTION_COLUMNS} FROM push_subscriptions "
                               "WHERE user_id = %s ORDER BY position", (user_id,))


async def subscriptions_of(db: aiopg.Pool, user_id: str) -> list[dict]:
    return await fetch_all(db, f"SELECT {_SUBSCRIPTION_COLUMNS} FROM push_subscriptions "
                               "WHERE user_id = %s", (user_id,))


async def delete_subscription_of(db: aiopg.Pool, user_id: str, subscription_id: str) -> int:
    return await execute(db, "DELETE FROM push_subscriptions WHERE id = %s AND user_id = %s",
                         (subscription_id, user_id))


async def forget_subscription(db: aiopg.Pool, subscription_id: str) -> None:
    await execute(db, "DELETE FROM push_subscriptions WHERE id = %s", (subscription_id,))


async def record_push_sent(db: aiopg.Pool, subscription_id: str, now: datetime) -> None:
    await execute(db, "UPDATE push_subscriptions SET last_push_at = %s, last_error = NULL WHERE id = %s",
                  (now, subscription_id))


async def record_push_error(db: aiopg.Pool, subscription_id: str, error: str) -> None:
    await execute(db, "UPDATE push_subscriptions SET last_error = %s WHERE id = %s",
                  (error, subscription_id))
