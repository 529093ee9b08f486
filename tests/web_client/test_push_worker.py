"""The service worker's Web Push listeners (static/push-sw.js) in a real headless Chromium: a
push the browser delivers (DevTools' ServiceWorker.deliverPushMessage, what the browser does
with a decrypted push) is shown as a system notification when no page of the app is open, and
not while one is visible (the page shows its toast). The worker is a stand-in for the
client's service worker, importing the real file as it must: importScripts("/static/push-sw.js");
the file is served by the frontend's own static route."""
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
