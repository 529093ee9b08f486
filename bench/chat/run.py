"""Chat channel benchmarks (issue 5): the relay's added latency, and memory per idle WebSocket.

1. Relay. A mock AI core (`POST /api/v1/chat/stream`, 64 `delta` events 20 ms apart, then
   `done`) runs in its own process; the real gateway app (tokens, sessions, files, chat; real
   PostgreSQL, in-process bus) in another. The client process measures, at concurrency 1 and
   200, in interleaved rounds (a new random order each round; `--turns` sequential turns per
   round at concurrency 1, `--turns-per-round` batches of simultaneous turns above it):
   - direct: a POST to the mock's SSE, time from the request to the first `delta` and the gaps
     between `delta`s;
   - gateway: a `message` frame on an open `/ws/chat` connection (one per session, distinct
     users so a device only receives its own session), time from the send to the first
     `stream_chunk` and the gaps between `stream_chunk`s.
   Percentiles are over all samples of all rounds. Added = gateway - direct. Targets: added
   first-token p50 <= 1 ms and p99 <= 5 ms; added gap p99 <= 1 ms.
2. Idle connections. 10,000 WebSockets held open against (a) a bare aiohttp WebSocket server
   and (b) the real gateway with the chat plugin (authenticated, one session each). Each server
   is its own process; its RSS growth (psutil) over its RSS before the connections, once idle,
   divided by the count. Target: gateway <= 1.3x bare.
3. Workers (`--only workers`). The gateway as an operator runs it, `gateway serve --service
   gateway --workers N` (the chat plugins' service table, no REDIS_URL: the embedded bus),
   against the bare relay in N processes on one port (SO_REUSEPORT), for each N of
   `--workers`: first-token latency and turns per second (a batch of `--concurrency` turns at
   once; turns / the batch's wall time) and CPU per turn over each side's whole process tree,
   interleaved rounds as in 1. How both scale with N is the point: the same command on a
   machine with more cores gives more N.
4. Burst starts (`--only burst`). Batches of `--concurrency` simultaneous turns whose reply is
   one delta, then 64, against the gateway and the bare relay: each side's user and system CPU
   per turn (what a turn costs besides its deltas, and what a delta costs: the difference over
   63), and when the batch's first and last requests reached the mock after the batch's first
   message (what stands between a burst and its last first token).
5. Two revisions side by side (`--only compare --base REV`). The gateway of the working tree and
   the gateway of revision REV (checked out into a temporary git worktree) run beside the bare
   relay, and the bursts of 4 run against all three interleaved, `--repeats` times: CPU per turn
   of each, each as a ratio of the bare relay's, and each one's first token p50. This machine's
   speed drifts by a third within an hour, and one change to a turn moves its cost by a few
   percent: two separate runs cannot tell such a change from the drift, one paired run can.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python -m bench.chat.run

Without DATABASE_URL an embedded PostgreSQL is started in a temporary directory. A scratch
database is created and dropped; every process is stopped at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import ctypes.util
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Iterator

import aiohttp

from bench.support import checkout, drop_database, free_port, scratch_database, wait_until_up

ROOT = Path(__file__).resolve().parents[2]
JWT_SECRET = "bench-chat-jwt-secret-" + "q" * 32
SERVICE_TOKEN = "bench-chat-service-token"
DELTAS = 64
DELTA_GAP = 0.020
HEARTBEAT = 30.0  # the chat plugin's default; the bare server gets the same


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# ---------------------------------------------------------------- servers (subprocesses)

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


class Processes:
    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.running: list[subprocess.Popen] = []

    def start(self, name: str, *args: str, log_name: str | None = None, root: Path = ROOT) -> subprocess.Popen:
        """`root`: the checkout whose code the server runs (`--only compare` starts another's)."""
        return self.start_command(log_name or name, [sys.executable, "-m", "bench.chat.run", "--serve", name, *args],
                                  root=root)

    def start_command(self, name: str, command: list[str], environment: dict[str, str] | None = None,
                      root: Path = ROOT) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "w")
        process = subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=environment)
        process.log_path = self.log_dir / f"{name}.log"
        self.running.append(process)
        return process

    def stop(self, process: subprocess.Popen) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # run_app's graceful shutdown
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if process in self.running:
            self.running.remove(process)

    def stop_all(self) -> None:
        for process in reversed(list(self.running)):
            self.stop(process)


def access_token(user_id: str, admin: bool = False) -> str:
    import jwt

    now = int(time.time())
    return jwt.encode({"sub": user_id, "username": user_id, "nickname": user_id, "adm": admin, "typ": "access",
                       "iat": now, "exp": now + 6 * 3600, "jti": uuid.uuid4().hex}, JWT_SECRET, algorithm="HS256")


# ---------------------------------------------------------------- relay

