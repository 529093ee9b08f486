"""Backup and restore of a whole running deployment (issue 43): the real services as the service
table assembles them (gateway, AI core with its built-in agent, memory service, IoT service,
platform bridge), each on a loopback port, on one test database and a DATA_DIR whose secrets
were generated there. One of everything is made through the APIs, `gateway backup` runs while
they serve, the archive is restored with `gateway restore` into a fresh DATA_DIR and a fresh
database, a second stack starts there, and everything is back: the user who logs in, the
session and its messages, the file and its thumbnail, the memory, the knowledge base (found by
a search: its vectors were indexed again), the reminder, the rule, the device state, the bot,
and a refresh token issued before the backup."""
from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import time

import aiohttp
import pytest

from gateway.app import create_app
from gateway.config import PROJECT_ROOT, Config
from gateway.services import get_service
from tests.support.servers import free_port

API = "/api/v1"
STACK = ("memory-service", "iot-debug-service", "ai-core", "platform-bridge", "gateway")
PEERS = {"memory-service": "memory_service_url", "iot-debug-service": "iot_service_url", "ai-core": "ai_core_url",
         "platform-bridge": "platform_bridge_url", "gateway": "gateway_url"}
TELEGRAM_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"


def png(width: int = 640, height: int = 480) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (30, 120, 200)).save(buffer, "PNG")
    return buffer.getvalue()


class Stack:
    """The five services in this process, each on its own port, as `serve` builds them."""

    def __init__(self, config: Config, servers: dict):
        self.config, self.servers = config, servers

    def url(self, service_id: str) -> str:
        return str(self.servers[service_id].make_url("")).rstrip("/")

    async def close(self) -> None:
        for service_id in reversed(STACK):
            await self.servers[service_id].close()


async def start_stack(aiohttp_server, data_dir, database_url: str) -> Stack:
    ports = {service_id: free_port() for service_id in STACK}
    overrides = {"core.data_dir": str(data_dir), "database.url": database_url,
                 "auth.registration_enabled": True, "plugins": {"auth": {"bcrypt_rounds": 4}},
                 "peers.voice_service_url": f"http://127.0.0.1:{free_port()}",
                 **{f"peers.{PEERS[service_id]}": f"http://127.0.0.1:{port}" for service_id, port in ports.items()}}
    # No secret is given: they are generated into (or, restored, read from) DATA_DIR/secrets.json.
    config = Config.load(overrides=overrides, environ={})
    servers = {}
    for service_id in STACK:
        app = create_app(service_id, config, spec=get_service(service_id))
        servers[service_id] = await aiohttp_server(app, port=ports[service_id])
    return Stack(config, servers)


async def eventually(check, timeout: float = 60.0, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result or time.monotonic() > deadline:
            return result
        await asyncio.sleep(interval)


def gateway_command(*arguments: str, data_dir, database_url: str) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items()
                   if key not in {"S3_ENDPOINT", "GATEWAY_CONFIG", "GATEWAY_CONF_DIR", "JWT_SECRET", "ADMIN_PASSWORD",
                                  "SERVICE_TOKEN", "QDRANT_URL", "BACKUP_PASSPHRASE"}}
    return subprocess.run([sys.executable, "-m", "gateway", *arguments], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=120,
                          env={**environment, "DATA_DIR": str(data_dir), "DATABASE_URL": database_url})


