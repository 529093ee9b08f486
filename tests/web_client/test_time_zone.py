"""A person in New York, with no language model: "remind me ... tomorrow at 9am" means 9 in New
York. The web client gives a profile whose zone nobody chose the browser's zone on sign-in, the
offline assistant reads the time there, and the Reminders pane shows it as 9:00 AM. Real
frontend, gateway and AI core; Chromium with `timezone_id`."""
from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import aiohttp
import pytest
import pytest_asyncio

from gateway.app import create_app
from gateway.config import Config
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import auth_plugin, tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.frontend import plugin as frontend_plugin
from plugins.memory.thinking import ThinkingPlugin
from plugins.notifications import plugin as notifications_plugin
from plugins.reminders import plugin as reminders_plugin
from plugins.reminders.assistant import tools_plugin as reminder_tools_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.conftest import TEST_ADMIN_PASSWORD
from tests.support.browser import needs_browser, open_browser, screenshot
from tests.support.servers import free_port
from tests.web_client.conftest import SERVICE_TOKEN, Services, start

pytestmark = [needs_browser, pytest.mark.asyncio(loop_scope="module")]

NEW_YORK = "America/New_York"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def services(postgres_server, tmp_path_factory):
    """The frontend, the gateway and the AI core with no model (its offline assistant); the
    machine's zone is UTC, so a reminder read in the server's zone would land five hours off."""
    database = postgres_server.create_database()
    data = tmp_path_factory.mktemp("web-zone")
    gateway_url = f"http://127.0.0.1:{free_port()}"

    def config(**overrides) -> Config:
        return Config.load(overrides={
            "core.data_dir": str(data), "auth.admin_username": "admin", "auth.admin_password": TEST_ADMIN_PASSWORD,
            "auth.jwt_secret": "test-jwt-secret-" + "x" * 32, "auth.service_token": SERVICE_TOKEN,
            "database.url": postgres_server.database_url(database), "peers.gateway_url": gateway_url,
            **overrides}, environ={})

    runners = []
    try:
        runner, ai_core_port = await start(create_app("ai-core", config(**{"plugins.ai_core": {"timezone": "UTC"}}),
                                                      plugins=[tokens_plugin, ai_core_plugin, reminder_tools_plugin]))
        runners.append(runner)
        gateway = create_app("gateway", config(**{
            "peers.ai_core_url": f"http://127.0.0.1:{ai_core_port}",
            "plugins.auth": {"default_timezone": "UTC", "rate_limit_per_minute": 1000},
            "plugins.chat": {"sweep_interval": 0.5, "stop_timeout": 2}}),
            plugins=[tokens_plugin, auth_plugin, sessions_plugin, notifications_plugin, reminders_plugin,
                     ai_core_client_plugin, chat_plugin, ThinkingPlugin()])
        runner, _ = await start(gateway, int(gateway_url.rsplit(":", 1)[1]))
        runners.append(runner)
        runner, frontend_port = await start(create_app("frontend", config(), plugins=[frontend_plugin]))
        runners.append(runner)
        yield Services(frontend_url=f"http://127.0.0.1:{frontend_port}", gateway_url=gateway_url)
    finally:
        for runner in reversed(runners):
            await runner.cleanup()
        postgres_server.drop_database(database)


async def profile_and_reminders(gateway_url: str) -> tuple[dict, list[dict]]:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{gateway_url}/api/v1/auth/login",
                             json={"username": "admin", "password": TEST_ADMIN_PASSWORD}) as response:
            token = (await response.json())["token"]
        headers = {"Authorization": f"Bearer {token}"}
        async with http.get(f"{gateway_url}/api/v1/profile", headers=headers) as response:
            profile = await response.json()
        async with http.get(f"{gateway_url}/api/v1/reminders", headers=headers) as response:
            return profile, (await response.json())["reminders"]


@pytest.mark.slow
async def test_a_reminder_said_in_new_york_is_at_nine_in_new_york_and_shown_so(services):
    async with open_browser() as chromium:
        context = await chromium.new_context(viewport={"width": 1280, "height": 800}, locale="en-US",
                                             timezone_id=NEW_YORK)
        try:
            page = await context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            await page.goto(services.frontend_url)
            await page.fill("input[name=username]", "admin")
            await page.fill("input[name=password]", TEST_ADMIN_PASSWORD)
            await page.click("#login-form button[type=submit]")
            await page.wait_for_selector("#connection[data-state=open]", timeout=15000)

            await page.fill("textarea.input", "remind me to call mom tomorrow at 9am")
            await page.keyboard.press("Enter")
            await page.locator(".live article.message.assistant:not(.streaming)").wait_for(timeout=15000)

            profile, reminders = await profile_and_reminders(services.gateway_url)
            assert profile["timezone"] == NEW_YORK and profile["timezone_chosen"] is True
            assert len(reminders) == 1, await page.locator(".live article.message.assistant").last.inner_text()
            due = datetime.fromisoformat(reminders[0]["remind_at"].replace("Z", "+00:00")).astimezone(ZoneInfo(NEW_YORK))
            tomorrow = (datetime.now(ZoneInfo(NEW_YORK)) + timedelta(days=1)).date()
            assert (due.date(), due.hour, due.minute) == (tomorrow, 9, 0)

            await page.click("#nav button[data-pane=reminders]")
            shown = page.locator(".reminder", has_text="call mom").locator("time")
            await shown.wait_for(timeout=10000)
            assert "9:00" in (text := await shown.inner_text()) and "AM" in text, text
            assert errors == []
        finally:
            await context.close()