async def direct_turn(http: aiohttp.ClientSession, url: str) -> tuple[float, list[float]]:
    """(seconds to the first delta, gaps between deltas) of one SSE read straight from the mock."""
    started = time.perf_counter()
    stamps: list[float] = []
    async with http.post(url, json={"user_id": "bench", "text": "hello", "history": []},
                         headers={"Authorization": f"Bearer {SERVICE_TOKEN}", "Accept": "text/event-stream"}) as response:
        assert response.status == 200, response.status
        data: list[str] = []
        async for raw in response.content:  # parsed the way the chat plugin parses it
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
            elif not line and data:
                event = json.loads("\n".join(data))
                data = []
                if event.get("type") == "delta":
                    stamps.append(time.perf_counter())
                elif event.get("type") == "done":
                    break
    assert len(stamps) == DELTAS, len(stamps)
    return stamps[0] - started, [b - a for a, b in zip(stamps, stamps[1:])]


async def gateway_turn(ws: aiohttp.ClientWebSocketResponse, session_id: str, deltas: int = DELTAS
                       ) -> tuple[float, list[float]]:
    """(seconds from the `message` frame to the first `stream_chunk`, gaps between chunks)."""
    stamps: list[float] = []
    started = time.perf_counter()
    await ws.send_str(json.dumps({"type": "message", "content": "hello", "client_msg_id": uuid.uuid4().hex}))
    while True:
        message = await ws.receive(timeout=60)
        now = time.perf_counter()
        if message.type != aiohttp.WSMsgType.TEXT:
            raise RuntimeError(f"WebSocket of {session_id}: {message.type} {message.data!r}")
        frame = json.loads(message.data)
        kind = frame.get("type")
        if kind == "stream_chunk":
            stamps.append(now)
        elif kind == "stream_end":
            if frame.get("finish_reason") == "error":
                raise RuntimeError(f"turn of {session_id} failed: {frame}")
            break
        elif kind == "error":
            raise RuntimeError(f"turn of {session_id}: {frame}")
    assert len(stamps) == deltas, len(stamps)
    return stamps[0] - started, [b - a for a, b in zip(stamps, stamps[1:])]


TARGETS = ("direct", "bare relay", "gateway")


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def cpu_seconds(pid: int) -> float:
    """The process's CPU time (user and system, every thread) to the nanosecond, from its CPU
    clock (clock_getcpuclockid). psutil's user and system times come in clock ticks (10 ms here),
    so a turn of a few milliseconds measured one at a time was rounded by a tick at each end:
    over 45 turns a few percent of noise on each side of a ratio. psutil's figure where the
    clock cannot be had."""
    clock = ctypes.c_int()
    clock_of = getattr(_LIBC, "clock_getcpuclockid", None)  # not in every libc (macOS)
    if clock_of is not None and clock_of(pid, ctypes.byref(clock)) == 0:
        now = _Timespec()
        if _LIBC.clock_gettime(clock, ctypes.byref(now)) == 0:
            return now.tv_sec + now.tv_nsec / 1e9
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


