"""Going back to a long conversation in the web client: the gateway and the frontend service
started as `gateway serve` does it, a conversation of 1,000 stored messages (and a short one),
headless Chromium signed in, and the time from the click on the long conversation until its
newest message is painted in view: the first time it is opened in a freshly loaded page, and
going back to it from the short one. Median of `--runs`.

    .venv/bin/python -m bench.web_client.history [--runs 7] [--messages 1000] [--baseline REV]

The same run measures the chat pane of `--baseline` (the code before history paging, served in
place of today's panes/chat.js) against the same services and data, so both figures share the
machine's load of the moment. Target: the newest page within 150 ms of the click.
DATABASE_URL names a PostgreSQL server to make a scratch database on; without it an embedded
one is started in a temporary directory."""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.support import drop_database, free_port, scratch_database, wait_until_up
from tests.support.browser import CHROMIUM_ARGS, chromium_path

ROOT = Path(__file__).resolve().parents[2]
CHAT_PANE = "plugins/frontend/static/js/panes/chat.js"
# The commit before the chat pane fetched the newest page first (it read every page from the oldest).
BEFORE_HISTORY_PAGING = "3fc8583"
ADMIN_PASSWORD = "bench-admin-password"
SERVICES = """
[[service]]
id = "gateway"
name = "Gateway"
port = {gateway_port}
plugins = ["auth_tokens", "ai_core_client", "auth", "sessions", "chat", "files", "notifications"]
workers = 1

[[service]]
id = "frontend"
name = "Frontend"
port = {frontend_port}
plugins = ["frontend"]
"""
REPLY = ("Here is what I found about item {n}:\n\n- **first**, a point with some detail to it\n"
         "- *second*, another one, with `code` in it\n\nAnd a closing sentence or two, long enough to wrap "
         "over a line or two in a phone-sized window, as real replies do.")