@pytest.mark.slow
async def test_a_zone_the_person_chose_is_not_replaced_by_another_device(services):
    """Signed in again from a browser in Shanghai: the zone stays New York's (chosen above)."""
    async with open_browser() as chromium:
        context = await chromium.new_context(timezone_id="Asia/Shanghai")
        try:
            page = await context.new_page()
            await page.goto(services.frontend_url)
            await page.fill("input[name=username]", "admin")
            await page.fill("input[name=password]", TEST_ADMIN_PASSWORD)
            await page.click("#login-form button[type=submit]")
            await page.wait_for_selector("#connection[data-state=open]", timeout=15000)
        finally:
            await context.close()
    profile, _ = await profile_and_reminders(services.gateway_url)
    assert profile["timezone"] == NEW_YORK


async def signed_in_page(context, url: str):
    page = await context.new_page()
    await page.goto(url)
    await page.fill("input[name=username]", "admin")
    await page.fill("input[name=password]", TEST_ADMIN_PASSWORD)
    await page.click("#login-form button[type=submit]")
    await page.wait_for_selector("#connection[data-state=open]", timeout=15000)
    return page


@pytest.mark.slow
async def test_settings_change_the_zone_the_language_the_spoken_replies_and_sign_out_other_devices(services):
    async with open_browser() as chromium:
        phone_context = await chromium.new_context(viewport={"width": 390, "height": 844})
        laptop_context = await chromium.new_context(viewport={"width": 1280, "height": 800}, locale="en-US",
                                                    timezone_id=NEW_YORK)
        try:
            page = await signed_in_page(laptop_context, services.frontend_url)
            phone = await signed_in_page(phone_context, services.frontend_url)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("dialog", lambda dialog: dialog.accept())

            await page.click("#nav-top button[data-pane=settings]")
            await page.wait_for_selector(".pane-settings:not([hidden])")
            assert await page.locator(".pane-settings select[name=timezone]").input_value() == NEW_YORK
            await page.select_option(".pane-settings select[name=timezone]", "Asia/Tokyo")
            await page.click(".pane-settings .settings-zone button[type=submit]")
            await page.locator(".pane-settings .pane-status", has_text="Asia/Tokyo").wait_for()
            profile, _ = await profile_and_reminders(services.gateway_url)
            assert profile["timezone"] == "Asia/Tokyo"
            await page.click(".pane-settings [data-action=device-zone]")
            await page.locator(".pane-settings .pane-status", has_text=NEW_YORK).wait_for()
            await screenshot(page, "web-settings")

            # Spoken replies: the chat's speaker button follows.
            await page.check(".pane-settings input[name=speak]")
            await page.click("#nav button[data-pane=chat]")
            assert await page.get_attribute("button.speak", "aria-pressed") == "true"
            await page.click("#nav-top button[data-pane=settings]")
            await page.uncheck(".pane-settings input[name=speak]")
            await page.click("#nav button[data-pane=chat]")
            assert await page.get_attribute("button.speak", "aria-pressed") == "false"

            # Every other device signed out: the phone cannot renew and shows the sign-in form on reload.
            await page.click("#nav-top button[data-pane=settings]")
            await page.click(".pane-settings [data-action=sign-out-others]")
            await page.locator(".pane-settings .pane-status", has_text="other logins").wait_for()
            await phone.reload()
            await phone.wait_for_selector("#login:not([hidden])", timeout=15000)
            await page.reload()
            await page.wait_for_selector("#connection[data-state=open]", timeout=15000)  # this one stays

            # The language: the whole interface switches, and the pane with it.
            await page.click("#nav-top button[data-pane=settings]")
            await page.select_option(".pane-settings select[name=language]", "zh")
            await page.locator("#nav-top button[data-pane=settings][aria-label=\"设置\"]").wait_for()
            await page.locator(".pane-settings h2", has_text="设置").wait_for()
            assert errors == []
        finally:
            await phone_context.close()
            await laptop_context.close()


@pytest.mark.slow
async def test_the_memories_pane_says_plainly_that_thinking_needs_a_model(services):
    """No model here: the assistant never reflects on conversations, and the person is told so."""
    async with open_browser() as chromium:
        context = await chromium.new_context(locale="en-US", timezone_id=NEW_YORK)
        try:
            page = await signed_in_page(context, services.frontend_url)
            await page.click("#nav button[data-pane=memories]")
            notice = page.locator(".pane-memories .thinking-off")
            await notice.wait_for(timeout=10000)
            assert "needs a language model" in await notice.inner_text()
        finally:
            await context.close()
