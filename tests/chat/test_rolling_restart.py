"""A rolling restart through the console's API (`POST /api/services/gateway/rolling-restart`) of a
real gateway with two workers (`gateway serve --workers 2`, started by the console's supervisor on
the test database) while 200 WebSocket devices are connected and some of them chat against a
local stub model: each worker is replaced by a new one that serves before the old one drains, so
at least 99 % of the devices are back within 10 s of losing their socket (closed with 1012,
service restart), every message the gateway acknowledged (`stream_start`, `queued`, or
`duplicate_message` for a re-send) is in the history exactly once, and no turn ran twice (the
stub model counts the requests for each message)."""
from __future__ import annotations

import asyncio
import random
import shutil
import time
from collections import Counter

import aiohttp
import pytest
from aiohttp import web

from console.app import create_console_app
from gateway.config import PROJECT_ROOT
from gateway.context import CONTEXT
from gateway.embedded_bus import redis_server_binary
from gateway.identity import Identity
from gateway.rolling_restart import rolling_status_path
from gateway.services import load_services
from plugins.auth.contract import TOKENS
from plugins.sessions.contract import CONVERSATIONS
from tests.chat.conftest import SERVICE_TOKEN, eventually, sse_chunk
from tests.chat.test_workers import bystander, toml_document  # noqa: F401 (a fixture)
from tests.support.fake_openai import route_to_model
from tests.support.servers import NO_REDIS_SERVER, free_port

pytestmark = pytest.mark.slow

DEVICES = 200
CHATTING = 40  # of the devices; the others stay connected and idle
SERVICES = """
[[service]]
id = "gateway"
name = "Gateway"
port = {port}
plugins = ["auth_tokens", "sessions", "files", "ai_core_client", "chat"]
health = "/api/v1/health"
workers = 2
"""


