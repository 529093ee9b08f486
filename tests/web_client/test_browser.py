"""The web client in a real headless Chromium against the real frontend, gateway and AI core:
sign in, streaming, a second device of the same person, Markdown and code (and a script that
must not run), an image upload, a reconnect in the middle of a reply, the Chinese interface.
One browser and one set of services for the module; the tests run in order and share them."""
from __future__ import annotations

import asyncio
import contextlib
import io
from pathlib import Path

import pytest
import pytest_asyncio
from PIL import Image

from tests.support.browser import CHROMIUM_ARGS, chromium_path, needs_browser, open_page, screenshot
from tests.web_client.conftest import SLOW_WORDS, SPOKEN_TEXT, TRIP_REQUEST, TRIP_TITLE, TRIP_TITLE_GATE

pytestmark = [needs_browser, pytest.mark.asyncio(loop_scope="module")]

DESKTOP = (1280, 800)
PHONE = (390, 780)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser():
    """tests.support.browser's Chromium, with a fake microphone that needs no permission prompt
    and audio that may play without a gesture (for the voice test)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        chromium = await driver.chromium.launch(
            executable_path=chromium_path(), headless=True,
            args=[*CHROMIUM_ARGS, "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                  "--autoplay-policy=no-user-gesture-required"])
        try:
            yield chromium
        finally:
            await chromium.close()


async def sign_in(page, url: str, password: str) -> None:
    await page.goto(url)
    await page.fill("input[name=username]", "admin")
    await page.fill("input[name=password]", password)
    await page.click("#login-form button[type=submit]")
    await page.wait_for_selector("#connection[data-state=open]", timeout=10000)


@contextlib.asynccontextmanager
async def signed_in(services, browser, password: str, viewport: tuple[int, int] = DESKTOP):
    """A page of a fresh browser context, signed in as the administrator; it must end without a
    console error or an uncaught exception."""
    async with open_page(viewport, browser=browser) as (page, errors):
        await sign_in(page, services.frontend_url, password)
        yield page
        assert errors == []


async def send(page, text: str) -> None:
    await page.fill("textarea.input", text)
    await page.keyboard.press("Enter")


async def last_reply(page):
    return page.locator(".live article.message.assistant").last


@pytest.mark.slow
async def test_chat_streams_and_a_second_device_sees_the_echo_and_the_reply(services, browser, admin_password):
    async with open_page(DESKTOP, browser=browser) as (desktop, desktop_errors), \
            open_page(PHONE, browser=browser) as (phone, phone_errors):
        response = await desktop.goto(services.frontend_url)
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "connect-src 'self'" in policy and "unsafe-inline" not in policy
        await screenshot(desktop, "web-sign-in")
        await sign_in(desktop, services.frontend_url, admin_password)
        await desktop.wait_for_selector(".session[aria-current=true]")
        await sign_in(phone, services.frontend_url, admin_password)
        await phone.wait_for_selector(".session-title")

        await send(desktop, "Hi there")
        streaming = desktop.locator(".live article.message.assistant.streaming")
        await streaming.wait_for(timeout=10000)       # seen while it is still being written
        reply = desktop.locator(".live article.message.assistant:not(.streaming)")
        await reply.wait_for(timeout=10000)
        assert "Hello there, friend. How can I help?" in await reply.inner_text()
        # Each bubble says when, above its actions: the person's own message from when it was sent.
        for bubble in (desktop.locator(".live article.message.user"), reply):
            assert await bubble.locator(":scope > time.stamp + .message-actions").count() == 1

        echo = phone.locator(".live article.message.user")
        await echo.wait_for(timeout=10000)
        assert "Hi there" in await echo.inner_text()
        # The echo's client_info names the sending page (its handshake's device_name).
        sender = await desktop.evaluate("import('/static/js/socket.js').then(module => module.deviceName())")
        assert sender and await echo.locator(".origin").inner_text() == f"from {sender}"
        assert await echo.locator("time.stamp").count() == 1  # and when it was sent
        phone_reply = phone.locator(".live article.message.assistant:not(.streaming)")
        await phone_reply.wait_for(timeout=10000)
        assert "How can I help?" in await phone_reply.inner_text()
        assert await phone.evaluate("document.documentElement.scrollWidth") <= PHONE[0]   # nothing off-screen
        await screenshot(desktop, "web-chat-desktop")
        await screenshot(phone, "web-chat-phone")
        assert desktop_errors == [] and phone_errors == []


@pytest.mark.slow
async def test_markdown_and_code_render_and_a_script_in_a_reply_does_not_run(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await send(page, "show me markdown please")
        block = page.locator(".live .code-block")
        await block.wait_for(timeout=10000)
        await page.locator(".live article.message.assistant:not(.streaming)").last.wait_for()
        assert await block.locator(".language").inner_text() == "python"
        assert await block.locator(".tok-keyword").first.inner_text() == "def"
        assert await block.locator("button.copy").is_visible()
        reply = await last_reply(page)
        assert await reply.locator("h1").inner_text() == "Plan"
        assert await reply.locator("strong").first.inner_text() == "bold"
        assert await reply.locator(".part.action").inner_text() == "waves goodbye"
        assert await page.evaluate("window.__pwned") is None
        assert await page.locator(".messages script").count() == 0
        assert await page.locator(".messages [onerror]").count() == 0
        await screenshot(page, "web-markdown-code")


def photo_png() -> bytes:
    image = Image.new("RGB", (64, 48), (40, 160, 90))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.slow
async def test_an_uploaded_image_shows_its_thumbnail_and_is_sent_with_its_file_id(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await page.set_input_files(".composer input[type=file]",
                                   files=[{"name": "meadow.png", "mimeType": "image/png", "buffer": photo_png()}])
        tray = page.locator(".attachments .attachment:not(.uploading) img.thumb")
        await tray.wait_for(timeout=10000)
        assert (await tray.get_attribute("src")).startswith("blob:")
        await send(page, "What is in this photo?")
        sent = page.locator(".live article.message.user img.thumb")
        await sent.wait_for(timeout=10000)
        reply = page.locator(".live article.message.assistant:not(.streaming)").last
        await reply.wait_for(timeout=15000)
        assert "I see 1 image and you asked: What is in this photo?" in await reply.inner_text()
        await screenshot(page, "web-image-upload")


@pytest.mark.slow
async def test_a_reply_interrupted_by_a_dropped_connection_completes_once(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await send(page, "tell me something slow")
        streaming = page.locator(".live article.message.assistant.streaming")
        await streaming.wait_for(timeout=10000)
        await streaming.filter(has_text="word2").wait_for(timeout=10000)
        await page.evaluate("window.assistantApp.socket.interrupt()")
        await page.wait_for_selector("#connection[data-state=waiting], #connection[data-state=connecting]")
        reply = page.locator(".live article.message.assistant:not(.streaming)").last
        await reply.wait_for(timeout=20000)
        text = await reply.locator(".body").inner_text()
        assert text.split() == SLOW_WORDS
        assert await page.locator(".live article.message.assistant").count() == 1


@pytest.mark.slow
async def test_the_chinese_interface_switches_and_is_remembered(services, browser, admin_password):
    async with signed_in(services, browser, admin_password, PHONE) as page:
        await page.select_option(".topbar .language-select", "zh")
        assert await page.locator("button.send").inner_text() == "发送"
        assert await page.get_attribute("textarea.input", "placeholder") == "给助手发消息…"
        assert await page.get_attribute("html", "lang") == "zh-CN"
        await page.reload()            # still signed in (the refresh cookie), still in Chinese
        await page.wait_for_selector("#connection[data-state=open]")
        assert await page.locator("button.send").inner_text() == "发送"
        await page.click(".menu-button")
        await page.wait_for_selector("body.drawer-open")
        await page.wait_for_timeout(300)   # the drawer slides in
        await screenshot(page, "web-chinese-phone")


@pytest.mark.slow
async def test_hold_to_talk_streams_the_voice_and_the_reply_is_spoken(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await page.click("button.speak")
        assert await page.get_attribute("button.speak", "aria-pressed") == "true"
        await page.focus("button.talk")
        await page.keyboard.down("Space")
        interim = page.locator(".voice-interim").filter(has_text=SPOKEN_TEXT[:7])
        await interim.wait_for(timeout=10000)
        await page.keyboard.up("Space")
        spoken = page.locator(".live article.message.user.spoken").filter(has_text=SPOKEN_TEXT)
        await spoken.wait_for(timeout=10000)
        reply = page.locator(".live article.message.assistant:not(.streaming)").last
        await reply.wait_for(timeout=15000)
        assert "Hello there, friend." in await reply.inner_text()
        played = await page.evaluate("window.assistantApp.pane('chat').speaker.played")
        assert played and all(path.startswith("/api/v1/voice/audio/") for path in played)
        await screenshot(page, "web-voice")


@pytest.mark.slow
async def test_a_refused_token_is_renewed_once_and_signing_out_ends_the_login(services, browser, admin_password):
    async with open_page(PHONE, browser=browser) as (page, errors):
        await sign_in(page, services.frontend_url, admin_password)
        await page.wait_for_selector(".session[aria-current=true]", state="attached")
        sessions = await page.locator(".session-list .session").count()
        # As if the access token had expired: the next call gets 401, renews from the cookie, retries.
        await page.evaluate("window.assistantApp.api.token = 'expired.' + window.assistantApp.api.token")
        await page.click("button.menu-button")
        await page.click(".drawer-actions button")
        await page.locator(".session-list .session").nth(sessions).wait_for(state="attached", timeout=10000)
        assert [error for error in errors if "401" not in error] == []
        assert len(errors) == 1   # the refused call, which the browser reports; nothing else failed
        await page.click("[data-action=signout]")
        await page.wait_for_selector("#login-form", state="visible")
        await page.reload()
        await page.wait_for_selector("#login-form", state="visible")   # the refresh cookie is gone
        assert await page.evaluate("localStorage.getItem('assistant.signed_in')") is None


@pytest.mark.slow
async def test_thinking_is_collapsible_and_a_tool_shows_its_progress(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await send(page, "what time is it?")
        reply = page.locator(".live article.message.assistant:not(.streaming)").last
        await reply.filter(has_text="The clock says").wait_for(timeout=15000)
        thinking = reply.locator("details.thinking")
        assert await thinking.get_attribute("open") is None           # collapsed until opened
        await thinking.locator("summary").click()
        assert "Let me think. The clock will know." in await thinking.inner_text()
        # The tool's line says what it did in the person's words, not the tool's name, and folds
        # away once the reply came.
        tools = reply.locator("details.tools")
        assert await tools.get_attribute("open") is None
        assert await tools.locator("summary").inner_text() == "Checking the time… done"
        await tools.locator("summary").click()
        tool = reply.locator(".tool")
        assert await tool.get_attribute("data-status") == "completed"
        assert await tool.inner_text() == "Checking the time… done"
        assert "get_current_time" not in await reply.inner_text()
        assert await tool.locator("progress").get_attribute("value") == "100"
        await screenshot(page, "web-thinking-tool")


@pytest.mark.slow
async def test_a_message_sent_during_a_reply_is_queued_then_answered(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await page.click(".drawer-actions button")            # a fresh conversation
        await page.wait_for_selector(".messages .empty:not([hidden])")
        await send(page, "something slow please")
        await page.locator(".live article.message.assistant.streaming").wait_for(timeout=10000)
        await send(page, "and then hello")
        queued = page.locator(".live article.message.user .queued")
        await queued.wait_for(timeout=10000)
        assert "Queued" in await queued.inner_text()
        await queued.wait_for(state="detached", timeout=20000)  # its turn started
        await page.locator(".live article.message.assistant:not(.streaming)").nth(1).wait_for(timeout=15000)
        texts = await page.locator(".live article.message.assistant .body").all_inner_texts()
        assert texts[0].split() == SLOW_WORDS and "How can I help?" in texts[1]


@pytest.mark.slow
async def test_search_opens_the_conversation_of_a_hit_and_export_downloads_each_format(services, browser,
                                                                                       admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await page.click(".drawer-actions button")
        await page.wait_for_selector(".messages .empty:not([hidden])")
        await send(page, "Remember the zebra crossing")
        await page.locator(".live article.message.assistant:not(.streaming)").wait_for(timeout=10000)
        page.on("dialog", lambda dialog: dialog.accept("Zebra notes"))
        await page.click(".conversation-header button:has-text('Rename')")
        await page.locator(".session-title", has_text="Zebra notes").wait_for()
        await page.click(".drawer-actions button")           # somewhere else, then find it again
        # At once, while the new chat is being made: its end must not take the focus (and the
        # words typed) from the search box.
        await page.fill("input.search", "zebra cross")
        hit = page.locator(".search-results .session.hit").first
        await hit.wait_for(timeout=10000)
        assert "Zebra notes" in await hit.inner_text()
        await hit.click()
        await page.locator(".history article.message.user", has_text="Remember the zebra crossing").wait_for()
        for value, suffix, marker in (("json", ".json", '"messages"'), ("markdown", ".md", "# Zebra notes"),
                                      ("txt", ".txt", "User:")):
            async with page.expect_download() as started:
                await page.select_option(".session-actions select", value)
            download = await started.value
            assert download.suggested_filename.endswith(suffix)
            assert marker in Path(await download.path()).read_text(encoding="utf-8")


async def chat_titled(page, title: str, text: str) -> None:
    """A new conversation, one exchange in it, renamed `title`."""
    await page.click(".drawer-actions button")
    await page.wait_for_selector(".messages .empty:not([hidden])")
    await send(page, text)
    await page.locator(".live article.message.assistant:not(.streaming)").wait_for(timeout=10000)
    await page.locator(".session-title", has_text=text).wait_for()  # titled from its first message
    page.once("dialog", lambda dialog: dialog.accept(title))
    await page.click(".conversation-header button:has-text('Rename')")
    await page.locator(".session-title", has_text=title).wait_for()


async def assert_both_sides_shown(page, text: str) -> None:
    await page.locator(".history article.message.user", has_text=text).wait_for(timeout=10000)
    await page.locator(".history article.message.assistant").first.wait_for(timeout=10000)
    assert await page.locator(".messages .empty").is_hidden()


@pytest.mark.slow
async def test_going_back_to_a_conversation_shows_both_sides_of_it(services, browser, admin_password):
    """Each message shown once in the tab used to be skipped on the way back: a conversation
    came back blank, or with only the person's side (the replies arrived live)."""
    async with signed_in(services, browser, admin_password) as page:
        await chat_titled(page, "Apples", "Tell me about apples")
        await chat_titled(page, "Pears", "Tell me about pears")
        for title, text in (("Apples", "Tell me about apples"), ("Pears", "Tell me about pears"),
                            ("Apples", "Tell me about apples")):
            await page.locator(".session", has_text=title).first.click()
            await page.locator(".conversation-header", has_text=title).wait_for()
            await assert_both_sides_shown(page, text)
        await page.fill("input.search", "about pears")
        hit = page.locator(".search-results .session.hit").first
        await hit.wait_for(timeout=10000)
        await hit.click()
        await assert_both_sides_shown(page, "Tell me about pears")


