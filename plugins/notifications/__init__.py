"""Notifications: `POST /api/v1/notifications/push`, the `NOTIFICATIONS` contract (reminders and
automation push through it), and the inbox that keeps every notification.

A notification goes out as a `notification` WebSocket event to every device of the user on every
gateway instance sharing the bus, and is stored first, so that a person reads it later in the
inbox (`GET /api/v1/notifications`) and a device that was away when it came (a phone offline at
9:00) is sent it, on that connection only, when it connects again. Devices are told apart by the
`client_id` they connect with; each one's last moment seen connected is kept, so a device that
saw a notification live is not sent it again.

See docs/notifications.md and docs/reminders.md ("The inbox and missed delivery")."""
from __future__ import annotations

import asyncio
import json
import logging
import uuid
from datetime import timedelta

from aiohttp import web

from gateway import database
from gateway.context import Context, get_context
from gateway.database import execute, fetch_all, fetch_one, fetch_value
from gateway.errors import NotFound
from gateway.hub import Connection
from gateway.identity import owner_for, require_user
from gateway.openapi import api_doc
from gateway.plugins import Plugin, Registrar
from gateway.clock import rfc3339
from gateway.validation import parse_body, parse_query

from . import person_data
from .contract import NOTIFICATIONS
from .offpage import OffPageDelivery
from .schemas import (NOTIFICATION_TYPES, AllRead, Deleted, InboxPage, InboxQuery, NotificationFrame,
                      NotificationSettings, OneNotification, OwnerQuery, Pushed, PushBody, PushKey, Read,
                      SubscriptionBody, SubscriptionList, SubscriptionSaved)

log = logging.getLogger("plugins.notifications")

__all__ = ["NOTIFICATION_TYPES", "plugin"]

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
    def db(self):
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


INBOX = web.AppKey("notifications.inbox", Notifications)
OFFPAGE = web.AppKey("notifications.offpage", OffPageDelivery)
SUBSCRIPTION_ID = {"subscription_id": {"type": "string", "maxLength": 64}}
NOTIFICATION_ID = {"notification_id": {"type": "string", "maxLength": 64}}
routes = web.RouteTableDef()


@routes.post("/api/v1/notifications/push", name="notifications.push")
@api_doc("Push a notification to every device of a user (people: to themselves); it is kept in their inbox",
         body=PushBody, responses={200: Pushed}, errors=(403, 503))
async def push(request: web.Request) -> web.Response:
    caller = await require_user(request)
    body = await parse_body(request, PushBody())
    # People notify themselves; the administrator and services notify anyone.
    target = owner_for(caller, body["user_id"])
    notification = await get_context(request).contracts.require(NOTIFICATIONS).push(
        target, body["type"], body["title"], body["body"], body["data"])
    return web.json_response({"success": True, "notification": notification})


@routes.get("/api/v1/notifications/push/key", name="notifications.push_key")
@api_doc("The VAPID public key a browser subscribes with (its applicationServerKey)", responses={200: PushKey},
         errors=(503,))
async def push_key(request: web.Request) -> web.Response:
    await require_user(request)
    keys = await request.config_dict[OFFPAGE].keys()
    return web.json_response({"publicKey": keys.public_key})


@routes.get("/api/v1/notifications/push/subscriptions", name="notifications.push_subscriptions")
@api_doc("The caller's Web Push subscriptions (one per browser), oldest first", query=OwnerQuery,
         responses={200: SubscriptionList}, errors=(403, 503))
async def list_subscriptions(request: web.Request) -> web.Response:
    caller = await require_user(request)
    owner = owner_for(caller, parse_query(request, OwnerQuery())["user_id"])
    subscriptions = await request.config_dict[OFFPAGE].subscriptions(owner)
    return web.json_response({"subscriptions": subscriptions, "count": len(subscriptions)})


@routes.post("/api/v1/notifications/push/subscriptions", name="notifications.push_subscribe")
@api_doc("Subscribe this browser to Web Push (the body is its PushSubscription.toJSON()); 201 when new, 200 when "
         "the browser's subscription was known (it now belongs to the caller)", body=SubscriptionBody,
         responses={201: SubscriptionSaved, 200: SubscriptionSaved}, errors=(503,))
async def subscribe(request: web.Request) -> web.Response:
    caller = await require_user(request)
    body = await parse_body(request, SubscriptionBody())
    subscription, created = await request.config_dict[OFFPAGE].subscribe(caller.user_id, body)
    return web.json_response({"success": True, "subscription": subscription}, status=201 if created else 200)


@routes.delete("/api/v1/notifications/push/subscriptions/{subscription_id}", name="notifications.push_unsubscribe")
@api_doc("Stop pushing to one browser", query=OwnerQuery, responses={200: Deleted}, errors=(403, 404, 503),
         path=SUBSCRIPTION_ID)
async def unsubscribe(request: web.Request) -> web.Response:
    caller = await require_user(request)
    owner = owner_for(caller, parse_query(request, OwnerQuery())["user_id"])
    await request.config_dict[OFFPAGE].unsubscribe(owner, request.match_info["subscription_id"])
    return web.json_response({"success": True})