async def relay(gateway_port: int, bare_port: int, mock_port: int, concurrency: int, rounds: int,
                turns: int, relay_pids: dict[str, int]) -> dict:
    """Samples of every target at one concurrency: `turns` batches of `concurrency` simultaneous
    turns per round, targets interleaved in a new random order each round (at concurrency 1
    turn by turn, see `alternating`). `relay_pids`: the
    relays' processes, whose CPU time over their counted turns is recorded too."""
    mock_url = f"http://127.0.0.1:{mock_port}/api/v1/chat/stream"
    samples = {name: {"ttft": [], "gap": [], "cpu": 0.0, "turns": 0} for name in TARGETS}
    connector = aiohttp.TCPConnector(limit=0)
    run_id = uuid.uuid4().hex[:6]
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300)) as http:
        sockets: list[tuple[aiohttp.ClientWebSocketResponse, str]] = []

        async def connect(name: str) -> None:
            """Open one socket per session (one user each: a device gets only its own turn). A
            socket is opened afresh for each gateway phase: nothing reads it during the direct
            phase, so it would miss the server's heartbeat pings and be closed."""
            for ws, _ in sockets:
                await ws.close()
            sockets.clear()
            for index in range(concurrency):
                user = f"user_bench_{run_id}_{index}"
                session_id = f"bench_{run_id}_{index}"
                url = (f"http://127.0.0.1:{gateway_port}/ws/chat?token={access_token(user)}&session_id={session_id}"
                       if name == "gateway" else f"http://127.0.0.1:{bare_port}/ws")
                ws = await http.ws_connect(url, max_msg_size=0)
                sockets.append((ws, session_id))

        async def alternating(count: int) -> None:
            """`count` turns a target one at a time, the targets taking turns (a new random order
            for each three): a single turn's CPU is a few milliseconds, and this machine's speed
            drifts by more than the gateway's difference within the minute a phase of turns
            would last. Both relays' sockets stay open throughout (a turn of another target
            lasts a second or two, the heartbeat 30 s)."""
            for name in ("gateway", "bare relay"):
                url = (f"http://127.0.0.1:{gateway_port}/ws/chat?token={access_token(f'user_bench_{run_id}_0')}"
                       f"&session_id=bench_{run_id}_0" if name == "gateway" else f"http://127.0.0.1:{bare_port}/ws")
                sockets.append((await http.ws_connect(url, max_msg_size=0), name))
            by_name = {name: ws for ws, name in sockets}
            for name in TARGETS:  # one uncounted turn each, as the batches below have
                await one_turn(name, by_name)
            for _ in range(count):
                for name in random.sample(TARGETS, len(TARGETS)):
                    pid = relay_pids.get(name)
                    cpu_before = cpu_seconds(pid) if pid else 0.0
                    ttft, gaps = await one_turn(name, by_name)
                    if pid:
                        samples[name]["cpu"] += cpu_seconds(pid) - cpu_before
                        samples[name]["turns"] += 1
                    samples[name]["ttft"].append(ttft)
                    samples[name]["gap"].extend(gaps)

        async def one_turn(name: str, by_name: dict) -> tuple[float, list[float]]:
            if name == "direct":
                return await direct_turn(http, mock_url)
            return await gateway_turn(by_name[name], f"bench_{run_id}_0")

        async def batch(name: str) -> list[tuple[float, list[float]]]:
            if name == "direct":
                return await asyncio.gather(*(direct_turn(http, mock_url) for _ in range(concurrency)))
            return await asyncio.gather(*(gateway_turn(ws, sid) for ws, sid in sockets))

        try:
            if concurrency == 1:
                await alternating(rounds * turns)
                return samples
            for _ in range(rounds):
                order = list(TARGETS)
                random.shuffle(order)
                for name in order:
                    if name != "direct":
                        await connect(name)
                    # One uncounted batch first, for both targets alike: while the other target's
                    # batch ran, this one's processes sat idle, and on this VM a process's first
                    # work after seconds of idleness runs several times slower (see README).
                    await batch(name)
                    pid = relay_pids.get(name)
                    cpu_before = cpu_seconds(pid) if pid else 0.0
                    for _ in range(turns):
                        for ttft, gaps in await batch(name):
                            samples[name]["ttft"].append(ttft)
                            samples[name]["gap"].extend(gaps)
                    if pid:
                        samples[name]["cpu"] += cpu_seconds(pid) - cpu_before
                        samples[name]["turns"] += turns * concurrency
        finally:
            await asyncio.gather(*(ws.close() for ws, _ in sockets), return_exceptions=True)
    return samples


def report_relay(concurrency: int, samples: dict) -> dict:
    figures = {}
    cpu = {name: series["cpu"] / series["turns"] * 1000 for name, series in samples.items() if series["turns"]}
    for name, series in samples.items():
        figures[name] = {"ttft50": percentile(series["ttft"], 50) * 1000, "ttft99": percentile(series["ttft"], 99) * 1000,
                         "gap50": percentile(series["gap"], 50) * 1000, "gap99": percentile(series["gap"], 99) * 1000,
                         "n_ttft": len(series["ttft"]), "n_gap": len(series["gap"])}
    d = figures["direct"]
    keys = ("ttft50", "ttft99", "gap50", "gap99")
    added = {name: {key: figures[name][key] - d[key] for key in keys} for name in TARGETS[1:]}
    print(f"\nrelay, concurrency {concurrency}: {d['n_ttft']} turns, {d['n_gap']} gaps per target (ms)")
    print(f"  {'target':20} {'TTFT p50':>9} {'TTFT p99':>9} {'gap p50':>9} {'gap p99':>9}")
    for name in TARGETS:
        f = figures[name]
        print(f"  {name:20} {f['ttft50']:9.2f} {f['ttft99']:9.2f} {f['gap50']:9.2f} {f['gap99']:9.2f}")
    for name in TARGETS[1:]:
        a = added[name]
        print(f"  {'added, ' + name:20} {a['ttft50']:9.2f} {a['ttft99']:9.2f} {a['gap50']:9.2f} {a['gap99']:9.2f}")
    gateway, bare = added["gateway"], added["bare relay"]
    checks = [("added TTFT p50", gateway["ttft50"], 1.0), ("added TTFT p99", gateway["ttft99"], 5.0),
              ("added gap p99", gateway["gap99"], 1.0)]
    print("  gateway: " + "   ".join(f"{label} {value:.2f} ms / target {limit:g} ms = {value / limit:.2f}x "
                                     f"({'met' if value <= limit else 'NOT met'})" for label, value, limit in checks))
    print("  the bare relay on the same machine (what any one-process Python relay adds): " + "   ".join(
        f"{label} {bare[key]:.2f} ms" for label, key in (("TTFT p50", "ttft50"), ("TTFT p99", "ttft99"),
                                                          ("gap p99", "gap99"))))
    print(f"  CPU per turn of the relay's process: bare relay {cpu['bare relay']:.2f} ms, gateway "
          f"{cpu['gateway']:.2f} ms (gateway/bare = {cpu['gateway'] / cpu['bare relay']:.2f}x)")
    return {"added": added, "cpu": cpu}