@pytest.mark.slow
async def test_a_message_sent_while_a_new_chat_is_made_goes_to_the_new_chat(services, browser, admin_password):
    """Typed at once after "New chat", before the gateway made the conversation: the message used
    to go to the conversation being left, and its reply never showed in the new one."""
    async with signed_in(services, browser, admin_password) as page:
        await chat_titled(page, "Left behind", "Tell me about plums")
        may_answer = asyncio.Event()

        async def held(route) -> None:
            if route.request.method == "POST":
                await may_answer.wait()
            await route.continue_()

        await page.route("**/sessions", held)
        await page.click(".drawer-actions button")
        await send(page, "Tell me about cherries")
        may_answer.set()
        await page.locator(".live article.message.assistant:not(.streaming)").wait_for(timeout=10000)
        await page.locator(".conversation-header", has_text="Tell me about cherries").wait_for()
        await screenshot(page, "web-new-chat-sent-at-once")
        await page.unroute("**/sessions")
        await page.locator(".session", has_text="Left behind").first.click()
        await assert_both_sides_shown(page, "Tell me about plums")
        assert await page.locator(".history article.message.user", has_text="cherries").count() == 0


@pytest.mark.slow
async def test_the_models_title_replaces_the_first_message_title_without_a_reload(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await page.click(".drawer-actions button")
        await page.wait_for_selector(".messages .empty:not([hidden])")
        TRIP_TITLE_GATE.clear()  # the model takes its time over the title
        try:
            await send(page, TRIP_REQUEST)
            await page.locator(".live article.message.assistant:not(.streaming)").wait_for(timeout=10000)
            await page.locator(".session-title", has_text=TRIP_REQUEST).wait_for()  # from the first message
            await page.locator(".session[aria-current=true] .session-name", has_text=TRIP_REQUEST).wait_for()
        finally:
            TRIP_TITLE_GATE.set()
        # Then the model's title, pushed to the page (session_updated): the list and the header.
        await page.locator(".session[aria-current=true] .session-name", has_text=TRIP_TITLE).wait_for(timeout=10000)
        await page.locator(".conversation-header .session-title", has_text=TRIP_TITLE).wait_for()
        assert await page.locator(".session-name", has_text=TRIP_REQUEST).count() == 0


@pytest.mark.slow
async def test_a_pushed_notification_is_a_toast_and_stays_in_the_inbox(services, browser, admin_password):
    import aiohttp

    from tests.web_client.conftest import SERVICE_TOKEN

    async with signed_in(services, browser, admin_password) as page:
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {SERVICE_TOKEN}"}) as http:
            async with http.post(f"{services.gateway_url}/api/v1/notifications/push",
                                 json={"user_id": "admin", "type": "reminder", "title": "Tea",
                                       "body": "The tea is ready"}) as pushed:
                assert pushed.status == 200 and (await pushed.json())["notification"]["delivered"] is True
        toast = page.locator(".toast", has_text="The tea is ready")
        await toast.wait_for(timeout=10000)
        assert "Tea" in await toast.inner_text()
        await page.click("#nav button[data-pane=inbox]")
        item = page.locator(".inbox-item.unread", has_text="The tea is ready")
        await item.wait_for(timeout=10000)
        await item.click()
        await page.locator(".inbox-item:not(.unread)", has_text="The tea is ready").wait_for(timeout=10000)
        await screenshot(page, "web-inbox")


@pytest.mark.slow
async def test_registration_says_so_when_the_server_does_not_allow_it(services, browser):
    async with open_page(PHONE, browser=browser) as (page, errors):
        await page.goto(services.frontend_url)
        await page.click("[data-action=to-register]")
        form = page.locator("#register-form")
        for name, value in (("username", "newperson"), ("nickname", "New"), ("email", "new@example.com"),
                            ("password", "secret-enough"), ("verify_code", "ABC123")):
            await form.locator(f"input[name={name}]").fill(value)
        await form.locator("button[type=submit]").click()
        await form.locator(".form-error", has_text="Registration is not open").wait_for(timeout=10000)
        assert [error for error in errors if "403" not in error] == []


async def push(services, title: str, body: str) -> str:
    import aiohttp

    from tests.web_client.conftest import SERVICE_TOKEN

    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {SERVICE_TOKEN}"}) as http:
        async with http.post(f"{services.gateway_url}/api/v1/notifications/push",
                             json={"user_id": "admin", "type": "info", "title": title, "body": body}) as pushed:
            assert pushed.status == 200
            return (await pushed.json())["notification"]["id"]


async def mark_read(services, path: str) -> None:
    """What another device of the person does: marks notifications read through the API."""
    import aiohttp

    from tests.web_client.conftest import SERVICE_TOKEN

    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {SERVICE_TOKEN}"}) as http:
        async with http.post(f"{services.gateway_url}/api/v1/notifications/{path}",
                             params={"user_id": "admin"}) as answer:
            assert answer.status == 200


async def unread_badge(page, count: int) -> None:
    badge = page.locator("#nav button[data-pane=inbox] .unread-count")
    if count:
        await page.locator(f"#nav button[data-pane=inbox] .unread-count[data-count='{count}']:not([hidden])").wait_for(
            timeout=10000)
        assert await badge.inner_text() == str(count)
        assert await badge.get_attribute("aria-label") == f"{count} unread"
    else:
        await page.locator("#nav button[data-pane=inbox] .unread-count[hidden]").wait_for(state="attached", timeout=10000)


@pytest.mark.slow
@pytest.mark.parametrize("viewport", [DESKTOP, (390, 844)], ids=["desktop", "phone"])
async def test_the_inbox_entry_counts_unread_notifications_live(services, browser, admin_password, viewport):
    await mark_read(services, "read-all")
    async with signed_in(services, browser, admin_password, viewport) as page:
        await unread_badge(page, 0)
        await push(services, "Tea", "The tea is ready")
        await unread_badge(page, 1)
        other = await push(services, "Post", "A parcel came")
        await unread_badge(page, 2)
        if viewport != DESKTOP:
            await screenshot(page, "web-unread-phone")
        await page.click("#nav button[data-pane=inbox]")
        await page.locator(".inbox-item.unread", has_text="The tea is ready").click()
        await unread_badge(page, 1)
        # Read on another device: no frame says so; this one learns it when it reconnects.
        await mark_read(services, f"{other}/read")
        await page.evaluate("window.assistantApp.socket.interrupt()")
        await unread_badge(page, 0)


async def registration_state(page) -> dict:
    """The service worker registration's workers and the caches: what a failure should show."""
    return await page.evaluate(
        "navigator.serviceWorker.getRegistration().then(async (r) => ({installing: r.installing?.state,"
        " waiting: r.waiting?.state, active: r.active?.state, caches: await caches.keys(),"
        " toasts: [...document.querySelectorAll('.toast')].map((t) => t.textContent)}))")


@pytest.mark.slow
async def test_the_app_installs_a_service_worker_and_opens_offline(services, browser, admin_password):
    async with open_page((390, 844), browser=browser, phone=True) as (page, errors):
        await sign_in(page, services.frontend_url, admin_password)
        assert await page.evaluate("Promise.race([navigator.serviceWorker.ready.then(() => true),"
                                   " new Promise((resolve) => setTimeout(() => resolve(false), 15000))])")
        assert await page.locator(".toast", has_text="A new version").count() == 0   # a first install is no update
        await page.reload()
        await page.wait_for_selector("#connection[data-state=open]", timeout=10000)
        assert await page.evaluate("navigator.serviceWorker.controller && navigator.serviceWorker.controller.scriptURL") \
            == services.frontend_url + "/sw.js"
        caches = await page.evaluate("caches.keys()")
        assert len(caches) == 1 and caches[0].startswith("shell-")
        cached = await page.evaluate(f"caches.open({caches[0]!r}).then((cache) => cache.keys())"
                                     ".then((requests) => requests.map((request) => new URL(request.url).pathname))")
        assert "/" in cached and "/static/js/main.js" in cached and not [url for url in cached if url.startswith("/api/")]

        await page.context.set_offline(True)
        await page.reload()
        banner = page.locator("#offline")
        await banner.wait_for(timeout=10000)
        assert "Not connected" in await banner.inner_text()
        assert await page.locator("#login-form").is_visible()     # the shell, from the cache
        await screenshot(page, "web-offline-phone")
        await page.context.set_offline(False)
        # Back online: signed in again from the cookie, the banner gone.
        await page.wait_for_selector("#connection[data-state=open]", timeout=20000)
        assert await banner.is_hidden()

        # A new deployment: a static file more (any change of one does the same) gives /sw.js
        # another version. The worker installs it into a new cache, drops the old one, and the
        # open page says it was updated.
        from plugins.frontend import STATIC

        deployed = STATIC / "test-deployment-marker.txt"
        try:
            deployed.write_text("a new version")
            await page.evaluate("navigator.serviceWorker.getRegistration().then((registration) => registration.update())")
            try:
                await page.locator(".toast", has_text="A new version of the app was installed").wait_for(timeout=15000)
            except Exception as timeout:   # say where the update stopped, for a failure seen only under load
                raise AssertionError(f"no update toast; the registration: {await registration_state(page)}") from timeout
            await screenshot(page, "web-update-toast-phone")
            # On a phone a toast drops from the top, under the top bar: the message box stays free.
            toast_box = await page.locator(".toast").first.bounding_box()
            composer_box = await page.locator(".composer").bounding_box()
            topbar_box = await page.locator(".topbar").bounding_box()
            assert toast_box and composer_box and topbar_box, (toast_box, composer_box, topbar_box)
            assert toast_box["y"] + toast_box["height"] <= composer_box["y"], (toast_box, composer_box)
            assert toast_box["y"] >= topbar_box["y"] + topbar_box["height"], (toast_box, topbar_box)
            # The old cache goes when the new worker's activation has run. That waits for the old
            # worker to be idle: at once when Chromium can tell it so, else its idle timeout (30 s
            # after its last event), so up to a minute here.
            for _ in range(600):
                after = await page.evaluate("caches.keys()")
                if caches[0] not in after:
                    break
                await page.wait_for_timeout(100)
            assert len(after) == 1 and after != caches and after[0].startswith("shell-"), \
                await registration_state(page)
        finally:
            deployed.unlink()
        unexpected = [error for error in errors if "ERR_INTERNET_DISCONNECTED" not in error
                      and "Failed to fetch" not in error]
        assert unexpected == []


# ---------------------------------------------------------------- a message's actions

async def fresh_conversation(page) -> None:
    await page.click(".drawer-actions button")
    await page.wait_for_selector(".messages .empty:not([hidden])")


async def finished_replies(page, count: int):
    """The page's replies once `count` of them finished streaming."""
    replies = page.locator("article.message.assistant:not(.streaming)")
    await replies.nth(count - 1).wait_for(timeout=15000)
    return replies


async def reload(page) -> None:
    await page.reload()
    await page.wait_for_selector("#connection[data-state=open]", timeout=10000)
    await page.locator(".history article.message").first.wait_for(timeout=10000)


async def shown(page, role: str) -> list[str]:
    """The text of each bubble of `role`, without its action buttons."""
    return [" ".join(text.split()) for text in await page.locator(f"article.message.{role}").evaluate_all(
        "items => items.map(item => [...item.querySelectorAll('.part, .body')].map(part => part.innerText).join(' '))")]


async def test_copy_puts_a_messages_text_on_the_clipboard(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        await fresh_conversation(page)
        await send(page, "copy this please")
        reply = (await finished_replies(page, 1)).last
        await reply.hover()
        await reply.locator(".action-copy").click()
        await reply.locator(".action-copy", has_text="Copied").wait_for()
        assert await page.evaluate("navigator.clipboard.readText()") == "Hello there, friend. How can I help?"
        mine = page.locator("article.message.user").last
        await mine.hover()
        await mine.locator(".action-copy").click()
        await mine.locator(".action-copy", has_text="Copied").wait_for()
        assert await page.evaluate("navigator.clipboard.readText()") == "copy this please"


async def test_stop_ends_a_slow_reply_and_what_arrived_is_kept(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await fresh_conversation(page)
        stop = page.locator("button.stop")
        assert await stop.is_hidden()
        await send(page, "something slow please")
        await page.locator(".live article.message.assistant.streaming").filter(has_text="word3").wait_for(timeout=10000)
        await stop.click()
        reply = (await finished_replies(page, 1)).last
        await reply.locator(".stopped", has_text="Stopped.").wait_for(timeout=10000)
        await stop.wait_for(state="hidden")
        words = (await reply.locator(".body").inner_text()).split()
        assert 3 <= len(words) < len(SLOW_WORDS) and words == SLOW_WORDS[:len(words)]
        await reload(page)
        assert await shown(page, "assistant") == [" ".join(words)]
        assert await shown(page, "user") == ["something slow please"]


async def test_regenerate_replaces_the_last_reply(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await fresh_conversation(page)
        await send(page, "first question")
        await finished_replies(page, 1)
        await send(page, "second question")
        replies = await finished_replies(page, 2)
        first, last = replies.first, replies.last
        assert await first.locator(".action-regenerate").is_hidden()  # only the last reply offers it
        await last.evaluate("element => { element.dataset.old = 'yes'; }")
        await last.hover()
        await last.locator(".action-regenerate").click()
        await page.locator("article.message[data-old]").wait_for(state="detached", timeout=10000)
        await finished_replies(page, 2)
        assert await shown(page, "user") == ["first question", "second question"]
        assert len(await shown(page, "assistant")) == 2
        await reload(page)
        assert await shown(page, "user") == ["first question", "second question"]
        assert await shown(page, "assistant") == ["Hello there, friend. How can I help?"] * 2


async def test_editing_a_message_sends_it_again_and_drops_what_followed(services, browser, admin_password):
    async with signed_in(services, browser, admin_password) as page:
        await fresh_conversation(page)
        await send(page, "first words")
        await finished_replies(page, 1)
        await send(page, "second words")
        await finished_replies(page, 2)
        mine = page.locator("article.message.user", has_text="first words")
        await mine.hover()
        await mine.locator(".action-edit").click()
        editor = mine.locator(".editor textarea")
        assert await editor.input_value() == "first words"
        await editor.fill("changed words")
        await editor.press("Enter")
        await page.locator("article.message.user", has_text="second words").wait_for(state="detached", timeout=10000)
        await finished_replies(page, 1)
        await page.locator("article.message.user:not(.pending)", has_text="changed words").wait_for(timeout=10000)
        assert await shown(page, "user") == ["changed words"]
        assert len(await shown(page, "assistant")) == 1
        await reload(page)
        assert await shown(page, "user") == ["changed words"]
        assert await shown(page, "assistant") == ["Hello there, friend. How can I help?"]

LONG_CONVERSATION = 300


def store_long_conversation(database_url: str) -> None:
    """The administrator's "Long" conversation of LONG_CONVERSATION messages (`message 000` ...),
    the person and the assistant taking turns, except that messages 079 and 080 are the two
    parts of one reply (stored as two messages, shown as one bubble), which the boundary of two
    pages cuts (the newest 20, then 50 at a time: 280, 230, 180, 130, 80), and 081 is the
    person's; and a "Short" conversation."""
    import psycopg2

    connection = psycopg2.connect(database_url)
    with connection, connection.cursor() as cursor:
        cursor.execute("INSERT INTO chat_sessions (id, user_id, title, updated_at) VALUES "
                       "('long-one', 'admin', 'Long', now() + interval '1 hour'), "
                       "('short-one', 'admin', 'Short', now() + interval '1 minute')")
        cursor.execute(
            "INSERT INTO chat_messages (session_id, user_id, role, content, created_at) "
            "SELECT 'long-one', 'admin', CASE WHEN (n %% 2 = 0 AND n <> 80) OR n = 81 THEN 'user' ELSE 'assistant' END, "
            "'message ' || lpad(n::text, 3, '0'), now() - (%s - n) * interval '1 minute' "
            "FROM generate_series(0, %s - 1) AS n ORDER BY n", (LONG_CONVERSATION, LONG_CONVERSATION))
        cursor.execute("INSERT INTO chat_messages (session_id, user_id, role, content) "
                       "VALUES ('short-one', 'admin', 'user', 'hi'), ('short-one', 'admin', 'assistant', 'hello')")
    connection.close()


@pytest.mark.slow
async def test_going_back_to_a_long_conversation_shows_its_end_and_scrolling_up_reads_it_all(
        services, browser, admin_password):
    """A long conversation used to come back only after every page of it was fetched from the
    oldest on; now its newest page comes in one request and older ones as the person scrolls up,
    in order, each once, the message being read staying where it was on the screen."""
    store_long_conversation(services.database_url)
    async with signed_in(services, browser, admin_password) as page:
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url) if "/long-one/messages" in request.url else None)
        await page.locator(".session", has_text="Short").first.click()
        await page.locator(".history .part", has_text="hello").wait_for()
        requests.clear()
        await page.locator(".session", has_text="Long").first.click()
        newest = page.locator(".history .part", has_text="message 299")
        await newest.wait_for()
        assert len(requests) == 1 and "latest=true" in requests[0]
        assert await newest.evaluate("""(element) => {
            const view = element.closest('.messages').getBoundingClientRect();
            const box = element.getBoundingClientRect();
            return box.bottom <= view.bottom + 1 && box.top >= view.top - 1;
        }""")
        assert await page.locator(".history article.message.user").count() > 0
        assert await page.locator(".history article.message.assistant").count() > 0
        assert await page.locator(".history .part").count() < LONG_CONVERSATION

        pages = 0
        while await page.locator(".messages .older").is_visible():
            reading_text, reading_top = await page.evaluate("""() => {
                const messages = document.querySelector('.messages');
                messages.scrollTop = 0;
                const part = document.querySelector('.history .part');
                return [part.textContent, part.getBoundingClientRect().top];
            }""")
            await page.wait_for_function("(text) => document.querySelector('.history .part').textContent !== text",
                                         arg=reading_text, timeout=10000)
            top = await page.locator(".history .part", has_text=reading_text).evaluate(
                "(element) => element.getBoundingClientRect().top")
            assert abs(top - reading_top) <= 2, (reading_text, reading_top, top)
            pages += 1
        assert pages >= 2
        texts = await page.locator(".history .part").all_text_contents()
        assert [text.strip() for text in texts] == [f"message {n:03d}" for n in range(LONG_CONVERSATION)]
        joined = page.locator(".history article.message.assistant", has_text="message 079")
        assert await joined.locator(".part").all_text_contents() == ["message 079", "message 080"]
        assert await page.locator(".history article.message").count() == LONG_CONVERSATION - 1
        assert all("before_id=" in url for url in requests[1:]) and len(requests) == pages + 1


@pytest.mark.slow
async def test_going_back_shows_the_remembered_page_at_once_then_what_changed_meanwhile(
        services, browser, admin_password):
    """Going back to a conversation opened before in the page does not wait for the network: its
    newest page is shown from memory, and the answer, when it comes, brings what changed since
    (here written straight into the database: an edit and a new message)."""
    import psycopg2

    connection = psycopg2.connect(services.database_url)
    with connection, connection.cursor() as cursor:
        cursor.execute("INSERT INTO chat_sessions (id, user_id, title, updated_at) VALUES "
                       "('remembered-one', 'admin', 'Remembered', now() + interval '2 hours'), "
                       "('elsewhere-one', 'admin', 'Elsewhere', now() + interval '90 minutes')")
        cursor.execute("INSERT INTO chat_messages (session_id, user_id, role, content) "
                       "SELECT 'remembered-one', 'admin', CASE WHEN n % 2 = 0 THEN 'user' ELSE 'assistant' END, "
                       "'kept ' || lpad(n::text, 2, '0') FROM generate_series(0, 29) AS n ORDER BY n")
        cursor.execute("INSERT INTO chat_messages (session_id, user_id, role, content) "
                       "VALUES ('elsewhere-one', 'admin', 'user', 'over there')")
    async with signed_in(services, browser, admin_password) as page:
        await page.locator(".history .part", has_text="kept 29").wait_for()
        await page.locator(".session", has_text="Elsewhere").first.click()
        await page.locator(".history .part", has_text="over there").wait_for()
        with connection, connection.cursor() as cursor:
            cursor.execute("UPDATE chat_messages SET content = 'kept 29, edited' "
                           "WHERE session_id = 'remembered-one' AND content = 'kept 29'")
            cursor.execute("INSERT INTO chat_messages (session_id, user_id, role, content) "
                           "VALUES ('remembered-one', 'admin', 'user', 'new 30')")
        answer_may_come = asyncio.Event()

        async def held(route) -> None:
            await answer_may_come.wait()
            await route.continue_()

        await page.route("**/sessions/remembered-one/messages*", held)
        await page.locator(".session", has_text="Remembered").first.click()
        await page.locator(".history .part", has_text="kept 28").wait_for()
        assert await page.locator(".history .part", has_text="new 30").count() == 0
        answer_may_come.set()
        newest = page.locator(".history .part", has_text="new 30")
        await newest.wait_for()
        await page.locator(".history .part", has_text="kept 29, edited").wait_for()
        texts = [text.strip() for text in await page.locator(".history .part").all_text_contents()]
        assert texts[-3:] == ["kept 28", "kept 29, edited", "new 30"] and len(texts) == len(set(texts))
        assert await newest.evaluate("""(element) => {
            const view = element.closest('.messages').getBoundingClientRect();
            return element.getBoundingClientRect().bottom <= view.bottom + 1;
        }""")
    connection.close()
