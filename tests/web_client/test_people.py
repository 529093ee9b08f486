"""The people of a household in the web client, in a real headless Chromium against the real
frontend (its proxy) and gateway (the auth plugin's people routes): a person opens their
invitation link and chooses a password; a person signed in with a one-time password chooses
their own before anything else, asked again after a reload until it is done. The administrator
creates each person through the REST API."""
from __future__ import annotations

import aiohttp
import pytest
import pytest_asyncio

from tests.conftest import TEST_ADMIN_PASSWORD
from tests.support.browser import needs_browser, open_browser, open_page, screenshot

pytestmark = [needs_browser, pytest.mark.asyncio(loop_scope="module")]

CHOSEN_PASSWORD = "my own secret"
# Chromium's own line for an answer of 400, which the page asked for on purpose (a spent code).
REFUSED_LOAD = "console: Failed to load resource: the server responded with a status of 400 (Bad Request)"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser():
    async with open_browser() as chromium:
        yield chromium


async def gateway(services, method: str, path: str, token: str | None = None, **options) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as http:
        async with http.request(method, f"{services.gateway_url}/api/v1{path}", headers=headers,
                                **options) as response:
            return response.status, await response.json()


async def add_person(services, username: str, *, invite: bool) -> dict:
    """The administrator adds a person: with an invitation, or with a one-time password."""
    status, signed_in = await gateway(services, "POST", "/auth/login",
                                      json={"username": "admin", "password": TEST_ADMIN_PASSWORD})
    assert status == 200, signed_in
    status, person = await gateway(services, "POST", "/admin/users", signed_in["token"],
                                   json={"username": username, "invite": invite})
    assert status == 201, person
    return person


async def can_sign_in(services, username: str, password: str) -> bool:
    status, _ = await gateway(services, "POST", "/auth/login",
                              json={"username": username, "password": password})
    return status == 200


async def in_the_chat(page) -> None:
    await page.wait_for_selector("#connection[data-state=open]", timeout=15000)
    await page.wait_for_selector(".pane-chat:not([hidden]) textarea.input", timeout=10000)
    assert await page.locator("#login").is_hidden()


@pytest.mark.slow
async def test_an_invitation_link_lets_the_person_choose_a_password_and_sign_in(services, browser):
    person = await add_person(services, "mia", invite=True)
    link = f"{services.frontend_url}/?invitation={person['invitation_code']}"
    async with open_page(browser=browser) as (page, errors):
        await page.goto(link)
        form = page.locator("#invitation-form")
        await form.wait_for()
        assert await page.locator("#login-form").is_hidden()
        assert await form.locator("h1").inner_text() == "Welcome"
        await form.locator("input[name=password]").fill(CHOSEN_PASSWORD)
        await form.locator("input[name=repeat]").fill("something else")
        await form.locator("button[type=submit]").click()
        assert await form.locator(".form-error").inner_text() == "The two passwords differ."
        await form.locator("input[name=repeat]").fill(CHOSEN_PASSWORD)
        assert await form.locator(".form-error").is_hidden()   # the correction clears the complaint
        await screenshot(page, "web-invitation")
        await form.locator("button[type=submit]").click()
        await in_the_chat(page)
        assert "invitation" not in page.url
        assert await page.locator("#who").inner_text() == "mia"
        # Signed in for good: a reload is signed in again from the refresh cookie.
        await page.reload()
        await in_the_chat(page)
        assert errors == []
    assert await can_sign_in(services, "mia", CHOSEN_PASSWORD)

    # The link again, in another browser: the code is spent, and the page says so.
    async with open_page(browser=browser) as (page, errors):
        await page.goto(link)
        form = page.locator("#invitation-form")
        await form.locator("input[name=password]").fill("another password")
        await form.locator("input[name=repeat]").fill("another password")
        await form.locator("button[type=submit]").click()
        await form.locator(".form-error:not([hidden])").wait_for()
        assert "expired or was used already" in await form.locator(".form-error").inner_text()
        assert "invitation" not in page.url
        assert errors in ([], [REFUSED_LOAD])
    assert not await can_sign_in(services, "mia", "another password")