# Issue 23's targets, against the bare relay of the same run: CPU per turn at every concurrency,
# the added first token at 200.
CPU_RATIO_TARGET = 1.25
TTFT_RATIO_TARGET, TTFT_RATIO_AT = 2.0, 200


def report_per_turn(results: dict[int, dict]) -> None:
    """One table of what a turn costs the gateway beside the bare relay, per concurrency."""
    print("\nper turn, gateway beside the bare relay (issue 23: CPU <= "
          f"{CPU_RATIO_TARGET:g}x at every concurrency, added TTFT p50 <= {TTFT_RATIO_TARGET:g}x at {TTFT_RATIO_AT})")
    print("| concurrency | added first token p50, bare / gateway | gateway ÷ bare | CPU per turn, bare / gateway "
          "| gateway ÷ bare |")
    print("|---|---|---|---|---|")
    for concurrency, result in results.items():
        bare, gateway = result["added"]["bare relay"]["ttft50"], result["added"]["gateway"]["ttft50"]
        cpu_bare, cpu_gateway = result["cpu"]["bare relay"], result["cpu"]["gateway"]
        ttft_ratio, cpu_ratio = gateway / bare if bare > 0 else float("inf"), cpu_gateway / cpu_bare
        ttft_verdict = (f" ({'met' if ttft_ratio <= TTFT_RATIO_TARGET else 'NOT met'})"
                        if concurrency == TTFT_RATIO_AT else "")
        cpu_verdict = "met" if cpu_ratio <= CPU_RATIO_TARGET else "NOT met"
        print(f"| {concurrency} | {bare:.2f} / {gateway:.2f} ms | {ttft_ratio:.2f}x{ttft_verdict} "
              f"| {cpu_bare:.2f} / {cpu_gateway:.2f} ms | {cpu_ratio:.2f}x ({cpu_verdict}) |")


# ---------------------------------------------------------------- idle connections

def rss(pid: int) -> int:
    import psutil

    return psutil.Process(pid).memory_info().rss


async def settled_rss(pid: int, seconds: float = 20.0) -> int:
    """RSS once it stops moving (two readings 1 s apart within 64 KiB), at most `seconds`."""
    deadline = time.monotonic() + seconds
    previous = rss(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(1.0)
        current = rss(pid)
        if abs(current - previous) < 64 * 1024:
            return current
        previous = current
    return rss(pid)


async def hold_connections(url_for, count: int, pid: int, parallel: int = 64) -> tuple[int, int, int, float]:
    """Open `count` WebSockets (at most `parallel` handshakes at once), wait until idle, read the
    server's RSS. Returns (opened, rss before, rss idle, seconds to open)."""
    # A warm-up connection first so lazy imports and first-use caches are in the baseline.
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url_for(-1)) as ws:
            await ws.close()
    await asyncio.sleep(0.5)
    before = await settled_rss(pid)
    sessions = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=60))
                for _ in range(8)]
    sockets: list[aiohttp.ClientWebSocketResponse] = []
    failures: list[str] = []
    semaphore = asyncio.Semaphore(parallel)
    started = time.monotonic()

    async def one(index: int) -> None:
        async with semaphore:
            try:
                sockets.append(await sessions[index % len(sessions)].ws_connect(url_for(index), heartbeat=None,
                                                                                autoping=True))
            except Exception as error:  # reported, the run goes on with what opened
                failures.append(f"{error.__class__.__name__}: {error}")

    try:
        await asyncio.gather(*(one(index) for index in range(count)))
        opened = time.monotonic() - started
        if failures:
            print(f"  {len(failures)} connections failed, e.g. {failures[0]}")
        await asyncio.sleep(2.0)
        idle = await settled_rss(pid)
        return len(sockets), before, idle, opened
    finally:
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
        for session in sessions:
            await session.close()


# ---------------------------------------------------------------- workers

# The gateway of conf/services.toml with the plugins the relay run builds (tokens, sessions,
# files, the AI core client, chat).
BENCH_SERVICES = """
[[service]]
id = "gateway"
name = "Gateway"
port = {port}
plugins = ["auth_tokens", "sessions", "files", "ai_core_client", "chat"]
workers = "auto"
"""


def start_gateway_workers(processes: Processes, workers: int, port: int, database_url: str, ai_core_url: str,
                          data_dir: Path) -> subprocess.Popen:
    """`gateway serve --service gateway --workers N` configured through its environment, on the
    embedded bus (no REDIS_URL) as a default installation runs."""
    conf = data_dir / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "conf" / "default.toml", conf / "default.toml")
    (conf / "services.toml").write_text(BENCH_SERVICES.format(port=port))
    environment = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "DATABASE_URL")}
    environment.update(GATEWAY_CONF_DIR=str(conf), DATA_DIR=str(data_dir / "data"), DATABASE_URL=database_url,
                       AI_CORE_URL=ai_core_url, JWT_SECRET=JWT_SECRET, SERVICE_TOKEN=SERVICE_TOKEN,
                       ADMIN_PASSWORD="bench-admin-password", WEBHOOK_KEY="bench-webhook",
                       REGISTRATION_VERIFY_CODE="BENCH1", CHAT_FOR_ALL_USERS="true")
    return processes.start_command(f"gateway-{workers}-workers",
                                   [sys.executable, "-m", "gateway", "--log-level", "warning", "serve", "--service",
                                    "gateway", "--workers", str(workers)], environment)