@pytest.mark.slow
async def test_a_running_deployment_backed_up_and_restored_elsewhere_has_everything(
        aiohttp_server, tmp_path, database_url, postgres_server):
    source = await start_stack(aiohttp_server, tmp_path / "source", database_url)
    config = source.config
    admin_password = config.get("auth.admin_password")
    service = {"Authorization": f"Bearer {config.get('auth.service_token')}"}
    gateway = source.url("gateway")
    made: dict = {}
    async with aiohttp.ClientSession() as http:
        async def call(method: str, url: str, status: int = 200, **options) -> dict:
            async with http.request(method, url, **options) as response:
                body = await response.json()
                assert response.status == status, (method, url, response.status, body)
                return body

        registered = await call("POST", f"{gateway}{API}/auth/register", json={
            "username": "carol", "password": "carol-password-1", "email": "carol@example.com", "nickname": "Carol",
            "verify_code": config.get("auth.registration_verify_code")},
            status=201)
        made["carol"] = registered.get("user", registered).get("id") or registered.get("user_id")
        admin = await call("POST", f"{gateway}{API}/auth/login", json={"username": "admin", "password": admin_password})
        headers = {"Authorization": f"Bearer {admin['token']}"}
        made["refresh_token"] = admin["refresh_token"]

        session = await call("POST", f"{gateway}{API}/sessions", json={"title": "Before the backup"}, headers=headers,
                             status=201)
        made["session"] = session.get("session", session)["id"]
        async with http.ws_connect(f"{gateway}/ws/chat?token={admin['token']}&session_id={made['session']}") as ws:
            await ws.send_json({"type": "message", "content": "hello there", "client_msg_id": "m1"})
            while True:
                frame = await ws.receive_json(timeout=30)
                if frame["type"] == "stream_end":
                    break
        messages = await call("GET", f"{gateway}{API}/sessions/{made['session']}/messages", headers=headers)
        made["messages"] = [(m["role"], m["content"]) for m in messages["messages"]]
        assert ("user", "hello there") in made["messages"] and len(made["messages"]) >= 2, made["messages"]

        form = aiohttp.FormData()
        form.add_field("file", io.BytesIO(png()), filename="sky.png", content_type="image/png")
        uploaded = await call("POST", f"{gateway}{API}/files/upload", data=form, headers=headers, status=201)
        made["file"] = uploaded.get("file", uploaded)["id"]
        async with http.get(f"{gateway}{API}/files/{made['file']}/download", headers=headers) as response:
            made["file_bytes"] = await response.read()
        async with http.get(f"{gateway}{API}/files/{made['file']}/thumbnail", headers=headers) as response:
            assert response.status == 200
            made["thumbnail"] = await response.read()

        memory = await call("POST", f"{gateway}{API}/memory", headers=headers,
                            json={"content": "The administrator's favourite tea is genmaicha."}, status=201)
        made["memory"] = memory.get("memory", memory)["id"]

        base = await call("POST", f"{gateway}{API}/knowledge/bases", headers=headers, json={"name": "Garden"},
                          status=201)
        made["kb"] = base.get("knowledge_base", base.get("base", base))["id"]
        await call("POST", f"{gateway}{API}/knowledge/bases/{made['kb']}/documents", headers=headers, status=201,
                   json={"title": "Tomatoes", "content": "Tomatoes need six hours of sun and deep watering twice "
                                                         "a week. Stake them when they reach knee height."})

        reminder = await call("POST", f"{gateway}{API}/reminders", headers=headers, status=201,
                              json={"title": "Water the tomatoes", "remind_at": "2099-06-01T09:00:00+00:00"})
        made["reminder"] = reminder["reminder"]["id"]
        rule = await call("POST", f"{gateway}{API}/automation/rules", headers=headers, status=201,
                          json={"name": "Evening", "trigger_type": "manual",
                                "actions": [{"type": "notify", "title": "Hello", "body": "from a rule"}]})
        made["rule"] = rule["rule"]["id"]
        await call("POST", f"{gateway}{API}/devices/bedroom_ac/operate", headers=headers,
                   json={"action": "set", "properties": {"mode": "heat", "target_temperature": 21.5}})
        bot = await call("POST", f"{source.url('platform-bridge')}{API}/bots", headers=service, status=201,
                         json={"name": "Family", "platform": "telegram", "enabled": False,
                               "config": {"bot_token": TELEGRAM_TOKEN, "mode": "webhook",
                                          "webhook_secret": "s3cret-token_value"}})
        made["bot"] = bot["id"]

        async def searchable() -> bool:
            hits = await call("POST", f"{gateway}{API}/knowledge/search", headers=headers,
                              json={"query": "how much sun do tomatoes need"})
            return bool(hits.get("chunks"))
        assert await eventually(searchable), "the document was not indexed before the backup"

        # The backup, while all of it runs.
        archive = tmp_path / "everything.tar.gz"
        made_backup = await asyncio.to_thread(gateway_command, "backup", str(archive),
                                              data_dir=tmp_path / "source", database_url=database_url)
        assert made_backup.returncode == 0, made_backup.stderr
    await source.close()

    target_database = postgres_server.create_database()
    try:
        target_url = postgres_server.database_url(target_database)
        restored = await asyncio.to_thread(gateway_command, "restore", str(archive), data_dir=tmp_path / "target",
                                           database_url=target_url)
        assert restored.returncode == 0, restored.stderr
        target = await start_stack(aiohttp_server, tmp_path / "target", target_url)
        gateway = target.url("gateway")
        assert target.config.get("auth.admin_password") == admin_password  # the restored secrets
        async with aiohttp.ClientSession() as http:
            async def call(method: str, url: str, status: int = 200, **options) -> dict:
                async with http.request(method, url, **options) as response:
                    body = await response.json()
                    assert response.status == status, (method, url, response.status, body)
                    return body

            # The refresh token issued before the backup still works.
            refreshed = await call("POST", f"{gateway}{API}/auth/refresh", json={"refresh_token": made["refresh_token"]})
            headers = {"Authorization": f"Bearer {refreshed['token']}"}
            await call("POST", f"{gateway}{API}/auth/login", json={"username": "carol", "password": "carol-password-1"})

            messages = await call("GET", f"{gateway}{API}/sessions/{made['session']}/messages", headers=headers)
            assert [(m["role"], m["content"]) for m in messages["messages"]] == made["messages"]
            async with http.get(f"{gateway}{API}/files/{made['file']}/download", headers=headers) as response:
                assert response.status == 200 and await response.read() == made["file_bytes"]
            async with http.get(f"{gateway}{API}/files/{made['file']}/thumbnail", headers=headers) as response:
                assert response.status == 200 and await response.read() == made["thumbnail"]
            memories = await call("GET", f"{gateway}{API}/memory", headers=headers)
            assert made["memory"] in str(memories) and "genmaicha" in str(memories)

            async def searchable() -> bool:  # the vectors, indexed again from the restored records
                hits = await call("POST", f"{gateway}{API}/knowledge/search", headers=headers,
                                  json={"query": "how much sun do tomatoes need"})
                return any("six hours of sun" in chunk["text"] for chunk in hits.get("chunks", []))
            assert await eventually(searchable), "no knowledge search hit after the restore"
            memory_hits = await call("GET", f"{gateway}{API}/memory/search", headers=headers,
                                     params={"q": "which tea does the administrator like"})
            assert "genmaicha" in str(memory_hits)

            reminder = await call("GET", f"{gateway}{API}/reminders/{made['reminder']}", headers=headers)
            assert reminder["reminder"]["title"] == "Water the tomatoes"
            rule = await call("GET", f"{gateway}{API}/automation/rules/{made['rule']}", headers=headers)
            assert rule["rule"]["name"] == "Evening"
            device = await call("GET", f"{gateway}{API}/devices/bedroom_ac", headers=headers)
            assert "heat" in str(device) and "21.5" in str(device), device
            bot = await call("GET", f"{target.url('platform-bridge')}{API}/bots/{made['bot']}",
                             headers={"Authorization": f"Bearer {target.config.get('auth.service_token')}"})
            assert bot["name"] == "Family"
        await target.close()
    finally:
        postgres_server.drop_database(target_database)