def start_services(work: Path, database_url: str, gateway_port: int, frontend_port: int) -> list[subprocess.Popen]:
    conf = work / "conf"
    conf.mkdir()
    shutil.copy(ROOT / "conf" / "default.toml", conf / "default.toml")
    (conf / "services.toml").write_text(SERVICES.format(gateway_port=gateway_port, frontend_port=frontend_port))
    environment = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "DATABASE_URL")}
    environment.update(GATEWAY_CONF_DIR=str(conf), DATA_DIR=str(work / "data"), DATABASE_URL=database_url,
                       JWT_SECRET="bench-jwt-secret-" + "x" * 32, SERVICE_TOKEN="bench-service-token",
                       ADMIN_PASSWORD=ADMIN_PASSWORD, GATEWAY_URL=f"http://127.0.0.1:{gateway_port}",
                       AI_CORE_URL=f"http://127.0.0.1:{free_port()}", PYTHONPATH=str(ROOT))
    processes = []
    for service, port in (("gateway", gateway_port), ("frontend", frontend_port)):
        log = open(work / f"{service}.log", "w")
        process = subprocess.Popen([sys.executable, "-m", "gateway", "--log-level", "warning", "serve", "--service",
                                    service], env=environment, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        process.log_path = str(work / f"{service}.log")  # type: ignore[attr-defined]
        processes.append(process)
        wait_until_up(f"http://127.0.0.1:{port}/api/v1/health", process, 60)
    return processes


def store_conversations(database_url: str, count: int) -> None:
    """The administrator's "Long" conversation of `count` messages (question, Markdown reply,
    in turn), the most recent, and a "Short" one to switch to and back from."""
    import psycopg2

    connection = psycopg2.connect(database_url)
    with connection, connection.cursor() as cursor:
        cursor.execute("INSERT INTO chat_sessions (id, user_id, title, updated_at) VALUES "
                       "('bench-long', 'admin', 'Long', now() + interval '1 hour'), "
                       "('bench-short', 'admin', 'Short', now() + interval '1 minute')")
        rows = []
        for n in range(count):
            user = n % 2 == 0
            rows.append(("user" if user else "assistant", "chat" if user else "markdown",
                         f"Question {n}: what about item {n}, and how does it compare?" if user
                         else REPLY.format(n=n) + f" (message {n})", count - n))
        cursor.executemany("INSERT INTO chat_messages (session_id, user_id, role, msg_type, content, created_at) "
                           "VALUES ('bench-long', 'admin', %s, %s, %s, now() - %s * interval '1 minute')", rows)
        cursor.execute("INSERT INTO chat_messages (session_id, user_id, role, content) "
                       "VALUES ('bench-short', 'admin', 'user', 'hi'), ('bench-short', 'admin', 'assistant', 'hello')")
    connection.close()


# From the click on the long conversation until its newest message is in view, measured at the
# first task after the frame that shows it (rAF, then a task: that frame was painted).
MEASURE_OPENING = """(newest) => new Promise((resolve) => {
  let clicked = 0;
  document.addEventListener('click', () => { clicked = performance.now(); }, {capture: true, once: true});
  const check = () => {
    const messages = document.querySelector('.messages');
    const shown = clicked && [...document.querySelectorAll('.history .part')].find((part) => {
      if (!part.textContent.includes(newest)) return false;
      const view = messages.getBoundingClientRect(), box = part.getBoundingClientRect();
      return box.top < view.bottom && box.bottom > view.top;
    });
    if (shown) setTimeout(() => resolve(performance.now() - clicked), 0);
    else requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})"""


async def open_long(page, newest: str) -> float:
    """Milliseconds from the click on the long conversation to its newest message painted."""
    opening = asyncio.ensure_future(page.evaluate(MEASURE_OPENING, newest))
    await page.wait_for_timeout(100)  # the page's listener is in place
    await page.locator(".session", has_text="Long").first.click()
    return await asyncio.wait_for(opening, 60)


async def open_short(page) -> None:
    await page.locator(".session", has_text="Short").first.click()
    await page.locator(".history .part", has_text="hello").wait_for(timeout=30000)


async def measure(url: str, runs: int, count: int, pane: str | None) -> dict[str, list[float]]:
    """`runs` times: the page loaded afresh on the short conversation, the long one opened (the
    first time in this page), the short one, and back to the long one. `pane` replaces
    panes/chat.js when given."""
    from playwright.async_api import async_playwright

    newest = f"(message {count - 1})"
    timings: dict[str, list[float]] = {"first opened in the page": [], "going back": []}
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        context = await browser.new_context(viewport={"width": 1280, "height": 800})
        page = await context.new_page()
        if pane is not None:
            await page.route("**/js/panes/chat.js*", lambda route: route.fulfill(
                body=pane, headers={"Content-Type": "text/javascript; charset=utf-8"}))
        await page.goto(url)
        await page.fill("input[name=username]", "admin")
        await page.fill("input[name=password]", ADMIN_PASSWORD)
        await page.click("#login-form button[type=submit]")
        await page.locator(".history .part", has_text=newest).wait_for(timeout=60000)
        await open_short(page)
        for run in range(runs + 1):  # the first warms both sides' caches and is not counted
            await page.reload()  # signed in again by the refresh cookie, on the short conversation
            await page.locator(".history .part", has_text="hello").wait_for(timeout=30000)
            await page.wait_for_timeout(500)  # the chat's modules fetched while idle
            first = await open_long(page, newest)
            await open_short(page)
            back = await open_long(page, newest)
            await open_short(page)
            if run:
                timings["first opened in the page"].append(first)
                timings["going back"].append(back)
        await browser.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--baseline", default=BEFORE_HISTORY_PAGING,
                        help="the revision whose chat pane is measured beside today's ('' to skip it)")
    arguments = parser.parse_args()
    baseline = None
    if arguments.baseline:
        baseline = subprocess.run(["git", "show", f"{arguments.baseline}:{CHAT_PANE}"], cwd=ROOT, check=True,
                                  capture_output=True, text=True).stdout
    work = Path(tempfile.mkdtemp(prefix="bench-history-"))
    admin_url, embedded = os.environ.get("DATABASE_URL", ""), None
    if not admin_url:
        from gateway.embedded_database import start_embedded

        admin_url, embedded = start_embedded(work / "pg")
    database_url = scratch_database(admin_url, "bench_history")
    processes: list[subprocess.Popen] = []
    try:
        gateway_port, frontend_port = free_port(), free_port()
        processes = start_services(work, database_url, gateway_port, frontend_port)
        store_conversations(database_url, arguments.messages)
        url = f"http://127.0.0.1:{frontend_port}/"
        results = {"this code": asyncio.run(measure(url, arguments.runs, arguments.messages, None))}
        if baseline is not None:
            results[f"before ({arguments.baseline[:7]})"] = asyncio.run(
                measure(url, arguments.runs, arguments.messages, baseline))
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(10)
        drop_database(database_url, admin_url)
        if embedded is not None:
            embedded.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    print(f"web client, back to a conversation of {arguments.messages} messages, {arguments.runs} runs, "
          f"{os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print("| code | opened | click to newest message painted, median (min-max) | target |")
    for name, measured in results.items():
        for opened, timings in measured.items():
            print(f"| {name} | {opened} | {statistics.median(timings):.0f} ms ({min(timings):.0f}-{max(timings):.0f}) "
                  f"| <= 150 ms |")


if __name__ == "__main__":
    main()
