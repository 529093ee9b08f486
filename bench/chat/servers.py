"""The servers the chat benchmarks measure, each run in a process of its own by
`python -m bench.chat.run --serve NAME`: the mock AI core, the gateway app, and the two bare
aiohttp servers that stand for what any one-process Python relay costs."""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
JWT_SECRET = "bench-chat-jwt-secret-" + "q" * 32
SERVICE_TOKEN = "bench-chat-service-token"
DELTAS = 64
DELTA_GAP = 0.020
HEARTBEAT = 30.0  # the chat plugin's default; the bare server gets the same


def service_loop() -> asyncio.AbstractEventLoop:
    """The loop `gateway serve` runs on by default (core.event_loop): the mock stands in for the
    AI core, which runs on it, and the bare servers get the same, so that every server process
    compared runs on the same loop."""
    import uvloop

    return uvloop.new_event_loop()


def serve_mock(port: int) -> None:
    from aiohttp import web

    arrivals: list[float] = []  # perf_counter (CLOCK_MONOTONIC, one clock for every process) of each request
    reply = {"deltas": DELTAS}  # the burst run changes it between its phases

    async def stream(request: web.Request) -> web.StreamResponse:
        arrivals.append(time.perf_counter())
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        text = []
        for index in range(reply["deltas"]):
            if index:
                await asyncio.sleep(DELTA_GAP)
            piece = f"w{index} "
            text.append(piece)
            await response.write(b"event: delta\ndata: " + json.dumps({"type": "delta", "content": piece}).encode()
                                 + b"\n\n")
        done = {"type": "done", "text": "".join(text), "model": "mock", "finish_reason": "stop", "fallbacks": [],
                "usage": {}, "duration_ms": 0}
        await response.write(b"event: done\ndata: " + json.dumps(done).encode() + b"\n\n")
        await response.write_eof()
        return response

    async def taken_arrivals(request: web.Request) -> web.Response:
        taken = list(arrivals)
        arrivals.clear()
        return web.json_response(taken)

    async def set_deltas(request: web.Request) -> web.Response:
        reply["deltas"] = int(request.match_info["count"])
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/api/v1/chat/stream", stream)
    app.router.add_get("/arrivals", taken_arrivals)
    app.router.add_post("/deltas/{count}", set_deltas)
    app.router.add_get("/health", lambda request: web.Response(text="ok"))
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096, loop=service_loop())


def serve_gateway(port: int, database_url: str, ai_core_url: str, data_dir: str) -> None:
    from aiohttp import web

    sys.path.insert(0, str(ROOT))
    from gateway.app import create_app
    from gateway.serving import new_event_loop, settle_garbage_collector
    from gateway.config import Config
    from plugins.auth import tokens_plugin
    from plugins.ai_core import client_plugin as ai_core_client_plugin
    from plugins.chat import plugin as chat_plugin
    from plugins.files import files_plugin
    from plugins.sessions import plugin as sessions_plugin

    config = Config.load(overrides={
        "core.data_dir": data_dir, "database.url": database_url, "peers.ai_core_url": ai_core_url,
        "auth.admin_username": "admin", "auth.admin_password": "bench-admin-password",
        "auth.jwt_secret": JWT_SECRET, "auth.service_token": SERVICE_TOKEN,
        "plugins.webhooks.webhook_key": "bench-webhook",
        "auth.registration_verify_code": "BENCH1", "auth.chat_for_all_users": True,
        **({"database.pool_max": int(os.environ["BENCH_POOL_MAX"])} if os.environ.get("BENCH_POOL_MAX") else {})},
        environ={})
    loop = new_event_loop(config)  # as `gateway serve` picks it
    asyncio.set_event_loop(loop)
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, files_plugin, ai_core_client_plugin, chat_plugin])
    app.router.add_get("/bench-health", lambda request: web.Response(text="ok"))

    async def started(app: web.Application) -> None:  # as `gateway serve` does once started
        settle_garbage_collector()

    app.on_startup.append(started)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096, loop=loop)


def serve_bare_relay(port: int, ai_core_url: str, reuse_port: bool = False) -> None:
    """The least a relay in one aiohttp process does: a WebSocket message starts a POST to the
    AI core, each `delta` is sent on as a `stream_chunk` frame. No auth, storage, bus or queue:
    what one more Python process on the path costs on this machine, whoever writes it."""
    from aiohttp import WSMsgType, web

    async def relay_turn(http: aiohttp.ClientSession, ws: web.WebSocketResponse, text: str) -> None:
        async with http.post(f"{ai_core_url}/api/v1/chat/stream", json={"user_id": "bare", "text": text, "history": []},
                             headers={"Accept": "text/event-stream"}) as response:
            async for raw in response.content:
                if raw.startswith(b"data:"):
                    event = json.loads(raw[5:])
                    if event.get("type") == "delta":
                        await ws.send_str(json.dumps({"type": "stream_chunk", "content": event["content"]}))
                    elif event.get("type") == "done":
                        await ws.send_str(json.dumps({"type": "stream_end", "text": event.get("text", "")}))

    async def websocket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=HEARTBEAT)
        await ws.prepare(request)
        turns = set()
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                turn = asyncio.create_task(relay_turn(request.app["http"], ws, json.loads(message.data)["content"]))
                turns.add(turn)
                turn.add_done_callback(turns.discard)
        return ws

    async def client(app: web.Application):
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            app["http"] = http
            yield

    app = web.Application()
    app.cleanup_ctx.append(client)
    app.router.add_get("/ws", websocket)
    app.router.add_get("/bench-health", lambda request: web.Response(text="ok"))
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096, loop=service_loop(),
                reuse_port=reuse_port or None)


def serve_bare(port: int) -> None:
    from aiohttp import WSMsgType, web

    async def websocket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=HEARTBEAT)
        await ws.prepare(request)
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                await ws.send_str(message.data)
        return ws

    app = web.Application()
    app.router.add_get("/ws", websocket)
    app.router.add_get("/bench-health", lambda request: web.Response(text="ok"))
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096, loop=service_loop())