def tree_cpu_seconds(pids: list[int]) -> float:
    """CPU time of these processes and everything they started (workers, the embedded bus)."""
    import psutil

    total = 0.0
    for pid in pids:
        root = psutil.Process(pid)
        for process in [root, *root.children(recursive=True)]:
            try:
                total += cpu_seconds(process.pid)
            except psutil.NoSuchProcess:
                continue
    return total


@contextlib.asynccontextmanager
async def open_sessions(http: aiohttp.ClientSession, url: str, count: int, prefix: str
                        ) -> AsyncIterator[list[tuple[aiohttp.ClientWebSocketResponse, str]]]:
    """`count` WebSockets to `url` (its `{token}` and `{session}` filled in), each of its own user
    and session (`<prefix>_<n>`), as (socket, session id); closed on leaving."""
    sockets: list[tuple[aiohttp.ClientWebSocketResponse, str]] = []
    try:
        for index in range(count):
            session = f"{prefix}_{index}"
            sockets.append((await http.ws_connect(url.format(token=access_token(f"user_{session}"), session=session),
                                                  max_msg_size=0), session))
        yield sockets
    finally:
        await asyncio.gather(*(ws.close() for ws, _ in sockets), return_exceptions=True)


async def scaling(urls: dict[str, str], pids: dict[str, list[int]], concurrency: int, rounds: int,
                  turns: int) -> dict:
    """Per target: first-token latencies, counted turns, the batches' wall time and CPU time.
    `urls`: the WebSocket URL of a session, by target, with `{token}` and `{session}` in it."""
    samples = {name: {"ttft": [], "turns": 0, "wall": 0.0, "cpu": 0.0} for name in urls}
    run_id = uuid.uuid4().hex[:6]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=300)) as http:
        for _ in range(rounds):
            order = list(urls)
            random.shuffle(order)
            for name in order:
                async with open_sessions(http, urls[name], concurrency, f"w_{run_id}") as sockets:
                    await asyncio.gather(*(gateway_turn(ws, sid) for ws, sid in sockets))  # warm-up, uncounted
                    cpu_before = tree_cpu_seconds(pids[name])
                    for _ in range(turns):
                        started = time.perf_counter()
                        results = await asyncio.gather(*(gateway_turn(ws, sid) for ws, sid in sockets))
                        samples[name]["wall"] += time.perf_counter() - started
                        samples[name]["ttft"].extend(ttft for ttft, _ in results)
                        samples[name]["turns"] += len(results)
                    samples[name]["cpu"] += tree_cpu_seconds(pids[name]) - cpu_before
    return samples


async def run_workers(args, processes: Processes, database_url: str, data_dir: Path) -> None:
    mock_port = free_port()
    mock = processes.start("mock", "--port", str(mock_port))
    wait_until_up(f"http://127.0.0.1:{mock_port}/health", mock, 30)
    mock_url = f"http://127.0.0.1:{mock_port}"
    print(f"\nworkers: {DELTAS} deltas {DELTA_GAP * 1000:g} ms apart; rounds={args.rounds}, "
          f"{args.turns_per_round} batches per round, the gateway on the embedded bus (no REDIS_URL)")
    rows = []
    try:
        for workers in args.workers:
            gateway_port, bare_port = free_port(), free_port()
            bare = [processes.start("bare-relay", "--port", str(bare_port), "--ai-core-url", mock_url,
                                    *(["--reuse-port"] if workers > 1 else []), log_name=f"bare-relay-{workers}-{index}")
                    for index in range(workers)]
            for process in bare:
                wait_until_up(f"http://127.0.0.1:{bare_port}/bench-health", process, 30)
            gateway = start_gateway_workers(processes, workers, gateway_port, database_url, mock_url,
                                            data_dir / f"workers-{workers}")
            wait_until_up(f"http://127.0.0.1:{gateway_port}/api/v1/health", gateway, 120)
            await asyncio.sleep(2.0)  # every worker up, not only the first to answer
            urls = {"bare relay": f"http://127.0.0.1:{bare_port}/ws",
                    "gateway": f"http://127.0.0.1:{gateway_port}/ws/chat?token={{token}}&session_id={{session}}"}
            pids = {"bare relay": [process.pid for process in bare], "gateway": [gateway.pid]}
            try:
                for concurrency in args.concurrency:
                    samples = await scaling(urls, pids, concurrency, args.rounds, args.turns_per_round)
                    for name, series in samples.items():
                        rows.append((workers, concurrency, name, percentile(series["ttft"], 50) * 1000,
                                     percentile(series["ttft"], 99) * 1000, series["turns"] / series["wall"],
                                     series["cpu"] / series["turns"] * 1000))
            except Exception:
                print(f"the gateway's log ({workers} workers) ends:\n" + gateway.log_path.read_text()[-4000:])
                raise
            finally:
                processes.stop(gateway)
                for process in bare:
                    processes.stop(process)
    finally:
        processes.stop(mock)
    print(f"  {'workers':>7} {'conc.':>6} {'target':12} {'TTFT p50 ms':>12} {'TTFT p99 ms':>12} {'turns/s':>8} "
          f"{'CPU/turn ms':>12}")
    for workers, concurrency, name, p50, p99, rate, cpu in rows:
        print(f"  {workers:7d} {concurrency:6d} {name:12} {p50:12.1f} {p99:12.1f} {rate:8.1f} {cpu:12.2f}")
    first = min(args.workers)
    for workers, concurrency, name, p50, _, rate, _ in rows:
        base = next(row for row in rows if row[0] == first and row[1] == concurrency and row[2] == name)
        if workers != first:
            print(f"  {name}, concurrency {concurrency}: {workers} workers vs {first}: turns/s x{rate / base[5]:.2f}, "
                  f"TTFT p50 x{p50 / base[3]:.2f}")


