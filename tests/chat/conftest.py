"""The chat channel under test: the gateway built by the production factory (tokens, sessions,
files, chat) in front of the REAL AI core app on a loopback port, which in turn talks to a small
OpenAI-compatible streaming server whose replies the test scripts."""
from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.context import CONTEXT
from gateway.identity import Identity
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.support.fake_openai import route_to_model
from tests.support.servers import free_port
from plugins.auth.contract import TOKENS

SERVICE_TOKEN = "test-service-token"
ADMIN = Identity(user_id="admin", username="admin", is_admin=True)
ALICE = Identity(user_id="user_alice", username="alice")
BOB = Identity(user_id="user_bob", username="bob")


def sse_chunk(delta: dict, finish_reason: str | None = None) -> bytes:
    payload = {"id": "chatcmpl-script", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


class ScriptedProvider:
    """An OpenAI-compatible `/v1/chat/completions` that streams `reply` in `pieces`; when `gate`
    is cleared it stops after the first `hold_after` pieces until the test sets it. A request
    whose last message is a key of `holds` stops instead after that many pieces until the
    event beside it is set."""

    def __init__(self):
        self.reply = "Hello there, friend."
        self.pieces = 4
        self.hold_after = 2
        self.piece_delay = 0.0  # seconds between two pieces of the reply
        self.gate = asyncio.Event()
        self.gate.set()
        self.holds: dict[str, tuple[int, asyncio.Event]] = {}
        self.requests: list[dict] = []
        self.received = asyncio.Event()  # set at each request; a test clears it
        self.active = 0
        self.max_active = 0
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.completions)

    def split(self) -> list[str]:
        size = max(1, -(-len(self.reply) // self.pieces))
        return [self.reply[i:i + size] for i in range(0, len(self.reply), size)]

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.received.set()
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        hold_after, gate = self.holds.get(body["messages"][-1]["content"], (self.hold_after, self.gate))
        try:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            await response.write(sse_chunk({"role": "assistant", "content": ""}))
            for index, piece in enumerate(self.split()):
                if index == hold_after:
                    await asyncio.wait_for(gate.wait(), 20)
                if self.piece_delay:
                    await asyncio.sleep(self.piece_delay)
                await response.write(sse_chunk({"content": piece}))
            await response.write(sse_chunk({}, "stop"))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
            return response
        except ConnectionResetError:  # the AI core stopped reading (a person stopped the reply)
            return response
        finally:
            self.active -= 1


@pytest.fixture
async def provider(aiohttp_server):
    scripted = ScriptedProvider()
    server = await aiohttp_server(scripted.app)
    scripted.url = str(server.make_url("/v1")).rstrip("/")
    yield scripted
    scripted.gate.set()


@pytest.fixture
def gateway_port() -> int:
    return free_port()


@pytest.fixture
async def ai_core_url(database_url, provider, aiohttp_server, make_config, gateway_port) -> str:
    """The real AI core, its `chat` and `vision` routes on the scripted provider."""
    config = make_config({"database.url": database_url, "peers.gateway_url": f"http://127.0.0.1:{gateway_port}",
                          "plugins.ai_core": {"first_token_timeout": 5, "idle_timeout": 20, "timezone": "UTC"}})
    server = await aiohttp_server(create_app("ai-core", config, plugins=[tokens_plugin, ai_core_plugin]))
    base = str(server.make_url("")).rstrip("/")
    await route_to_model(base, provider.url, {"Authorization": f"Bearer {SERVICE_TOKEN}"},
                         purposes=("chat", "vision"))
    return base


@pytest.fixture
def chat_settings() -> dict:
    return {"sweep_interval": 0.5, "stop_timeout": 3, "heartbeat": 5}


@pytest.fixture
def make_gateway(database_url, ai_core_url, aiohttp_client, aiohttp_server, make_config, chat_settings):
    """A gateway app; `port` pins its loopback port (the AI core fetches attachments from it).
    The database is requested first so that it outlives the apps: their running turns finish
    (or are cancelled) before it is dropped."""
    async def build(overrides: dict | None = None, port: int | None = None, settings: dict | None = None,
                    **server_options):
        config = make_config({"database.url": database_url, "peers.ai_core_url": ai_core_url,
                              "plugins.chat": {**chat_settings, **(settings or {})}, **(overrides or {})})
        app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, files_plugin, ai_core_client_plugin, chat_plugin])
        if port is None and not server_options:
            return await aiohttp_client(app)
        server = await aiohttp_server(app, port=port or 0, **server_options)
        return await aiohttp_client(server)
    return build


@pytest.fixture
async def gateway(make_gateway):
    return await make_gateway()


def token_for(client, identity: Identity) -> str:
    return client.server.app[CONTEXT].contracts.require(TOKENS).issue_access(identity)[0]


def context_of(client):
    return client.server.app[CONTEXT]


async def receive(ws, timeout: float = 10.0) -> dict:
    message = await ws.receive_json(timeout=timeout)
    return message


async def registered(*devices) -> None:
    """Return once the gateway has registered each device: it reads a device's frames only then,
    so a pong proves it. The WebSocket handshake returns before: a message another device sends
    in that gap does not echo to one not yet registered (it reads it from the history)."""
    for ws in devices:
        await ws.send_json({"type": "ping"})
        await receive_until(ws, "pong")


async def receive_until(ws, kind: str, timeout: float = 10.0, session_id: str | None = None) -> list[dict]:
    """Frames up to and including the first of type `kind` (of `session_id` only, when given:
    a device receives the replies of all its user's sessions). `timeout` bounds the whole wait:
    aiohttp restarts a receive's own timeout at every ping of the server's heartbeat."""
    frames = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        frame = await asyncio.wait_for(ws.receive_json(), max(0.0, deadline - loop.time()))
        if session_id is not None and frame.get("session_id") not in (None, session_id):
            continue
        frames.append(frame)
        if frame["type"] == kind:
            return frames


async def eventually(predicate, timeout: float = 10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)
