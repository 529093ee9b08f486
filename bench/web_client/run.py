"""First paint of the web client: the frontend service started as `gateway serve` does it (its
own process, the production app), Chromium opening the page cold, and the browser's own timings:
first contentful paint, and when the sign-in form (the first screen a person can use) shows.

    .venv/bin/python -m bench.web_client.run [--runs 5] [--cpu-slowdown 4]

`--cpu-slowdown` throttles Chromium's CPU (DevTools emulation) to stand for a slow phone or
laptop. Each run is a fresh browser context (no cache). Target: both under one second."""
from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from tests.support.browser import CHROMIUM_ARGS, chromium_path
from tests.support.servers import free_port

def start_frontend(port: int, data_dir: str) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--service", "frontend", "--port", str(port)],
                               env={"DATA_DIR": data_dir, "PATH": "/usr/bin:/bin"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).close()
            return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the frontend service did not start")


async def measure(url: str, runs: int, slowdown: float) -> list[tuple[float, float, float]]:
    from playwright.async_api import async_playwright

    results = []
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        for _ in range(runs + 1):  # the first warms the service's file cache and is not counted
            context = await browser.new_context(viewport={"width": 390, "height": 780})
            page = await context.new_page()
            if slowdown > 1:
                session = await context.new_cdp_session(page)
                await session.send("Emulation.setCPUThrottlingRate", {"rate": slowdown})
            await page.goto(url, wait_until="commit")
            await page.wait_for_selector("#login-form", state="visible")
            timings = await page.evaluate("""() => {
                const paint = performance.getEntriesByName('first-contentful-paint')[0];
                const navigation = performance.getEntriesByType('navigation')[0];
                return [paint ? paint.startTime : -1, performance.now(), navigation.transferSize + performance
                  .getEntriesByType('resource').reduce((sum, entry) => sum + entry.transferSize, 0)];
            }""")
            results.append(tuple(timings))
            await context.close()
        await browser.close()
    return results[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cpu-slowdown", type=float, default=1.0)
    arguments = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        process = start_frontend(port, data_dir)
        try:
            results = asyncio.run(measure(f"http://127.0.0.1:{port}/", arguments.runs, arguments.cpu_slowdown))
        finally:
            process.terminate()
            process.wait(10)
    paint = statistics.median(result[0] for result in results)
    usable = statistics.median(result[1] for result in results)
    size = results[0][2]
    print(f"web client, {arguments.runs} cold loads, CPU slowdown {arguments.cpu_slowdown:g}x, "
          f"{size / 1024:.0f} KB transferred by then (the chat modules prefetched while idle included)")
    print(f"| first contentful paint (median) | {paint:.0f} ms | < 1000 ms |")
    print(f"| sign-in form shown (median)     | {usable:.0f} ms | < 1000 ms |")


if __name__ == "__main__":
    main()