# ---------------------------------------------------------------- main

@dataclass
class Relays:
    """The mock AI core and the two relays in front of it (the bare one and the gateway app)."""
    mock_port: int
    bare_port: int
    gateway_port: int
    processes: dict[str, subprocess.Popen]  # "mock", "bare relay", "gateway"

    @property
    def mock_url(self) -> str:
        return f"http://127.0.0.1:{self.mock_port}"

    @property
    def pids(self) -> dict[str, int]:
        """The relays' processes, by target."""
        return {name: process.pid for name, process in self.processes.items() if name != "mock"}


GATEWAY_WS_URL = "http://127.0.0.1:{port}/ws/chat?token={{token}}&session_id={{session}}"


def start_gateway_app(processes: Processes, port: int, database_url: str, mock_url: str, data_dir: Path,
                      root: Path = ROOT, log_name: str | None = None) -> subprocess.Popen:
    """The gateway app of checkout `root` in its own process, once it answers."""
    gateway = processes.start("gateway", "--port", str(port), "--database-url", database_url, "--ai-core-url",
                              mock_url, "--data-dir", str(data_dir), log_name=log_name, root=root)
    wait_until_up(f"http://127.0.0.1:{port}/bench-health", gateway, 120)
    return gateway


@contextlib.contextmanager
def relays(processes: Processes, database_url: str, gateway_data: Path) -> Iterator[Relays]:
    """The mock, the bare relay and the gateway app, each in its own process; stopped on leaving."""
    mock_port, bare_port, gateway_port = free_port(), free_port(), free_port()
    mock_url = f"http://127.0.0.1:{mock_port}"
    started: dict[str, subprocess.Popen] = {}
    try:
        started["mock"] = processes.start("mock", "--port", str(mock_port))
        wait_until_up(f"{mock_url}/health", started["mock"], 30)
        started["bare relay"] = processes.start("bare-relay", "--port", str(bare_port), "--ai-core-url", mock_url)
        wait_until_up(f"http://127.0.0.1:{bare_port}/bench-health", started["bare relay"], 30)
        started["gateway"] = start_gateway_app(processes, gateway_port, database_url, mock_url, gateway_data)
        yield Relays(mock_port, bare_port, gateway_port, started)
    finally:
        for process in reversed(list(started.values())):
            processes.stop(process)


async def run_relay(args, processes: Processes, database_url: str, data_dir: Path) -> None:
    with relays(processes, database_url, data_dir / "relay") as servers:
        print(f"relay: {DELTAS} deltas {DELTA_GAP * 1000:g} ms apart; rounds={args.rounds}")
        results = {}
        for concurrency in args.concurrency:
            turns = args.turns if concurrency == 1 else args.turns_per_round
            samples = await relay(servers.gateway_port, servers.bare_port, servers.mock_port, concurrency,
                                  args.rounds, turns, servers.pids)
            results[concurrency] = report_relay(concurrency, samples)
        report_per_turn(results)


