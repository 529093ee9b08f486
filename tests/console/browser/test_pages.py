"""The console's web pages in a real headless Chromium, against a real console running all eight
services of the real service table (on free ports, through GATEWAY_CONF_DIR) on the tests'
PostgreSQL. One console and one browser for the module. Each test saves the screenshot that
docs/console.md ("Pages") links to."""
from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from gateway.config import PROJECT_ROOT
from gateway.plugins import environment_names
from tests.support.browser import needs_browser, open_browser, open_page, screenshot
from tests.support.servers import free_port

pytestmark = [needs_browser, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

ADMIN_PASSWORD = "console-pages-admin"
HOSTILE = '<img src="x" onerror="window.ran = 1"> <b>bold?</b>'
RECORDING = PROJECT_ROOT / "bench" / "voice" / "recordings" / "sense_and_sensibility_01_austen_64kb-0880.wav"
# Each panel, and what shows that it drew its data (or its "service is down" state).
PANELS = {
    "dashboard": ("/", "#card-services"),
    "memory": ("/memory", "#memory-list table"),
    "sessions": ("/sessions", "#sessions-users table"),
    "services": ("/services", "#services-table table"),
    "performance": ("/performance", "#chart-memory path.series"),
    "iot": ("/iot", "#iot-devices .device"),
    "tool-calls": ("/tool-calls", "#tool-stats table"),
    "stt": ("/stt", "#stt-status table"),
    "database": ("/database", "#db-ports table"),
    "thinking": ("/thinking", "#thinking-list table"),
    "timeline": ("/timeline", "#timeline-list table"),
    "chat-platforms": ("/chat-platforms", "#bots :is(table, .empty)"),
    "clients": ("/clients", "#clients-list table"),
    "model-config": ("/model-config", "#providers :is(table, .empty)"),
}


def call(base: str, method: str, path: str, body: dict | None = None, timeout: float = 60) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"{}")


def wait_for_health(base: str, process: subprocess.Popen, deadline: float = 30) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if process.poll() is not None:
            raise RuntimeError(f"the console exited with {process.returncode}")
        try:
            call(base, "GET", "/api/health", timeout=1)
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the console did not answer its health check")


def conf_directory(directory: Path) -> Path:
    """A copy of conf/ whose services listen on free ports, sampled every second."""
    conf = directory / "conf"
    shutil.copytree(PROJECT_ROOT / "conf", conf)
    table = conf / "services.toml"
    table.write_text(re.sub(r"(?m)^port = \d+$", lambda _: f"port = {free_port()}", table.read_text()))
    defaults = conf / "default.toml"
    defaults.write_text(defaults.read_text().replace("performance_interval = 5", "performance_interval = 1"))
    return conf


@pytest.fixture(scope="module")
def console(tmp_path_factory, postgres_server):
    """`http://127.0.0.1:<port>` of a console whose eight services all run."""
    directory = tmp_path_factory.mktemp("console-pages")
    database = postgres_server.create_database()
    known = environment_names()
    environ = {name: value for name, value in os.environ.items() if name not in known}
    environ.pop("CONSOLE_TOKEN", None)
    environ.update({
        "GATEWAY_CONF_DIR": str(conf_directory(directory)), "DATA_DIR": str(directory / "data"),
        "DATABASE_URL": postgres_server.database_url(database), "ADMIN_PASSWORD": ADMIN_PASSWORD,
        "JWT_SECRET": "console-pages-jwt-secret-" + "x" * 32, "SERVICE_TOKEN": "console-pages-service-token",
        "HF_HUB_OFFLINE": "1",
    })
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (directory / "console.out").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "console", "serve", "-p", str(port)], env=environ,
                               cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_health(base, process)
        # Concurrently, not in order (start-all): they wait on each other only at their calls.
        services = [row["id"] for row in call(base, "GET", "/api/services")["services"]]
        with concurrent.futures.ThreadPoolExecutor(len(services)) as pool:
            list(pool.map(lambda service: call(base, "POST", f"/api/services/{service}/start", timeout=180), services))
        seed(base)
        yield base
    finally:
        stop_everything(base, process)
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        postgres_server.drop_database(database)


