"""The People panel in a real headless Chromium, against a real console whose gateway runs (the
one service the panel needs): the administrator adds a person (the one-time password is shown
once), sees the person's API key with its last use, revokes it, disables the person, and deletes
them after confirming the counts of what goes. The screenshot is linked from docs/console.md."""
from __future__ import annotations

import os
import subprocess
import sys

import aiohttp
import pytest
import pytest_asyncio

from gateway.config import ENVIRONMENT, PROJECT_ROOT
from tests.console.browser.test_pages import call, conf_directory, wait_for_health
from tests.support.browser import needs_browser, open_browser, open_page, screenshot
from tests.support.servers import free_port

pytestmark = [needs_browser, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

ADMIN_PASSWORD = "console-people-admin"


@pytest.fixture(scope="module")
def console(tmp_path_factory, postgres_server):
    directory = tmp_path_factory.mktemp("console-people")
    database = postgres_server.create_database()
    environ = {name: value for name, value in os.environ.items() if name not in ENVIRONMENT}
    environ.pop("CONSOLE_TOKEN", None)
    environ.update({
        "GATEWAY_CONF_DIR": str(conf_directory(directory)), "DATA_DIR": str(directory / "data"),
        "DATABASE_URL": postgres_server.database_url(database), "ADMIN_PASSWORD": ADMIN_PASSWORD,
        "JWT_SECRET": "console-people-jwt-secret-" + "x" * 32, "SERVICE_TOKEN": "console-people-service-token",
        "HF_HUB_OFFLINE": "1",
    })
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (directory / "console.out").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "console", "serve", "-p", str(port)], env=environ,
                               cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_health(base, process)
        # Deleting a person asks every service that keeps something of them (docs/auth.md).
        for service in ("memory-service", "ai-core", "platform-bridge", "gateway"):
            call(base, "POST", f"/api/services/{service}/start", timeout=180)
        yield base
    finally:
        for service in ("gateway", "platform-bridge", "ai-core", "memory-service"):
            try:
                call(base, "POST", f"/api/services/{service}/stop", timeout=60)
            except OSError:
                pass
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        postgres_server.drop_database(database)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser():
    async with open_browser() as chromium:
        yield chromium


async def test_the_people_panel_adds_disables_revokes_and_deletes(console, browser):
    gateway = "http://127.0.0.1:%d" % call(console, "GET", "/api/services/gateway")["port"]
    async with open_page(browser=browser) as (page, errors):
        confirmations: list[str] = []

        async def answer(dialog):
            confirmations.append(dialog.message)
            await dialog.accept()

        page.on("dialog", answer)
        await page.goto(console + "/people")
        await page.locator("#people-list .empty, #people-list table").first.wait_for()
        form = page.locator("#person-form")
        await form.locator("[name=username]").fill("tessa")
        await form.locator("[name=nickname]").fill("Tessa")
        await form.locator("button[type=submit]").click()
        secret = page.locator("#person-secret code.secret")
        await secret.wait_for()
        password = await secret.inner_text()
        await page.locator("#people-list tr", has_text="user_tessa").wait_for()

        async with aiohttp.ClientSession() as http:
            login = await (await http.post(gateway + "/api/v1/auth/login",
                                           json={"username": "tessa", "password": password})).json()
            # A one-time password's login opens nothing but choosing her own (docs/auth.md).
            changed = await (await http.post(gateway + "/api/v1/auth/password",
                                             json={"current_password": password, "new_password": "tessas-own"},
                                             headers={"Authorization": f"Bearer {login['token']}"})).json()
            token = {"Authorization": f"Bearer {changed['token']}"}
            key = await (await http.post(gateway + "/api/v1/auth/api-keys", json={"name": "garden sensor",
                                                                                  "scopes": ["read"]},
                                         headers=token)).json()
            assert (await http.get(gateway + "/api/v1/profile",
                                   headers={"Authorization": f"Bearer {key['key']}"})).status == 200
            await page.reload()
            keys = page.locator("#keys-list tr", has_text="garden sensor")
            await keys.wait_for()
            assert "never" not in (await keys.locator("td").nth(3).inner_text())  # its last use is shown
            await screenshot(page, "console-people")

            await keys.locator("button", has_text="Revoke").click()
            await keys.locator(".badge", has_text="revoked").wait_for()
            assert (await http.get(gateway + "/api/v1/profile",
                                   headers={"Authorization": f"Bearer {key['key']}"})).status == 401

            row = page.locator("#people-list tr", has_text="user_tessa")
            await row.locator("button", has_text="Disable").click()
            await row.locator(".badge", has_text="disabled").wait_for()
            assert (await http.get(gateway + "/api/v1/profile", headers=token)).status == 401

            await row.locator("button", has_text="Delete").click()
            await row.wait_for(state="detached")
        assert confirmations and "tessa" in confirmations[0] and "api keys" not in confirmations[0]
        assert call(console, "GET", "/api/people")["total"] == 0
        assert errors == []
