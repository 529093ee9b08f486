"""Web Push in a real headless Chromium. The service worker's listeners (static/push-sw.js): a
push the browser delivers (DevTools' ServiceWorker.deliverPushMessage, what the browser does
with a decrypted push) is shown as a system notification when no page of the app is open, and
not while one is visible (the page shows its toast). And the whole way: the Inbox's switch
(js/push.js) subscribes with the gateway's VAPID key, the gateway pushes a notification to the
local push service (tests/support/fake_push.py), which decrypts it with the browser's keys, and
the service worker shows it; signing out forgets the browser. Headless Chromium has no push
service, so its PushManager answers the local push service's subscription.

The first test's worker is a stand-in importing the real file as the client's does
(importScripts("/static/push-sw.js")); the whole way uses the client's own /sw.js."""
from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from plugins.frontend import static_file
from tests.support.browser import needs_browser, open_browser

pytestmark = [needs_browser, pytest.mark.slow]

WORKER = 'importScripts("/static/push-sw.js");\n'


async def page(request: web.Request) -> web.Response:
    return web.Response(text="<!doctype html><title>app</title>", content_type="text/html")


async def worker(request: web.Request) -> web.Response:
    return web.Response(text=WORKER, content_type="text/javascript")


async def static(request: web.Request) -> web.StreamResponse:
    return static_file(request.match_info["name"])


async def serve(aiohttp_server):
    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/sw.js", worker)
    app.router.add_get("/static/{name:.+}", static)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


async def shown(page) -> list[list]:
    return await page.evaluate("""async () => (await (await navigator.serviceWorker.ready).getNotifications())
        .map((n) => [n.title, n.body, n.tag, n.data.reminder_id])""")


async def test_a_push_is_shown_when_no_page_is_open_and_left_to_the_visible_page_otherwise(aiohttp_server):
    origin = await serve(aiohttp_server)
    async with open_browser() as browser:
        context = await browser.new_context()
        await context.grant_permissions(["notifications"], origin=origin)
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(origin + "/")
        await page.evaluate("async () => { await navigator.serviceWorker.register('/sw.js'); "
                            "await navigator.serviceWorker.ready; }")
        devtools = await context.new_cdp_session(page)
        registrations: list[dict] = []
        devtools.on("ServiceWorker.workerRegistrationUpdated", lambda event: registrations.extend(event["registrations"]))
        await devtools.send("ServiceWorker.enable")
        async with asyncio.timeout(10):
            while not registrations:
                await asyncio.sleep(0.05)
        registration_id = registrations[0]["registrationId"]

        async def deliver(payload: dict) -> None:
            await devtools.send("ServiceWorker.deliverPushMessage", {
                "origin": origin, "registrationId": registration_id, "data": json.dumps(payload)})

        # A page of the app is visible: it shows the toast itself, the worker shows nothing.
        await deliver({"id": "n-1", "type": "reminder", "title": "Seen on the page", "body": "x",
                       "timestamp": "2026-11-24T06:00:30.000Z", "data": {}})
        await asyncio.sleep(0.5)
        assert await shown(page) == []

        # No page of the app open: a system notification with the pushed title and body.
        await page.goto("about:blank")
        await deliver({"id": "n-2", "type": "reminder", "title": "Take the pizza out", "body": "At 200 degrees",
                       "timestamp": "2026-11-24T06:00:30.000Z", "data": {"reminder_id": "r-1"}})
        await page.goto(origin + "/")
        async with asyncio.timeout(10):
            while not (notifications := await shown(page)):
                await asyncio.sleep(0.1)
        assert notifications == [["Take the pizza out", "At 200 degrees", "n-2", "r-1"]]
        assert errors == []


# The browser's side of subscribing, with no push service behind headless Chromium: its
# PushManager answers the subscription of the local push service (tests/support/fake_push.py),
# and keeps the applicationServerKey it was given so the test can check it.
PUSH_MANAGER = """
(() => {
  const subscription = %s;
  let current = null;
  window.testPushKeys = [];
  PushManager.prototype.subscribe = async function (options) {
    const key = new Uint8Array(options.applicationServerKey);
    window.testPushKeys.push(btoa(String.fromCharCode(...key)).replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, ""));
    current = {endpoint: subscription.endpoint, options: {applicationServerKey: key.buffer},
               toJSON: () => subscription, unsubscribe: async () => { current = null; return true; }};
    return current;
  };
  PushManager.prototype.getSubscription = async function () { return current; };
})();
"""