async def burst(urls: dict[str, str], pids: dict[str, int], mock_url: str, concurrency: int, rounds: int,
                deltas: int) -> dict:
    """Per target, over `rounds` counted batches of `concurrency` simultaneous turns of `deltas`
    deltas: user and system CPU per turn, the median over batches of when the first and the
    last request reached the mock after the batch began, and every counted turn's first token."""
    import psutil

    samples = {name: {"user": 0.0, "system": 0.0, "turns": 0, "first": [], "last": [], "ttft": []}
               for name in urls}
    run_id = uuid.uuid4().hex[:6]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=300)) as http:
        await (await http.post(f"{mock_url}/deltas/{deltas}")).read()
        for name in random.sample(list(urls), len(urls)):
            async with open_sessions(http, urls[name], concurrency, f"b{deltas}_{run_id}") as sockets:
                for _ in range(2):  # uncounted, as in the relay run
                    await asyncio.gather(*(gateway_turn(ws, sid, deltas) for ws, sid in sockets))
                await (await http.get(f"{mock_url}/arrivals")).read()
                process = psutil.Process(pids[name])
                before = process.cpu_times()
                for _ in range(rounds):
                    began = time.perf_counter()
                    turns = await asyncio.gather(*(gateway_turn(ws, sid, deltas) for ws, sid in sockets))
                    samples[name]["ttft"].extend(ttft * 1000 for ttft, _ in turns)
                    arrivals = await (await http.get(f"{mock_url}/arrivals")).json()
                    samples[name]["first"].append((min(arrivals) - began) * 1000)
                    samples[name]["last"].append((max(arrivals) - began) * 1000)
                    await asyncio.sleep(0.2)  # the turns' writes after stream_end settle
                after = process.cpu_times()
                samples[name]["user"] += after.user - before.user
                samples[name]["system"] += after.system - before.system
                samples[name]["turns"] += rounds * concurrency
    return samples


def burst_cpu(series: dict) -> float:
    """Seconds of CPU (user and system) per turn of one target's burst samples."""
    return (series["user"] + series["system"]) / series["turns"]


async def run_burst(args, processes: Processes, database_url: str, data_dir: Path) -> None:
    with relays(processes, database_url, data_dir / "burst") as servers:
        urls = {"bare relay": f"http://127.0.0.1:{servers.bare_port}/ws",
                "gateway": GATEWAY_WS_URL.format(port=servers.gateway_port)}
        for concurrency in args.concurrency:
            print(f"\nburst: {concurrency} turns at once, {args.rounds} counted batches per phase")
            results = {deltas: await burst(urls, servers.pids, servers.mock_url, concurrency, args.rounds, deltas)
                       for deltas in (1, DELTAS)}
            print(f"  {'target':12} {'deltas':>6} {'user ms/turn':>13} {'system ms/turn':>15} "
                  f"{'first request ms':>17} {'last request ms':>16}")
            for deltas, samples in results.items():
                for name, series in samples.items():
                    print(f"  {name:12} {deltas:6d} {series['user'] / series['turns'] * 1000:13.3f} "
                          f"{series['system'] / series['turns'] * 1000:15.3f} {percentile(series['first'], 50):17.1f} "
                          f"{percentile(series['last'], 50):16.1f}")
            for name in urls:
                one, many = results[1][name], results[DELTAS][name]
                per_delta = (burst_cpu(many) - burst_cpu(one)) / (DELTAS - 1) * 1e6
                print(f"  {name}: a one-delta turn {burst_cpu(one) * 1000:.3f} ms of CPU, "
                      f"each further delta {per_delta:.1f} µs")


async def run_compare(args, processes: Processes, database_url: str, data_dir: Path) -> None:
    """The bursts of `run_burst` against the bare relay, this checkout's gateway and revision
    `--base`'s, interleaved: the figures of the two gateways are taken under the same drift."""
    with checkout(args.base) as base_root, relays(processes, database_url, data_dir / "compare") as servers:
        base_port = free_port()
        base = start_gateway_app(processes, base_port, database_url, servers.mock_url, data_dir / "compare-base",
                                 root=base_root, log_name="gateway-base")
        urls = {"bare relay": f"http://127.0.0.1:{servers.bare_port}/ws",
                "gateway": GATEWAY_WS_URL.format(port=servers.gateway_port),
                f"gateway {args.base}": GATEWAY_WS_URL.format(port=base_port)}
        pids = {**servers.pids, f"gateway {args.base}": base.pid}
        for concurrency in args.concurrency:
            print(f"\ncompare: {concurrency} turns at once, {args.rounds} counted batches per phase, "
                  f"{args.repeats} repeats; CPU per turn (ms), each repeat and in all")
            totals: dict[tuple[str, int], list[float]] = {}
            first_tokens: dict[tuple[str, int], list[float]] = {}
            for repeat in range(args.repeats):
                for deltas in random.sample([1, DELTAS], 2):
                    samples = await burst(urls, pids, servers.mock_url, concurrency, args.rounds, deltas)
                    for name, series in samples.items():
                        total = totals.setdefault((name, deltas), [0.0, 0])
                        total[0] += series["user"] + series["system"]
                        total[1] += series["turns"]
                        first_tokens.setdefault((name, deltas), []).extend(series["ttft"])
                    print(f"  repeat {repeat + 1}, {deltas} deltas: " + ", ".join(
                        f"{name} {burst_cpu(series) * 1000:.3f}"
                        for name, series in samples.items()), flush=True)
            for deltas in (1, DELTAS):
                bare = totals[("bare relay", deltas)][0] / totals[("bare relay", deltas)][1]
                print(f"  {deltas} deltas: " + ", ".join(  # a run too short for one CPU tick has no ratio
                    f"{name} {cpu / turns * 1000:.3f} ms ({f'{cpu / turns / bare:.2f}x' if bare else 'no ratio'})"
                    for (name, count), (cpu, turns) in totals.items() if count == deltas))
            print("  first token p50 (ms, from the message frame; the bare relay's is what any relay takes): "
                  + "; ".join(f"{deltas} deltas: " + ", ".join(
                      f"{name} {percentile(first_tokens[(name, deltas)], 50):.1f}" for name in urls)
                              for deltas in (1, DELTAS)))


