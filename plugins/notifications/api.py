"""The notification routes: pushing one, the inbox (list, read, delete) and Web Push
subscriptions (docs/notifications.md)."""
from __future__ import annotations

from aiohttp import web

from gateway.context import get_context
from gateway.identity import owner_for, require_user
from gateway.openapi import api_doc
from gateway.validation import parse_body, parse_query

from .contract import NOTIFICATIONS
from .inbox import Notifications
from .offpage import OffPageDelivery
from .schemas import (AllRead, Deleted, InboxPage, InboxQuery, OneNotification, OwnerQuery, Pushed, PushBody,
                      PushKey, Read, SubscriptionBody, SubscriptionList, SubscriptionSaved)

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