async def test_turning_notifications_on_in_the_inbox_subscribes_and_a_notification_then_reaches_the_closed_app(
        aiohttp_server, make_config, database_url):
    from aiohttp import ClientSession

    from gateway.app import create_app
    from plugins.auth import auth_plugin, tokens_plugin
    from plugins.frontend import plugin as frontend_plugin
    from plugins.notifications import plugin as notifications_plugin
    from tests.conftest import TEST_ADMIN_PASSWORD
    from tests.support.fake_push import serve_fake_push

    push_service = await serve_fake_push(aiohttp_server)
    gateway = await aiohttp_server(create_app("gateway", make_config({
        "database.url": database_url, "plugins.notifications.push_hosts": ["127.0.0.1"],
        "plugins.notifications": {"platform_types": []}}), plugins=[tokens_plugin, auth_plugin, notifications_plugin]))
    gateway_url = str(gateway.make_url("")).rstrip("/")
    frontend_app = create_app("frontend", make_config({"peers.gateway_url": gateway_url}), plugins=[frontend_plugin])
    frontend = await aiohttp_server(frontend_app)
    origin = str(frontend.make_url("")).rstrip("/")
    service = {"Authorization": "Bearer test-service-token"}
    subscription = push_service.subscribe()

    async with open_browser() as browser, ClientSession(headers=service) as http:
        async def subscriptions() -> list[dict]:
            async with http.get(f"{gateway_url}/api/v1/notifications/push/subscriptions",
                                params={"user_id": "admin"}) as answer:
                return (await answer.json())["subscriptions"]

        context = await browser.new_context()
        await context.grant_permissions(["notifications"], origin=origin)
        await context.add_init_script(PUSH_MANAGER % json.dumps(subscription))
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(origin + "/")
        await page.evaluate("navigator.serviceWorker.register('/sw.js')")
        await page.fill("input[name=username]", "admin")
        await page.fill("input[name=password]", TEST_ADMIN_PASSWORD)
        await page.click("#login-form button[type=submit]")
        await page.locator("#shell").wait_for(timeout=10000)  # signed in (no chat plugin: no socket)
        await page.click("#nav button[data-pane=inbox]")
        toggle = page.locator(".push-toggle button")
        await toggle.wait_for(timeout=10000)
        assert await toggle.inner_text() == "Notify me on this device"
        await toggle.click()
        await page.locator(".push-toggle button[aria-pressed=true]").wait_for(timeout=10000)
        assert await toggle.inner_text() == "Stop notifications on this device"
        assert "even when the app is closed" in await page.locator(".push-note").inner_text()
        # Subscribed with the gateway's VAPID key; the gateway has this browser.
        async with http.get(f"{gateway_url}/api/v1/notifications/push/key") as answer:
            key = (await answer.json())["publicKey"]
        assert await page.evaluate("window.testPushKeys") == [key]
        [known] = await subscriptions()
        assert known["endpoint_origin"] == push_service.url and known["device_name"].startswith("Chrome")

        # A notification for the person: pushed, decrypted by the push service with the browser's keys...
        async with http.post(f"{gateway_url}/api/v1/notifications/push", json={
                "user_id": "admin", "type": "reminder", "title": "Call mom", "body": "She is back"}) as answer:
            assert answer.status == 200
        async with asyncio.timeout(10):
            while not push_service.received:
                await asyncio.sleep(0.05)
        [payload] = push_service.payloads(subscription)
        assert payload["title"] == "Call mom" and payload["body"] == "She is back"

        # ...and, handed to the service worker with no page of the app open, shown.
        devtools = await context.new_cdp_session(page)
        registrations: list[dict] = []
        devtools.on("ServiceWorker.workerRegistrationUpdated", lambda event: registrations.extend(event["registrations"]))
        await devtools.send("ServiceWorker.enable")
        async with asyncio.timeout(10):
            while not registrations:
                await asyncio.sleep(0.05)
        await page.goto("about:blank")
        await devtools.send("ServiceWorker.deliverPushMessage", {
            "origin": origin, "registrationId": registrations[0]["registrationId"], "data": json.dumps(payload)})
        await page.goto(origin + "/")
        async with asyncio.timeout(10):
            while not (notifications := await shown(page)):
                await asyncio.sleep(0.1)
        assert [n[:2] for n in notifications] == [["Call mom", "She is back"]]

        # Signing out forgets this browser at the gateway.
        await page.locator("#shell").wait_for(timeout=10000)
        await page.click('[data-action="signout"]')
        await page.locator("#login-form").wait_for(timeout=10000)
        assert await subscriptions() == []
        assert errors == []