@routes.get("/api/v1/notifications", name="notifications.list")
@api_doc("The caller's inbox, newest first (the administrator: anyone's, with user_id)", query=InboxQuery,
         responses={200: InboxPage}, errors=(403, 503))
async def list_notifications(request: web.Request) -> web.Response:
    caller = await require_user(request)
    query = parse_query(request, InboxQuery())
    owner = owner_for(caller, query["user_id"])
    page = await request.config_dict[INBOX].page(owner, unread_only=query["unread"], type=query["type"],
                                                 limit=query["limit"], offset=query["offset"])
    return web.json_response(page)


@routes.post("/api/v1/notifications/read-all", name="notifications.read_all")
@api_doc("Mark every notification of the caller's inbox read", query=OwnerQuery, responses={200: AllRead},
         errors=(403, 503))
async def read_all(request: web.Request) -> web.Response:
    caller = await require_user(request)
    owner = owner_for(caller, parse_query(request, OwnerQuery())["user_id"])
    return web.json_response({"success": True, "updated": await request.config_dict[INBOX].mark_all_read(owner)})


@routes.get("/api/v1/notifications/{notification_id}", name="notifications.get")
@api_doc("One notification of the caller's inbox", query=OwnerQuery, responses={200: OneNotification},
         errors=(403, 404, 503), path=NOTIFICATION_ID)
async def get_notification(request: web.Request) -> web.Response:
    caller = await require_user(request)
    owner = owner_for(caller, parse_query(request, OwnerQuery())["user_id"])
    notification = await request.config_dict[INBOX].get(owner, request.match_info["notification_id"])
    return web.json_response({"notification": notification})


@routes.post("/api/v1/notifications/{notification_id}/read", name="notifications.read")
@api_doc("Mark one notification read", query=OwnerQuery, responses={200: Read}, errors=(403, 404, 503),
         path=NOTIFICATION_ID)
async def read_one(request: web.Request) -> web.Response:
    caller = await require_user(request)
    owner = owner_for(caller, parse_query(request, OwnerQuery())["user_id"])
    notification = await request.config_dict[INBOX].mark_read(owner, request.match_info["notification_id"])
    return web.json_response({"success": True, "notification": notification})


@routes.delete("/api/v1/notifications/{notification_id}", name="notifications.delete")
@api_doc("Delete one notification from the inbox", query=OwnerQuery, responses={200: Deleted},
         errors=(403, 404, 503), path=NOTIFICATION_ID)
async def delete_notification(request: web.Request) -> web.Response:
    caller = await require_user(request)
    owner = owner_for(caller, parse_query(request, OwnerQuery())["user_id"])
    await request.config_dict[INBOX].delete(owner, request.match_info["notification_id"])
    return web.json_response({"success": True})


class NotificationsPlugin(Plugin):
    name = "notifications"
    depends = ("auth_tokens",)
    settings_schema = NotificationSettings
    description = "Notifications pushed to a user's devices over WebSocket, kept in an inbox"

    def setup(self, registrar: Registrar) -> None:
        settings = registrar.settings
        offpage = OffPageDelivery(registrar.context, settings)
        inbox = Notifications(registrar.context, settings, offpage)
        registrar.provide(NOTIFICATIONS, inbox)
        registrar.app_state(INBOX, inbox)
        registrar.app_state(OFFPAGE, offpage)
        registrar.routes(routes)
        registrar.migrations("plugins.notifications")
        person_data.register(registrar, offpage.bridge)
        registrar.ws_server_message("notification", NotificationFrame, "A notification pushed to the user's devices "
                                    "(POST /api/v1/notifications/push, or a reminder); `missed` when it came while "
                                    "this device was away and is sent on its return.")
        hub = registrar.context.hub
        hub.on_connect(inbox.on_connect)
        hub.on_disconnect(inbox.on_disconnect)

        async def keep_devices_seen(context: Context) -> None:
            while True:
                await asyncio.sleep(settings["device_heartbeat"])
                try:
                    await inbox.seen_now()
                except Exception as error:  # the database away for a moment: the next beat tries again
                    if not database.unavailable(error):
                        raise
                    log.warning("could not mark connected devices seen: %s", error)

        async def prune(context: Context) -> None:
            while True:
                try:
                    removed = await inbox.prune(settings["retention_days"])
                    if removed:
                        log.info("pruned %d notifications older than %d days", removed, settings["retention_days"])
                except Exception:  # tried again at the next round
                    log.exception("pruning old notifications failed")
                await asyncio.sleep(6 * 3600)

        async def deliver_off_page(context: Context) -> None:
            await asyncio.gather(*(offpage.work() for _ in range(settings["push_workers"])))

        registrar.job("devices_seen", keep_devices_seen)
        registrar.job("offpage_delivery", deliver_off_page)
        registrar.job("prune", prune)


plugin = NotificationsPlugin()
