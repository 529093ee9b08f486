"""The Database panel's backups in a real headless Chromium, against a real console (over one tiny
service, on a test database): the "Back up now" button writes an archive that the list then
offers for download, and the dashboard's Backups card shows the result."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from gateway.config import ENVIRONMENT, PROJECT_ROOT
from gateway.backup import verify_archive
from tests.console.browser.test_pages import call, wait_for_health
from tests.console.conftest import write_service_table
from tests.support.browser import needs_browser, open_page, screenshot
from tests.support.servers import free_port

pytestmark = [needs_browser, pytest.mark.slow]


@pytest.fixture
def console(tmp_path, database_url):
    conf = tmp_path / "conf"
    conf.mkdir()
    shutil.copy(PROJECT_ROOT / "conf" / "default.toml", conf / "default.toml")
    write_service_table(conf, [{"id": "alpha", "name": "Alpha", "port": free_port(), "plugins": []}])
    environ = {name: value for name, value in os.environ.items() if name not in ENVIRONMENT}
    environ.pop("CONSOLE_TOKEN", None)
    environ.update({"GATEWAY_CONF_DIR": str(conf), "DATA_DIR": str(tmp_path / "data"), "DATABASE_URL": database_url})
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (tmp_path / "console.out").open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "console", "serve", "-p", str(port)], env=environ,
                                   cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_health(base, process)
            yield base, tmp_path / "data"
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def test_the_backup_button_writes_an_archive_and_the_dashboard_shows_it(console):
    base, data_dir = console
    async with open_page() as (page, errors):
        await page.goto(base + "/database")
        await page.locator("#db-backups .empty, #db-backups table").first.wait_for()
        assert "No backup taken yet" in await page.locator("#db-backup-state").inner_text()
        await page.click("#db-backup")
        link = page.locator("#db-backups table a")
        await link.wait_for(timeout=60000)
        name = await link.inner_text()
        assert "Last backup" in await page.locator("#db-backup-state").inner_text()
        archive = data_dir / "backups" / name
        assert "database.dump" in verify_archive(archive)["members"]
        async with page.expect_download() as waiting:
            await link.click()
        download = await waiting.value
        assert download.suggested_filename == name
        await screenshot(page, "console-database-backups")

        await page.goto(base + "/")
        card = page.locator("#card-backups")
        await card.wait_for()
        assert await card.locator(".value").inner_text() == "ok"
        assert "none scheduled" in await card.locator(".detail").inner_text()
        assert errors == []
    assert call(base, "GET", "/api/backups")["last"]["file"] == name