@pytest.mark.slow
async def test_a_spent_invitation_is_explained_in_chinese(services, browser):
    async with open_page(browser=browser, locale="zh-CN") as (page, errors):
        await page.goto(f"{services.frontend_url}/?invitation=no-such-code")
        form = page.locator("#invitation-form")
        assert await form.locator("h1").inner_text() == "欢迎"
        await form.locator("input[name=password]").fill(CHOSEN_PASSWORD)
        await form.locator("input[name=repeat]").fill(CHOSEN_PASSWORD)
        await form.locator("button[type=submit]").click()
        await form.locator(".form-error:not([hidden])").wait_for()
        assert await form.locator(".form-error").inner_text() == \
            "此邀请无法使用：已过期或已被使用。请向管理员索取新的邀请。"
        # "I have an account" leads to the ordinary sign-in.
        await form.locator("[data-action=invitation-to-login]").click()
        await page.locator("#login-form").wait_for()
        assert errors in ([], [REFUSED_LOAD])


async def page_reloaded_in_the_middle(page, one_time: str) -> None:
    """A reload before the new password is saved: the profile says the change is pending, so the
    page asks again, with the one-time password too (no longer in the page's memory)."""
    await page.reload()
    form = page.locator("#password-form")
    await form.wait_for()
    assert await page.locator("#shell").is_hidden()
    assert await page.locator(".pane-chat").count() == 0
    current = form.locator("input[name=current_password]")
    assert await current.is_visible()
    assert await form.locator(".current-password span").inner_text() == "一次性密码"
    await current.fill(one_time)
    await form.locator("input[name=new_password]").fill(CHOSEN_PASSWORD)
    await form.locator("input[name=repeat]").fill(CHOSEN_PASSWORD)
    await screenshot(page, "web-password-change-after-reload")


@pytest.mark.slow
@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
async def test_a_one_time_password_is_changed_before_anything_else(services, browser, locale):
    username = "noah" if locale == "en-US" else "lin"
    person = await add_person(services, username, invite=False)
    one_time = person["one_time_password"]
    async with open_page(browser=browser, locale=locale) as (page, errors):
        await page.goto(services.frontend_url)
        await page.fill("#login-form input[name=username]", username)
        await page.fill("#login-form input[name=password]", one_time)
        await page.click("#login-form button[type=submit]")
        form = page.locator("#password-form")
        await form.wait_for()
        # Nothing else first: no chat, no connection.
        assert await page.locator("#shell").is_hidden()
        assert await page.locator(".pane-chat").count() == 0
        assert await form.locator("h1").inner_text() == ("Choose a new password" if locale == "en-US" else "设置新密码")
        await form.locator("input[name=new_password]").fill(CHOSEN_PASSWORD)
        await form.locator("input[name=repeat]").fill(CHOSEN_PASSWORD + "!")
        await form.locator("button[type=submit]").click()
        assert await form.locator(".form-error").inner_text() == (
            "The two passwords differ." if locale == "en-US" else "两次输入的密码不一致。")
        await form.locator("input[name=repeat]").fill(CHOSEN_PASSWORD)
        if locale == "en-US":
            assert await form.locator("input[name=current_password]").is_hidden()  # kept from the sign-in
            await screenshot(page, "web-password-change")
        else:
            await page_reloaded_in_the_middle(page, one_time)
        await form.locator("button[type=submit]").click()
        await in_the_chat(page)
        # The new login's refresh cookie works: a reload is signed in, and not asked again.
        await page.reload()
        await in_the_chat(page)
        assert await page.locator("#password-form").is_hidden()
        assert errors == []
    assert await can_sign_in(services, username, CHOSEN_PASSWORD)
    assert not await can_sign_in(services, username, one_time)
