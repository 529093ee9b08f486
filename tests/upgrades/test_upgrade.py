"""Upgrades keep everything: each fixture under fixtures/ (a database and DATA_DIR written by an
earlier release, made by make_fixture.py) is loaded into a fresh database and DATA_DIR, today's
services start on it (their migrations run), and every record the fixture's manifest lists is
read back through the public APIs, still usable: the person logs in and their refresh token still
refreshes, the conversation, the file and its thumbnail, the memory and the knowledge base (found
by a search once the vectors are rebuilt), reminders, automation, the device, notifications, the
model configuration and the chat-platform bot."""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path

import aiohttp
import pytest

from gateway.database import create_pool, fetch_all
from gateway.migrations import migration_files
from gateway.plugins import REGISTRY
from tests.upgrades.make_fixture import FIXTURES, postgres_tool
from tests.upgrades.stack import SECRETS, Stack, running_stack

pytestmark = pytest.mark.slow

API = "/api/v1"
FIXTURE_NAMES = sorted(path.name for path in FIXTURES.iterdir() if (path / "manifest.json").exists())


def load_database(fixture: Path, database_url: str) -> None:
    """The fixture's dump into the empty database, as an operator restores one (psql)."""
    result = subprocess.run([postgres_tool("psql"), "--quiet", "--no-psqlrc", "-v", "ON_ERROR_STOP=1",
                             "--file", str(fixture / "database.sql"), "--dbname", database_url],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


class Api:
    def __init__(self, http: aiohttp.ClientSession, stack: Stack):
        self.http, self.stack = http, stack

    async def __call__(self, method: str, path: str, status: int = 200, service_id: str = "gateway",
                       **options) -> dict:
        async with self.http.request(method, self.stack.url(service_id, path), **options) as response:
            body = await response.read()
            assert response.status == status, (method, path, response.status, body[:500])
            return json.loads(body) if response.content_type == "application/json" else {"raw": body,
                                                                                          "response": response}


async def eventually(check, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        await asyncio.sleep(0.5)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
async def test_todays_code_opens_an_earlier_releases_data_with_every_record(name, database_url, tmp_path):
    fixture = FIXTURES / name
    manifest = json.loads((fixture / "manifest.json").read_text())
    records = manifest["records"]
    assert manifest["secrets"] == SECRETS  # the stack below finds them in DATA_DIR/secrets.json
    load_database(fixture, database_url)
    data_dir = tmp_path / "data"
    shutil.copytree(fixture / "data", data_dir)
    # The secrets where the release kept them, DATA_DIR/secrets.json under its own names, and the
    # stack given none: today's services must find them there (e.g. 0.1.0's `auth.webhook_key`,
    # since the webhooks plugin's own `plugins.webhooks.webhook_key`).
    generated = {name: value for name, value in manifest["secrets"].items() if name != "auth.admin_username"}
    (data_dir / "secrets.json").write_text(json.dumps(generated))
    unset = {name: "" for name in generated}

    async with running_stack(database_url, data_dir, **unset) as stack, aiohttp.ClientSession() as http:
        call = Api(http, stack)
        user = records["user"]

        # Every plugin's migrations ran on the old schema, up to today's newest.
        levels = {row["plugin"]: row["version"] for row in await _levels(database_url)}
        newest = {migrations.plugin: max(version for version, _, _ in
                                         migration_files(migrations.package, migrations.directory))
                  for runner in stack.runners for migrations in runner.app[REGISTRY].migrations}
        assert {plugin: levels.get(plugin) for plugin in newest} == newest

        # The person: their password logs in, their refresh token (made by the old release) refreshes.
        login = await call("POST", f"{API}/auth/login", json={"username": user["username"],
                                                              "password": user["password"]})
        renewed = await call("POST", f"{API}/auth/refresh", json={"refresh_token": user["refresh_token"]})
        assert renewed["token"] and renewed["refresh_token"] != user["refresh_token"]
        alice = {"Authorization": f"Bearer {renewed['token']}"}
        assert login["token"]
        profile = await call("GET", f"{API}/profile", headers=alice)
        assert profile.get("timezone", profile.get("user", {}).get("timezone")) == user["timezone"], profile
        admin_login = await call("POST", f"{API}/auth/login", json={"username": "admin",
                                                                    "password": SECRETS["auth.admin_password"]})
        admin = {"Authorization": f"Bearer {admin_login['token']}"}
        peer = {"Authorization": f"Bearer {SECRETS['auth.service_token']}"}

        # The conversation, as it was.
        session = records["session"]
        sessions = await call("GET", f"{API}/sessions", headers=alice)
        assert {(s["id"], s["title"]) for s in sessions["sessions"]} >= {(session["id"], session["title"])}
        messages = await call("GET", f"{API}/sessions/{session['id']}/messages", headers=alice)
        assert [{"role": m["role"], "content": m["content"]} for m in messages["messages"]] == session["messages"]
        webhook_sessions = await call("GET", f"{API}/sessions", headers=admin, params={"user_id": "ext_crm"})
        assert records["webhook"]["session_id"] in {s["id"] for s in webhook_sessions["sessions"]}
        # The release's webhook key still lets a caller in (an empty message: refused past the key).
        empty = await call("POST", f"{API}/webhook/generic", 400, json={"message": " ", "user_id": "crm"},
                           headers={"X-Webhook-Key": SECRETS["auth.webhook_key"]})
        assert empty["errorType"] == "empty_message"

        # The file, its bytes and its thumbnail.
        file = records["file"]
        listed = await call("GET", f"{API}/files/{file['id']}", headers=alice)
        assert (listed["filename"], listed["size"], listed["mime_type"]) == (file["filename"], file["size"],
                                                                             file["mime_type"])
        download = await call("GET", f"{API}/files/{file['id']}/download", headers=alice)
        assert download["raw"] == (fixture / "data" / "blobs" / "files" / file["id"]).read_bytes()
        thumbnail = await call("GET", f"{API}/files/{file['id']}/thumbnail", headers=alice)
        assert thumbnail["raw"].startswith(b"\xff\xd8")  # a JPEG

        # The memory (listed, and found once its vectors are rebuilt) and the thinking entry.
        memories = await call("GET", f"{API}/memory", headers=alice)
        assert records["memory"]["content"] in json.dumps(memories, ensure_ascii=False)

        async def memory_found():
            found = await call("GET", f"{API}/memory/search", headers=alice, params={"q": "green tea"})
            return records["memory"]["content"] in json.dumps(found, ensure_ascii=False)

        await eventually(memory_found, "the memory found by a search")
        thinking = await call("GET", f"{API}/thinking", service_id="memory-service", headers=peer,
                              params={"user_id": user["user_id"]})
        assert records["thinking"]["content"] in json.dumps(thinking, ensure_ascii=False)

        # The knowledge base: listed, its document read, and searched (the index rebuilt).
        knowledge = records["knowledge"]
        bases = await call("GET", f"{API}/knowledge/bases", headers=alice)
        assert knowledge["base_name"] in {base["name"] for base in bases["knowledge_bases"]}
        document = await call("GET", f"{API}/knowledge/documents/{knowledge['document_id']}", headers=alice)
        assert document["document"]["title"] == knowledge["title"]

        async def knowledge_found():
            found = await call("POST", f"{API}/knowledge/search", headers=alice, json={"query": knowledge["query"]})
            return any(knowledge["expect"] in chunk["text"] for chunk in found["chunks"])

        await eventually(knowledge_found, "the knowledge document found by a search")

        # Reminders, automation, the device.
        reminders = await call("GET", f"{API}/reminders", headers=alice)
        by_id = {reminder["id"]: reminder for reminder in reminders["reminders"]}
        assert by_id[records["reminder"]["id"]]["title"] == records["reminder"]["title"]
        assert by_id[records["fired_reminder"]["id"]]["notified"] is True
        automation = records["automation"]
        rule = await call("GET", f"{API}/automation/rules/{automation['rule_id']}", headers=alice)
        assert rule["rule"]["name"] == automation["rule_name"]
        scene = await call("GET", f"{API}/automation/scenes/{automation['scene_id']}", headers=alice)
        assert scene["scene"]["name"] == automation["scene_name"]
        assert scene["scene"]["rule_ids"] == [automation["rule_id"]]
        device = await call("GET", f"{API}/devices/{records['device']['id']}", headers=alice)
        state = device["device"]["state"]
        assert {key: state[key] for key in records["device"]["state"]} == records["device"]["state"]

        # Notifications and the push subscription.
        notifications = await call("GET", f"{API}/notifications", headers=alice)
        assert records["notification"]["title"] in json.dumps(notifications, ensure_ascii=False)
        subscriptions = await call("GET", f"{API}/notifications/push/subscriptions", headers=alice)
        assert records["notification"]["subscription_id"] in json.dumps(subscriptions)

        # The known client's note, the model configuration.
        clients = await call("GET", f"{API}/admin/clients", headers=admin)
        assert records["client"]["note"] in json.dumps(clients, ensure_ascii=False)
        providers = await call("GET", f"{API}/admin/models/providers", headers=admin)
        assert records["models"]["provider"] in json.dumps(providers)
        models = await call("GET", f"{API}/admin/models/models", headers=admin)
        assert records["models"]["model"] in json.dumps(models)
        routing = await call("GET", f"{API}/admin/models/routing", headers=admin)
        assert records["models"]["model"] in json.dumps(routing)

        # The chat-platform bot, its linked person and its message log.
        bot = records["bot"]
        answer = await call("GET", f"{API}/bots/{bot['id']}", service_id="platform-bridge", headers=peer)
        assert answer["name"] == bot["name"] and answer["platform"] == bot["platform"]
        assert user["user_id"] in json.dumps(answer)
        log = await call("GET", f"{API}/bots/{bot['id']}/messages", service_id="platform-bridge", headers=peer)
        assert "hello bridge" in json.dumps(log, ensure_ascii=False)


async def _levels(database_url: str) -> list[dict]:
    pool = await create_pool(database_url)
    try:
        return await fetch_all(pool, "SELECT plugin, max(version) AS version FROM schema_migrations GROUP BY plugin")
    finally:
        pool.close()
        await pool.wait_closed()
