"""The console's backups (console/backups.py): the operator API the Database panel's button uses,
the schedule with its retention, their state on the dashboard, and `console.sh backup` /
`restore`. Each backup is the real `gateway backup` on a real test database."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psycopg2
import pytest

from console.app import create_console_app
from gateway.backup import archive_name, verify_archive
from gateway.config import PROJECT_ROOT


def rows(url: str, sql: str) -> list[tuple]:
    connection = psycopg2.connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall() if cursor.description else []
    finally:
        connection.commit()
        connection.close()


@pytest.fixture
def deployment(service_table, database_url, monkeypatch, tmp_path):
    """A console over one tiny service, whose children (the backups among them) use the test
    database; `DATA_DIR` is tmp_path/data."""
    monkeypatch.setenv("DATABASE_URL", database_url)
    for name in ("S3_ENDPOINT", "BACKUP_PASSPHRASE", "GATEWAY_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    rows(database_url, "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('kept in the backup')")
    return service_table([{"id": "alpha", "name": "Alpha"}])


@pytest.mark.slow
async def test_backups_through_the_api_and_their_state_on_the_dashboard(aiohttp_client, deployment, make_config,
                                                                         database_url):
    config = make_config({"console.stop_timeout": 5, "backup.keep": 2})
    client = await aiohttp_client(create_console_app(config, specs=deployment))
    assert (await client.post("/api/services/start-all")).status == 200

    listed = await (await client.get("/api/backups")).json()
    assert listed["backups"] == [] and listed["every"] is None and listed["keep"] == 2 and listed["last"] is None
    assert listed["directory"] == str(config.data_dir / "backups")

    taken = await client.post("/api/backups")  # while the service runs
    record = await taken.json()
    assert taken.status == 200, record
    assert record["ok"] is True and record["reason"] == "manual" and record["size"] > 0
    dashboard = await (await client.get("/api/dashboard")).json()
    assert dashboard["database"]["backups"]["last"]["file"] == record["file"]
    assert dashboard["database"]["backups"]["running"] is None

    download = await client.get(f"/api/backups/{record['file']}")
    assert download.status == 200 and "attachment" in download.headers["Content-Disposition"]
    copy = config.data_dir.parent / "downloaded.tar.gz"
    copy.write_bytes(await download.read())
    assert "database.dump" in verify_archive(copy)["members"]

    for _ in range(2):  # keep = 2: the oldest goes
        time.sleep(1.05)  # archive names have seconds
        assert (await client.post("/api/backups")).status == 200
    names = [entry["name"] for entry in (await (await client.get("/api/backups")).json())["backups"]]
    assert len(names) == 2 and record["file"] not in names

    for bad in ("secrets.json", "backup-20260101-000000.tar.gz", record["file"]):
        missing = await client.get(f"/api/backups/{bad}")
        assert missing.status == 404 and (await missing.json())["errorType"] == "unknown_backup"

    refused = await client.post(f"/api/backups/{names[0]}/restore", json={"force": True})
    assert refused.status == 409 and (await refused.json())["errorType"] == "services_running"
    assert (await client.post("/api/services/stop-all")).status == 200
    not_empty = await client.post(f"/api/backups/{names[0]}/restore")
    body = await not_empty.json()
    assert not_empty.status == 409 and body["errorType"] == "restore_refused" and "not empty" in body["error"]
    rows(database_url, "INSERT INTO notes VALUES ('written after the backup')")
    restored = await client.post(f"/api/backups/{names[0]}/restore", json={"force": True})
    assert restored.status == 200, await restored.text()
    assert rows(database_url, "SELECT body FROM notes") == [("kept in the backup",)]
    bad_body = await client.post(f"/api/backups/{names[0]}/restore", json={"force": "sometimes"})
    assert bad_body.status == 400 and (await bad_body.json())["errorType"] == "validation_error"

    assert (await client.delete(f"/api/backups/{names[1]}")).status == 200
    assert [entry["name"] for entry in (await (await client.get("/api/backups")).json())["backups"]] == [names[0]]


@pytest.mark.slow
async def test_a_scheduled_backup_runs_when_due_and_keeps_the_newest(aiohttp_client, deployment, make_config):
    config = make_config({"backup.every": "1d", "backup.keep": 2})
    backups = config.data_dir / "backups"
    backups.mkdir(parents=True)
    import datetime
    old = [archive_name(datetime.datetime(2026, 1, day, tzinfo=datetime.timezone.utc)) for day in (1, 2, 3)]
    for name in old:
        (backups / name).write_bytes(b"an older archive")
    # The last one was a day and a minute ago: the next is due now.
    (config.data_dir / "console").mkdir(parents=True, exist_ok=True)
    (config.data_dir / "console" / "backups.json").write_text(json.dumps(
        {"last": {"at": time.time() - 86460, "reason": "scheduled", "ok": True, "file": old[-1]}}))
    client = await aiohttp_client(create_console_app(config, specs=deployment))

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = (await (await client.get("/api/dashboard")).json())["database"]["backups"]
        if state["last"] and state["last"]["file"] not in old:
            break
        await __import__("asyncio").sleep(0.5)
    assert state["last"]["ok"] is True and state["last"]["reason"] == "scheduled", state
    assert state["every"] == 86400 and state["next"] > time.time() + 86000
    assert sorted(path.name for path in backups.iterdir()) == sorted([old[-1], state["last"]["file"]])


def test_console_sh_backs_up_and_restores(tmp_path, database_url, postgres_server):
    """`console.sh backup FILE` and `restore FILE` (no console running)."""
    rows(database_url, "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('by the command line')")
    target_name = postgres_server.create_database()
    try:
        target_url = postgres_server.database_url(target_name)
        environment = {key: value for key, value in os.environ.items()
                       if key not in {"S3_ENDPOINT", "GATEWAY_CONFIG", "BACKUP_PASSPHRASE", "GATEWAY_CONF_DIR"}}

        def console(*arguments: str, data_dir: str, url: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "console", *arguments], cwd=PROJECT_ROOT,
                                  capture_output=True, text=True, timeout=120,
                                  env={**environment, "DATA_DIR": str(tmp_path / data_dir), "DATABASE_URL": url})

        archive = tmp_path / "by-hand.tar.gz"
        made = console("backup", str(archive), data_dir="source", url=database_url)
        assert made.returncode == 0, made.stderr
        assert json.loads(made.stdout.strip().splitlines()[-1])["file"] == str(archive)
        done = console("restore", str(archive), data_dir="target", url=target_url)
        assert done.returncode == 0, done.stderr
        assert rows(target_url, "SELECT body FROM notes") == [("by the command line",)]
        assert (tmp_path / "target" / "secrets.json").read_text() == (tmp_path / "source" / "secrets.json").read_text()
        default = console("backup", data_dir="source", url=database_url)  # into DATA_DIR/backups
        assert default.returncode == 0, default.stderr
        assert len(list((tmp_path / "source" / "backups").glob("backup-*.tar.gz"))) == 1
    finally:
        postgres_server.drop_database(target_name)