async def run_idle(args, processes: Processes, database_url: str, data_dir: Path) -> None:
    count = args.connections
    print(f"\nidle connections: {count} WebSockets per server, heartbeat {HEARTBEAT:g} s on both")
    results = {}
    bare_port = free_port()
    bare = processes.start("bare", "--port", str(bare_port))
    wait_until_up(f"http://127.0.0.1:{bare_port}/bench-health", bare, 30)
    try:
        results["bare"] = await hold_connections(lambda i: f"http://127.0.0.1:{bare_port}/ws", count, bare.pid)
    finally:
        processes.stop(bare)

    gateway_port = free_port()
    gateway = processes.start("gateway", "--port", str(gateway_port), "--database-url", database_url,
                              "--ai-core-url", "http://127.0.0.1:9", "--data-dir", str(data_dir / "idle"))
    wait_until_up(f"http://127.0.0.1:{gateway_port}/bench-health", gateway, 120)
    token = access_token("admin", admin=True)
    try:
        results["gateway"] = await hold_connections(
            lambda i: f"http://127.0.0.1:{gateway_port}/ws/chat?token={token}&session_id=idle_{i + 1}", count,
            gateway.pid)
    finally:
        processes.stop(gateway)

    per = {}
    print(f"  {'server':8} {'opened':>7} {'open s':>7} {'RSS before MB':>14} {'RSS idle MB':>12} {'bytes/conn':>11}")
    for name, (opened, before, idle, seconds) in results.items():
        per[name] = (idle - before) / max(1, opened)
        print(f"  {name:8} {opened:7d} {seconds:7.1f} {before / 2**20:14.1f} {idle / 2**20:12.1f} {per[name]:11.0f}")
    ratio = per["gateway"] / per["bare"]
    print(f"  memory per idle connection gateway/bare = {ratio:.2f}x (target <= 1.3x -> "
          f"{'met' if ratio <= 1.3 else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20, help="sequential turns per round at concurrency 1")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 200])
    parser.add_argument("--connections", type=int, default=10000)
    parser.add_argument("--only", choices=["relay", "idle", "workers", "burst", "compare"])
    parser.add_argument("--base", default="HEAD", help="the revision the compare run sets beside the working tree")
    parser.add_argument("--repeats", type=int, default=4, help="interleaved repeats of the compare run")
    parser.add_argument("--workers", type=int, nargs="+", default=None,
                        help="worker counts of the workers run (default: 1 and every core)")
    parser.add_argument("--turns-per-round", type=int, default=3,
                        help="counted batches per round at a concurrency above 1 (relay and workers runs)")
    # internal: run one server in this process
    parser.add_argument("--serve", choices=["mock", "gateway", "bare", "bare-relay"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    parser.add_argument("--ai-core-url", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    raise_fd_limit()
    if args.serve == "mock":
        return serve_mock(args.port)
    if args.serve == "bare":
        return serve_bare(args.port)
    if args.serve == "bare-relay":
        return serve_bare_relay(args.port, args.ai_core_url, args.reuse_port)
    if args.serve == "gateway":
        return serve_gateway(args.port, args.database_url, args.ai_core_url, args.data_dir)

    data_dir = Path(tempfile.mkdtemp(prefix="bench-chat-"))
    processes = Processes(data_dir)
    admin_url = os.environ.get("DATABASE_URL", "")
    embedded = None
    database_url = ""
    try:
        if not admin_url:
            sys.path.insert(0, str(ROOT))
            from gateway.embedded_database import start_embedded

            admin_url, embedded = start_embedded(Path(tempfile.mkdtemp(prefix="bench-chat-pg-")))
        database_url = scratch_database(admin_url, "bench_chat")
        print(f"python {sys.version.split()[0]}, aiohttp {aiohttp.__version__}, {os.cpu_count()} cores; "
              f"RLIMIT_NOFILE {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}")
        if args.only in (None, "relay"):
            asyncio.run(run_relay(args, processes, database_url, data_dir))
        if args.only in (None, "idle"):
            asyncio.run(run_idle(args, processes, database_url, data_dir))
        if args.only == "burst":  # a diagnosis of the relay's figures, not part of the full run
            asyncio.run(run_burst(args, processes, database_url, data_dir))
        if args.only == "compare":  # a change measured against another revision, not part of the full run
            asyncio.run(run_compare(args, processes, database_url, data_dir))
        if args.only in (None, "workers"):
            args.workers = args.workers or sorted({1, min(os.cpu_count() or 1, 8)})
            asyncio.run(run_workers(args, processes, database_url, data_dir))
    finally:
        processes.stop_all()
        if database_url:
            drop_database(database_url, admin_url)
        if embedded is not None:
            embedded.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
