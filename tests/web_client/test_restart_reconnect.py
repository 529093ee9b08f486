"""The web client when the gateway closes its socket, in a real headless Chromium against the real
frontend, gateway and AI core: 1012 "service restart" (a rolling restart replaced the worker) is
answered by reconnecting at once, without a token renewal, and the reply in progress completes
once, and a message the gateway never got goes again; 1001 "going away" keeps the back-off. The
gateway's own hub closes the sockets, as the rolling restart (`replaced()`, then `close_all()`)
and a stop do."""
from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
import pytest_asyncio
from aiohttp import WSCloseCode

from gateway.app import CONTEXT
from tests.support.browser import needs_browser, open_browser, open_page
from tests.web_client.conftest import SLOW_WORDS

pytestmark = [needs_browser, pytest.mark.asyncio(loop_scope="module")]

# Records every connection state with the page's clock, and counts token renewals.
WATCH_STATES = """() => {
  window.__states = [];
  window.assistantApp.socket.on("state", (state) => window.__states.push({state, at: performance.now()}));
}"""
# The time from the socket's loss ("waiting") to the given state after it, once it is there.
AFTER_LOSS = """(target) => {
  const states = window.__states;
  const lost = states.findIndex((entry) => entry.state === "waiting");
  if (lost < 0) return null;
  const reached = states.slice(lost).find((entry) => entry.state === target);
  return reached ? reached.at - states[lost].at : null;
}"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser():
    async with open_browser() as chromium:
        yield chromium


@contextlib.asynccontextmanager
async def signed_in(services, browser, password: str):
    """A signed-in page watching its socket's states and its token renewals; it must end without
    a console error or an uncaught exception."""
    async with open_page(browser=browser) as (page, errors):
        renewals: list[str] = []
        page.on("request", lambda request: renewals.append(request.url) if "/auth/refresh" in request.url else None)
        await page.goto(services.frontend_url)
        await page.fill("input[name=username]", "admin")
        await page.fill("input[name=password]", password)
        await page.click("#login-form button[type=submit]")
        await page.wait_for_selector("#connection[data-state=open]", timeout=10000)
        await page.evaluate(WATCH_STATES)
        renewals.clear()
        yield page, renewals
        assert errors == []


async def start_a_slow_reply(page) -> None:
    await page.fill("textarea.input", "tell me something slow")
    await page.keyboard.press("Enter")
    streaming = page.locator(".live article.message.assistant.streaming")
    await streaming.filter(has_text="word2").wait_for(timeout=10000)


async def the_reply_completes_once(page, count: int = 1) -> None:
    replies = page.locator(".live article.message.assistant:not(.streaming)")
    await replies.nth(count - 1).wait_for(timeout=20000)
    assert (await replies.nth(count - 1).locator(".body").inner_text()).split() == SLOW_WORDS
    assert await page.locator(".live article.message.assistant").count() == count


@pytest.mark.slow
async def test_a_service_restart_close_reconnects_at_once_and_the_reply_completes(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as (page, renewals):
        await start_a_slow_reply(page)
        hub = services.gateway[CONTEXT].hub
        hub.replaced()  # what the rolling restart's SIGUSR2 does, then the drain's close_all
        await hub.close_all()
        await page.wait_for_function(AFTER_LOSS, arg="open", timeout=5000)
        reconnected_after_ms = await page.evaluate(AFTER_LOSS, "open")
        # Up to 500 ms of jitter, then a connection on loopback: well within about a second.
        assert reconnected_after_ms < 1500, reconnected_after_ms
        # No back-off path: that one renews the token before it reconnects.
        assert renewals == []
        await the_reply_completes_once(page)
        # The next message is answered on the new connection.
        await start_a_slow_reply(page)
        await the_reply_completes_once(page, count=2)


@pytest.mark.slow
async def test_a_going_away_close_backs_off_before_reconnecting(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as (page, renewals):
        await start_a_slow_reply(page)
        await services.gateway[CONTEXT].hub.close_all(code=WSCloseCode.GOING_AWAY, message=b"server shutting down")
        await page.wait_for_function(AFTER_LOSS, arg="open", timeout=10000)
        # The first back-off is 0.5 s ± 25 %: never at once.
        assert await page.evaluate(AFTER_LOSS, "connecting") >= 350
        assert renewals != []
        await the_reply_completes_once(page)


@pytest.mark.slow
async def test_a_message_the_gateway_never_got_goes_again_after_a_service_restart(services, browser, admin_password):
    """The line drops the page's next `message` frame on its way (the gateway never gets it, so
    neither `stream_start` nor `queued` comes back); after the 1012 the page sends it again."""
    dropped: list[str] = []
    drop_next_message = False

    def carry(route) -> None:
        server = route.connect_to_server()

        def from_page(frame) -> None:
            nonlocal drop_next_message
            if drop_next_message and isinstance(frame, str) and json.loads(frame).get("type") == "message":
                drop_next_message = False
                dropped.append(frame)
                return
            server.send(frame)
        route.on_message(from_page)

    async with open_page(browser=browser) as (page, errors):
        await page.route_web_socket("**/ws/chat**", carry)
        await page.goto(services.frontend_url)
        await page.fill("input[name=username]", "admin")
        await page.fill("input[name=password]", admin_password)
        await page.click("#login-form button[type=submit]")
        await page.wait_for_selector("#connection[data-state=open]", timeout=10000)
        drop_next_message = True
        await page.fill("textarea.input", "tell me something slow")
        await page.keyboard.press("Enter")
        await page.locator(".live article.message.user").last.wait_for(timeout=5000)
        assert len(dropped) == 1
        await asyncio.sleep(1)
        assert await page.locator(".live article.message.assistant").count() == 0
        hub = services.gateway[CONTEXT].hub
        hub.replaced()
        await hub.close_all()
        await the_reply_completes_once(page)
        assert errors == []