class CountingModel:
    """An OpenAI-compatible streaming model that answers slowly enough for turns to be running
    when a worker drains, and counts the requests for each message (the last one's content)."""

    def __init__(self):
        self.requests: Counter[str] = Counter()
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.completions)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests[body["messages"][-1]["content"]] += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(sse_chunk({"role": "assistant", "content": ""}))
        for piece in ("Noted, ", "thank ", "you."):
            await asyncio.sleep(0.25)
            await response.write(sse_chunk({"content": piece}))
        await response.write(sse_chunk({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


class Device:
    """One WebSocket client as an app would be: it reconnects at once when its socket closes
    (resuming after the last frame it saw), and re-sends a message the gateway had not
    acknowledged when the socket went, with the same `client_msg_id`."""

    def __init__(self, number: int, token: str, base_url: str, http: aiohttp.ClientSession):
        self.number, self.token, self.base_url, self.http = number, token, base_url, http
        self.session_id = f"rolling-{number}"
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.last_seen: str | None = None
        self.acknowledged: set[str] = set()
        self.unacknowledged: str | None = None
        self.closes: list[int | None] = []
        self.gaps: list[float] = []  # seconds from a socket's loss to the next one's opening
        self.connected = asyncio.Event()
        self.frames: asyncio.Queue[dict | None] = asyncio.Queue()
        self.running = True
        self.last_error = ""
        self.seen: list[dict] = []

    async def connect(self) -> None:
        params = {"token": self.token, "session_id": self.session_id}
        if self.last_seen:
            params["after"] = self.last_seen
        while True:
            try:
                self.ws = await self.http.ws_connect(self.base_url + "/ws/chat", params=params, heartbeat=None)
                self.connected.set()
                return
            except (aiohttp.ClientError, OSError) as error:
                self.last_error = f"{type(error).__name__} {getattr(error, 'status', '')}"
                await asyncio.sleep(0.05)

    async def keep_connected(self) -> None:
        """Read frames into `frames`; on a close, reconnect at once."""
        await self.connect()
        while self.running:
            assert self.ws is not None
            message = await self.ws.receive()
            if message.type == aiohttp.WSMsgType.TEXT:
                frame = message.json()
                if "seq" in frame and frame.get("turn_id"):
                    self.last_seen = f"{frame['turn_id']}:{frame['seq']}"
                self.seen.append(frame)
                self.frames.put_nowait(frame)
                continue
            if not self.running:
                return
            lost = time.monotonic()
            self.closes.append(self.ws.close_code)
            self.connected.clear()
            self.frames.put_nowait(None)  # tells the chatter its socket went
            await self.connect()
            self.gaps.append(time.monotonic() - lost)

    async def chat(self, stop: asyncio.Event) -> None:
        count = 0
        while not stop.is_set():
            await asyncio.sleep(random.uniform(0.3, 1.5))
            if self.unacknowledged is None:
                count += 1
                self.unacknowledged = f"message {count} of device {self.number}"
            await self.exchange(self.unacknowledged)
        if self.unacknowledged is not None:  # sent before the end, and never acknowledged: send it once more
            await self.exchange(self.unacknowledged)

    async def exchange(self, content: str) -> None:
        """Send `content` and read until its reply ends or the socket goes."""
        await self.connected.wait()
        try:
            assert self.ws is not None
            await self.ws.send_json({"type": "message", "content": content, "client_msg_id": content,
                                     "session_id": self.session_id})
        except (ConnectionError, RuntimeError, aiohttp.ClientError):
            return  # the socket went: sent again on the next one
        while True:
            try:
                frame = await asyncio.wait_for(self.frames.get(), 5)
            except asyncio.TimeoutError:
                # A re-send of a message the gateway had stored gets no frames back (docs/chat.md):
                # it is in the history, and the device goes on.
                self.unacknowledged = None
                return
            if frame is None:
                return
            if frame["type"] in ("stream_start", "queued") or (
                    frame["type"] == "error" and frame.get("errorType") == "duplicate_message"):
                self.acknowledged.add(content)
                self.unacknowledged = None
            if frame["type"] == "stream_end" and self.unacknowledged is None:
                return
            if frame["type"] == "error" and frame.get("client_msg_id") == content:
                return


@pytest.fixture
async def console(make_config, database_url, ai_core_url, bystander, tmp_path, monkeypatch, aiohttp_server,
                  aiohttp_client):
    """The console's API over a service table of one gateway (two workers) in front of the
    real AI core, whose chat route goes to the counting stub model."""
    if redis_server_binary() is None:
        pytest.skip(f"the workers' embedded bus: {NO_REDIS_SERVER}")
    model = CountingModel()
    model_url = str((await aiohttp_server(model.app)).make_url("/v1")).rstrip("/")
    # After the bystander's set-up, which routed the same AI core to tests/chat's scripted model.
    await route_to_model(ai_core_url, model_url, {"Authorization": f"Bearer {SERVICE_TOKEN}"}, purposes=("chat",))

    port = free_port()
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    shutil.copy(PROJECT_ROOT / "conf" / "default.toml", conf / "default.toml")
    (conf / "services.toml").write_text(SERVICES.format(port=port))
    gateway_config = make_config({"database.url": database_url, "peers.ai_core_url": ai_core_url,
                                  "plugins.chat": {"sweep_interval": 0.5, "stop_timeout": 5, "heartbeat": 30}})
    (conf / "gateway.toml").write_text(toml_document(gateway_config._values))
    monkeypatch.setenv("GATEWAY_CONF_DIR", str(conf))
    monkeypatch.setenv("GATEWAY_CONFIG", str(conf / "gateway.toml"))
    for name in ("DATABASE_URL", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    app = create_console_app(make_config({"console.health_timeout": 90, "console.stop_timeout": 30}),
                             specs=load_services())
    client = await aiohttp_client(app)
    client.gateway_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    client.model = model  # type: ignore[attr-defined]
    yield client
    await client.post("/api/services/stop-all")


async def test_a_rolling_restart_keeps_devices_connected_and_loses_or_repeats_no_turn(console, bystander):
    started = await console.post("/api/services/gateway/start")
    assert started.status == 200, await started.text()
    parent = (await started.json())["pid"]
    tokens = bystander.server.app[CONTEXT].contracts.require(TOKENS)
    stop_chatting = asyncio.Event()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        devices = [Device(number, tokens.issue_access(Identity(user_id=f"rolling_{number}",
                                                               username=f"rolling{number}", is_admin=True))[0],
                          console.gateway_url, http) for number in range(DEVICES)]
        readers = [asyncio.ensure_future(device.keep_connected()) for device in devices]
        try:
            await asyncio.wait_for(asyncio.gather(*(device.connected.wait() for device in devices)), 60)
        except asyncio.TimeoutError:
            raise AssertionError(Counter(device.last_error for device in devices if not device.connected.is_set()))
        chatters = [asyncio.ensure_future(device.chat(stop_chatting)) for device in devices[:CHATTING]]
        await asyncio.sleep(3)  # turns running on both workers
        assert sum(console.model.requests.values()) > 0, [
            frame for frame in devices[0].seen if frame["type"] in ("stream_end", "error")][:3]

        rolled = await console.post("/api/services/gateway/rolling-restart")
        assert rolled.status == 200, await rolled.text()
        record = await rolled.json()
        assert record["status"] == "running" and record["pid"] == parent and record["rolling"] is True
        status_file = rolling_status_path(app_data_dir(console), "gateway")
        assert '"state": "done"' in status_file.read_text()
        await asyncio.sleep(2)
        stop_chatting.set()
        await asyncio.wait_for(asyncio.gather(*chatters), 60)
        # Every device is connected again.
        await asyncio.wait_for(asyncio.gather(*(device.connected.wait() for device in devices)), 15)
        for device in devices:
            device.running = False
            if device.ws is not None:
                await device.ws.close()
        await asyncio.gather(*readers, return_exceptions=True)

    # Both workers were replaced: every device lost its socket at least once, told to reconnect.
    assert all(device.closes for device in devices)
    codes = Counter(code for device in devices for code in device.closes)
    assert codes[aiohttp.WSCloseCode.SERVICE_RESTART] >= DEVICES, codes
    gaps = [gap for device in devices for gap in device.gaps]
    back_in_time = sum(gap <= 10 for gap in gaps) / len(gaps)
    assert back_in_time >= 0.99, sorted(gaps)[-10:]

    # Each acknowledged message is stored once and was answered once; none was answered twice.
    acknowledged = [(device, content) for device in devices[:CHATTING] for content in device.acknowledged]
    assert len(acknowledged) > CHATTING

    async def all_answered() -> bool:  # the last turns queued may still run
        return all(console.model.requests[content] >= 1 for _, content in acknowledged)
    await eventually(all_answered, timeout=30)
    conversations = bystander.server.app[CONTEXT].contracts.require(CONVERSATIONS)
    for device in devices[:CHATTING]:
        stored = Counter(message["content"] for message in await conversations.all_messages(
            f"rolling_{device.number}", device.session_id) if message["role"] == "user")
        for content in device.acknowledged:
            assert stored[content] == 1, (content, stored)
        assert all(count == 1 for count in stored.values()), stored
    assert all(count == 1 for count in console.model.requests.values()), \
        [(content, count) for content, count in console.model.requests.items() if count > 1]
    assert all(console.model.requests[content] == 1 for _, content in acknowledged)


def app_data_dir(console):
    from console.typedefs import SUPERVISOR

    return console.server.app[SUPERVISOR].data_dir