def stop_everything(base: str, process: subprocess.Popen) -> None:
    """Stop the services concurrently (the console alone would stop them one by one)."""
    if process.poll() is not None:
        return
    try:
        services = [row["id"] for row in call(base, "GET", "/api/services", timeout=5)["services"]]
        with concurrent.futures.ThreadPoolExecutor(len(services)) as pool:
            list(pool.map(lambda service: call(base, "POST", f"/api/services/{service}/stop", timeout=60), services))
    except OSError:
        pass  # the console's own stop still stops them


def seed(base: str) -> None:
    """What an operator would find after a little use, so that the pictures show something."""
    for content, category in [("My name is Alice and I live in Lisbon", "identity"),
                              ("I am allergic to peanuts", "health"),
                              ("I like green tea in the morning", "preference")]:
        call(base, "POST", "/api/memory", {"user_id": "alice", "content": content, "category": category,
                                           "priority": 7})
    # Markup in stored text is shown as text, never run (and the policy would refuse it anyway).
    call(base, "POST", "/api/memory", {"user_id": "mallory", "content": HOSTILE, "category": "other"})
    call(base, "POST", "/api/v1/thinking", {"user_id": "alice", "kind": "reflection",
                                            "content": "Alice mentioned tea twice this week.",
                                            "suggestion": "Offer a tea timer in the morning."})
    call(base, "POST", "/api/model-config/providers/local", {"base_url": "http://127.0.0.1:9/v1"})
    call(base, "POST", "/api/model-config/models/local-small", {"name": "small", "provider": "local",
                                                                "priority": 1, "params": {"temperature": 0.3}})


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def phone_in_a_chat(console):
    """The administrator's phone connected to the gateway's chat channel, having asked the time
    (the offline agent answers with the `get_current_time` tool): a live session with history,
    a known client and a tool call for the Sessions, Clients and Tool Calls panels."""
    gateway = "http://127.0.0.1:%d" % call(console, "GET", "/api/services/gateway")["port"]
    async with aiohttp.ClientSession() as http:
        login = await http.post(gateway + "/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
        token = (await login.json())["token"]
        await http.post(gateway + "/api/v1/sessions", json={"session_id": "kitchen", "title": "Dinner plans"},
                        headers={"Authorization": f"Bearer {token}"})
        async with http.ws_connect(gateway + "/ws/chat", params={
                "token": token, "session_id": "kitchen", "client_id": "phone-1", "device_name": "Kitchen phone"},
                headers={"User-Agent": "AssistantApp/1.0 (Android 14)"}) as socket:
            await socket.send_json({"type": "message", "content": "what time is it?", "client_msg_id": "m1"})
            async for frame in socket:
                if json.loads(frame.data).get("type") == "stream_end":
                    break
            yield socket


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser():
    async with open_browser() as chromium:
        yield chromium


async def show(page, console: str, panel: str) -> None:
    path, ready = PANELS[panel]
    await page.goto(console + path)
    await page.wait_for_selector(ready, timeout=15000)


@pytest.mark.parametrize("panel", list(PANELS))
async def test_every_panel_loads_and_draws_its_data(console, phone_in_a_chat, browser, panel):
    async with open_page(browser=browser) as (page, errors):
        await show(page, console, panel)
        await page.wait_for_selector("#push-state.push-on")
        assert await page.locator("#service-banner").is_hidden()  # every service runs
        if panel == "sessions":  # the phone's conversation, as stored
            await page.click("#sessions-users button:has-text('History')")
            await page.locator("#sessions-history td", has_text="what time is it?").wait_for()
        if panel in ("memory", "timeline"):
            assert await page.locator("td", has_text=HOSTILE).count() == 1
            assert await page.evaluate("window.ran") is None and await page.locator("td img, td b").count() == 0
        if panel == "dashboard":
            assert await page.locator("#card-services .value").inner_text() == "8 / 8"
        await screenshot(page, f"console-{panel}")
        assert errors == []


async def test_the_services_panel_restarts_a_service_and_shows_the_pushed_states(console, browser):
    async with open_page(browser=browser) as (page, errors):
        await show(page, console, "services")
        await page.wait_for_selector("#push-state.push-on")
        # Every state the row shows, recorded as it changes: `stopping` and `starting` reach the
        # page only through the /ws push (the restart's own answer comes once it runs again).
        await page.evaluate("""() => {
            window.shownStates = [];
            new MutationObserver(() => {
                const badge = document.querySelector("[data-service='plugin-manager'].state .badge");
                if (badge && window.shownStates.at(-1) !== badge.textContent) window.shownStates.push(badge.textContent);
            }).observe(document.getElementById("services-table"), {childList: true, subtree: true});
        }""")
        old_pid = call(console, "GET", "/api/services/plugin-manager")["pid"]
        await page.click("button[data-action='restart'][data-service='plugin-manager']")
        await page.wait_for_function("() => window.shownStates.includes('starting') && "
                                     "window.shownStates.at(-1) === 'running'", timeout=30000)
        shown = await page.evaluate("window.shownStates")
        assert shown.index("stopping") < shown.index("starting") < len(shown) - 1, shown
        assert await page.locator("[data-service='plugin-manager'].state .badge").inner_text() == "running"
        assert call(console, "GET", "/api/services/plugin-manager")["pid"] != old_pid
        assert errors == []


async def test_the_services_panel_rolls_the_gateway_keeping_its_parent(console, browser):
    """The Rolling restart button: the gateway's worker processes are all new, its parent (the pid
    the console shows) the same (with one process: a new one), and the row still says running."""
    import psutil

    def workers(pid: int) -> set[int]:
        return {child.pid for child in psutil.Process(pid).children() if "--worker-index" in child.cmdline()}

    async with open_page(browser=browser) as (page, errors):
        await show(page, console, "services")
        before = call(console, "GET", "/api/services/gateway")
        old_workers = workers(before["pid"])
        assert before["rolling"] is True
        assert await page.locator("button[data-action='rolling-restart'][data-service='plugin-manager']").count() == 0
        await page.click("button[data-action='rolling-restart'][data-service='gateway']")
        await page.wait_for_function("() => document.body.textContent.includes('Gateway: running')", timeout=120000)
        after = call(console, "GET", "/api/services/gateway")
        assert after["status"] == "running"
        if old_workers:
            assert after["pid"] == before["pid"] and workers(after["pid"]) and not workers(after["pid"]) & old_workers
        else:  # fewer than four cores ("auto": one process), replaced by a new one on the same port
            assert after["pid"] != before["pid"]
        assert await page.locator("[data-service='gateway'].state .badge").inner_text() == "running"
        assert errors == []


async def test_the_model_config_panel_saves_a_model_and_shows_a_validation_error(console, browser):
    async with open_page(browser=browser) as (page, errors):
        await show(page, console, "model-config")
        await page.fill("#provider-form [name=name]", "lab")
        await page.fill("#provider-form [name=base_url]", "http://127.0.0.1:11434/v1")
        await page.click("#provider-form button[type=submit]")
        await page.locator("#providers td", has_text="lab").first.wait_for()

        form = page.locator("#model-form")
        await form.locator("[name=id]").fill("lab-chat")
        await form.locator("[name=name]").fill("qwen2.5:7b")
        await form.locator("[name=provider]").select_option("lab")
        await form.locator("[name=params]").fill('{"temperature": 5}')
        await form.locator("button[type=submit]").click()
        error = form.locator("label:has([name=params]) .field-error")
        await error.wait_for()
        assert "temperature" in await error.inner_text()
        assert await form.locator("[name=params]").get_attribute("aria-invalid") == "true"
        await form.locator("[name=params]").scroll_into_view_if_needed()
        await screenshot(page, "console-model-config-validation")

        await form.locator("[name=params]").fill('{"temperature": 0.4}')
        await form.locator("button[type=submit]").click()
        await page.locator("#models td", has_text="lab-chat").first.wait_for()
        assert await form.locator(".field-error").count() == 0
        saved = call(console, "GET", "/api/model-config/models")["models"]
        assert {"id": "lab-chat", "provider": "lab", "params": {"temperature": 0.4}}.items() <= next(
            model for model in saved if model["id"] == "lab-chat").items()
        # The refused save is the one failed request the page made.
        assert [error for error in errors if "status of 400" not in error] == []
        assert len(errors) == 1


async def test_the_model_config_panel_adds_an_mcp_server_and_shows_its_tools(console, browser):
    sample = str(PROJECT_ROOT / "tests" / "mcp" / "sample_server.py")
    async with open_page(browser=browser) as (page, errors):
        await show(page, console, "model-config")
        await page.wait_for_selector("#mcp-servers :is(table, .empty)")
        form = page.locator("#mcp-form")
        await form.locator("[name=name]").fill("Sample Tools")
        await form.locator("[name=command]").fill(sys.executable)
        await form.locator("[name=args]").fill(sample)
        await form.locator("[name=env]").fill('{"COLOR": "blue"}')
        await form.locator("[name=allowed_tools]").fill("add, setting")
        await form.locator("button[type=submit]").click()
        error = form.locator("label:has([name=name]) .field-error")
        await error.wait_for()  # upper case and a space: refused, next to the field
        await form.locator("[name=name]").fill("sample")
        await form.locator("button[type=submit]").click()
        await page.locator("#mcp-servers td", has_text="sample").first.wait_for()
        for _ in range(60):  # the table shows the state it was loaded with: reload until connected
            if await page.locator("#mcp-servers .badge-connected").count():
                break
            await page.reload()
            await page.wait_for_selector("#mcp-servers :is(table, .empty)")
            await page.wait_for_timeout(500)
        row = page.locator("#mcp-servers tr", has_text="sample")
        assert "sample__add, sample__setting" in await row.inner_text()
        await page.locator("#mcp-servers").scroll_into_view_if_needed()
        await screenshot(page, "console-model-config-mcp-servers")
        saved = call(console, "GET", "/api/mcp-servers")["servers"]
        assert saved[0]["env"] == {"COLOR": "****"} and saved[0]["allowed_tools"] == ["add", "setting"]
        assert [error for error in errors if "status of 400" not in error] == []


async def test_the_forms_of_memory_iot_clients_and_chat_platforms(console, phone_in_a_chat, browser):
    async with open_page(browser=browser) as (page, errors):
        async def answer(dialog):  # the confirmations before deleting; the link code's user id
            await (dialog.accept("alice") if dialog.type == "prompt" else dialog.accept())

        page.on("dialog", answer)
        await show(page, console, "memory")
        create = page.locator("#memory-create")
        await create.locator("[name=user_id]").fill("bob")
        await create.locator("[name=content]").fill("My daughter studies in Shanghai")
        await create.locator("[name=category]").select_option("relationship")
        await create.locator("button[type=submit]").click()
        row = page.locator("#memory-list tr", has_text="My daughter studies in Shanghai")
        await row.wait_for()
        await page.fill("#memory-filter [name=q]", "where does my child go to school")
        await page.click("#memory-filter button[type=submit]")
        await page.locator("#memory-list th", has_text="Score").wait_for()
        assert "Shanghai" in await page.locator("#memory-list tbody tr").first.inner_text()
        await row.locator("button", has_text="Delete").click()
        await row.wait_for(state="detached")
        assert all(memory["user_id"] != "bob" for memory in call(console, "GET", "/api/memory")["memories"])

        await show(page, console, "iot")
        light = page.locator(".device[data-device='living_room_light']")
        switch = light.locator("[data-switch='living_room_light']")
        label = await switch.inner_text()
        await switch.click()
        await light.locator("[data-switch='living_room_light']", has_text="Switch on" if "off" in label else "Switch off").wait_for()
        await light.locator("[name=property]").select_option("brightness")
        await light.locator("[name=value]").fill("35")
        await light.locator("button", has_text="Set").click()
        await light.locator("dd", has_text="35%").wait_for()
        await light.locator("button", has_text="History").click()
        await page.locator("#iot-history td", has_text=re.compile(r"brightness: \d+ → 35")).wait_for()

        await show(page, console, "clients")
        note = page.locator("#clients-list form[data-client='phone-1']")
        await note.locator("[name=note]").fill("on the fridge")
        await note.locator("button").click()
        await page.locator(".toast", has_text="Note saved").wait_for()
        clients = call(console, "GET", "/api/clients")["clients"]
        assert [client["note"] for client in clients if client["client_id"] == "phone-1"] == ["on the fridge"]

        await show(page, console, "chat-platforms")
        form = page.locator("#bot-form")
        await form.locator("[name=name]").fill("Home webhook")
        await form.locator("[name=platform]").select_option("webhook")
        await form.locator("[name='config.outgoing_url']").fill("http://127.0.0.1:9/replies")
        await form.locator("[name='config.signing_secret']").fill("short")
        await form.locator("[name=users]").fill("42 = alice")
        await form.locator("button[type=submit]").click()
        await form.locator("label:has([name='config.signing_secret']) .field-error").wait_for()
        await form.locator("[name='config.signing_secret']").fill("a-signing-secret-long-enough")
        await form.locator("button[type=submit]").click()
        bot = page.locator("#bots tr", has_text="Home webhook")
        await bot.wait_for()
        await bot.locator("button", has_text="Disable").click()
        await bot.locator(".badge-stopped").wait_for()
        await bot.locator("button", has_text="Link code").click()
        await page.locator("#bot-log", has_text="Send /link").wait_for()
        assert re.fullmatch(r"\d{6}", await page.locator("#bot-log .value").inner_text())
        await bot.locator("button", has_text="Messages").click()
        await page.locator("#bot-log .empty").wait_for()
        await bot.locator("button", has_text="Delete").click()
        await bot.wait_for(state="detached")
        assert call(console, "GET", "/api/chat-platforms/bots")["bots"] == []
        assert [error for error in errors if "status of 400" not in error] == [] and len(errors) == 1


async def test_the_performance_chart_draws_the_gateways_memory(console, browser):
    async with open_page(browser=browser) as (page, errors):
        await show(page, console, "performance")
        line = page.locator("#chart-memory path.series[data-series='Gateway']")
        # Two samples make a line (the console samples every second here).
        await page.wait_for_function(
            "() => (document.querySelector(\"#chart-memory path.series[data-series='Gateway']\")"
            "?.getAttribute('d') || '').includes('L')", timeout=15000)
        assert re.match(r"M[\d.]+,[\d.]+L", await line.get_attribute("d"))
        assert errors == []


async def test_the_stt_panel_transcribes_a_recording_and_logs_it_live(console, browser):
    async with open_page(browser=browser) as (page, errors):
        await show(page, console, "stt")
        await page.wait_for_selector("#push-state.push-on")
        await page.set_input_files("#stt-upload [name=audio]", str(RECORDING))
        await page.select_option("#stt-upload [name=language]", "en")
        await page.click("#stt-upload button[type=submit]")
        text = await page.locator("#stt-text").inner_text(timeout=60000)
        assert "ill" in text.lower() and "young man" in text.lower()
        await page.locator("#stt-log td", has_text="young man").first.wait_for()  # the stt-log push
        await screenshot(page, "console-stt-transcribed")
        assert errors == []


async def test_on_a_phone_the_navigation_collapses_behind_a_button(console, browser):
    async with open_page(viewport=(390, 844), browser=browser) as (page, errors):
        await show(page, console, "dashboard")
        await page.wait_for_selector("#card-memory")
        assert not await page.locator("#nav a[href='/services']").is_visible() or \
            await page.locator("#nav").evaluate("nav => nav.getBoundingClientRect().right <= 0")
        await screenshot(page, "console-phone-dashboard")
        await page.click("#nav-toggle")
        await page.wait_for_function("() => document.getElementById('nav').getBoundingClientRect().left >= 0")
        await page.wait_for_timeout(200)  # the slide-in transition
        await screenshot(page, "console-phone-navigation")
        await page.click("#nav a[href='/services']")
        await page.wait_for_selector("#services-table table")
        assert errors == []


async def test_a_panel_whose_service_is_down_says_so_and_starts_it(console, browser):
    call(console, "POST", "/api/services/iot-debug-service/stop")
    async with open_page(browser=browser) as (page, errors):
        await page.goto(console + "/iot")
        banner = page.locator("#service-banner")
        await banner.wait_for()
        assert "IoT Debug" in await banner.inner_text()
        assert await page.locator("#panel-body").is_hidden()
        await screenshot(page, "console-service-down")
        await page.click("#start-needed")
        await page.wait_for_selector("#iot-devices .device", timeout=30000)
        assert await banner.is_hidden()
        assert errors == []
