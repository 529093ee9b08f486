"""Browser tests in a real headless Chromium: Debian's `chromium` driven by Playwright's Python
package through `executable_path`, so nothing is downloaded at test time. bin/test installs the
Debian package where it can; where either piece is missing the tests skip with one line saying
which.

    pytestmark = needs_browser
    async with open_page() as (page, errors):
        await page.goto(url)
        await screenshot(page, "console-dashboard")
        assert errors == []
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import AsyncIterator, Sequence

import pytest

# The docs link to docs/screenshots/; a run writes there only when asked (UPDATE_SCREENSHOTS=1), so
# an ordinary test run leaves the tracked pictures alone. Otherwise they go to a scratch folder.
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SCREENSHOTS = (DOCS_SCREENSHOTS if os.environ.get("UPDATE_SCREENSHOTS") == "1"
               else Path(tempfile.gettempdir()) / "assistant-screenshots")

# The flags the machine's probe found necessary: no sandbox as root, and no background traffic,
# which a closed network refuses many connections at a time.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str | None:
    return os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or shutil.which("chromium-browser")


def _missing() -> str | None:
    if chromium_path() is None:
        return "no chromium on PATH (Debian package `chromium`; bin/test installs it when run as root)"
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed (test extras)"
    return None


MISSING = _missing()
needs_browser = pytest.mark.skipif(MISSING is not None, reason=f"browser tests skipped: {MISSING}")


@contextlib.asynccontextmanager
async def open_browser(args: Sequence[str] = ()) -> AsyncIterator["playwright.async_api.Browser"]:  # type: ignore[name-defined]  # noqa: F821
    """`args`: Chromium flags besides the usual ones (a fake microphone, say:
    `--use-fake-device-for-media-stream`, `--use-fake-ui-for-media-stream`)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=chromium_path(), headless=True,
                                               args=[*CHROMIUM_ARGS, *args])
        try:
            yield browser
        finally:
            await browser.close()


@contextlib.asynccontextmanager
async def open_page(viewport: tuple[int, int] = (1280, 800), *, browser=None, locale: str = "en-US",
                    args: Sequence[str] = (), phone: bool = False):
    """A fresh context and page; yields (page, errors) where errors collects console errors and
    uncaught exceptions, so a test can assert the page ran cleanly. Pass `browser` to share one
    Chromium between several contexts (two devices of one person, say); `args` are extra
    Chromium flags for the browser it starts when none is passed; `phone`: a touch screen and a
    mobile browser's viewport rules (for `locator.tap()`)."""
    async with contextlib.AsyncExitStack() as stack:
        if browser is None:
            browser = await stack.enter_async_context(open_browser(args))
        context = await browser.new_context(viewport={"width": viewport[0], "height": viewport[1]}, locale=locale,
                                            has_touch=phone, is_mobile=phone)
        stack.push_async_callback(context.close)
        page = await context.new_page()
        errors: list[str] = []
        page.on("console", lambda message: errors.append(f"console: {message.text}") if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
        yield page, errors


async def screenshot(page, name: str, *, full_page: bool = False) -> Path:
    """Saves <name>.png: into docs/screenshots/ (the pictures the docs link to) with
    UPDATE_SCREENSHOTS=1, else into a scratch folder."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=full_page)
    return path
