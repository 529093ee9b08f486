"""The gateway's voice timings (issue 22), over the real `/ws/chat`:

1. Final text: a 3-second utterance streamed in 100 ms chunks at the pace of speech
   (`voice_stream_chunk`), then `voice_stream_end`: the time until `voice_final`. Target: 300 ms.
2. First spoken sentence: a `voice_msg` turn whose reply's first sentence arrives whole in one
   delta (the model then pauses a second): the time from the `stream_chunk` that completes it
   to the first `stream_segments` frame (synthesis, storage, the frame). Target: 300 ms.
3. Event-loop lag of the gateway while two streams are recognised at once: a task in the
   gateway's process sleeping 1 ms records how late it wakes. Target: p99 under 10 ms.

Processes: a mock AI core (SSE `delta` events), the voice service, the real gateway (tokens,
sessions, files, chat, voice; real PostgreSQL). The voice service is `--voice-url` when given,
else `gateway serve --service voice-service` when its `voice_engines` plugin is installed (the
utterance is then spoken by the service's own synthesis), else the stand-in of
tests/support/fake_voice.py (which times only the gateway's own path).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python -m bench.voice_gateway

`--base REV` runs REV's voice service and gateway beside this checkout's, alternating
(bench/voice_compare.py).

Without DATABASE_URL an embedded PostgreSQL is started in a temporary directory."""
from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import shutil
import sys
import tempfile
import time
import wave
from importlib.metadata import entry_points
from pathlib import Path

import aiohttp

from bench.support import LoggedProcesses, database_server, free_port, percentile, scratch, wait_until_up
from bench.voice_client import (FIRST_SENTENCE, JWT_SECRET, ROOT, SERVICE_TOKEN, admin_token, first_segment,
                                stream_once, utterance, with_silence)
from bench.voice_compare import compare


# ---------------------------------------------------------------- servers (subprocesses)

def serve_mock(port: int) -> None:
    from aiohttp import web

    async def stream(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        pieces = [FIRST_SENTENCE, "And a second one follows. ", "Then the end."]
        for index, piece in enumerate(pieces):
            if index:
                await asyncio.sleep(1.0)
            await response.write(b"event: delta\ndata: " + json.dumps({"type": "delta", "content": piece}).encode()
                                 + b"\n\n")
        done = {"type": "done", "text": "".join(pieces), "model": "mock", "finish_reason": "stop",
                "fallbacks": [], "usage": {}, "duration_ms": 0}
        await response.write(b"event: done\ndata: " + json.dumps(done).encode() + b"\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/api/v1/chat/stream", stream)
    app.router.add_get("/health", lambda request: web.Response(text="ok"))
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def serve_stand_in(port: int) -> None:
    from aiohttp import web

    sys.path.insert(0, str(ROOT))
    from tests.support.fake_voice import FakeVoiceService

    web.run_app(FakeVoiceService(service_token=SERVICE_TOKEN).app, host="127.0.0.1", port=port, print=None,
                access_log=None)


def serve_gateway(port: int, database_url: str, ai_core_url: str, voice_url: str, data_dir: str) -> None:
    from aiohttp import web

    sys.path.insert(0, str(ROOT))
    from gateway.app import create_app
    from gateway.serving import new_event_loop
    from gateway.config import Config
    from plugins.ai_core import client_plugin as ai_core_client_plugin
    from plugins.auth import tokens_plugin
    from plugins.chat import plugin as chat_plugin
    from plugins.files import files_plugin
    from plugins.sessions import plugin as sessions_plugin
    from plugins.voice.gateway import plugin as voice_plugin

    config = Config.load(overrides={
        "core.data_dir": data_dir, "database.url": database_url, "peers.ai_core_url": ai_core_url,
        "peers.voice_service_url": voice_url, "auth.admin_username": "admin",
        "auth.admin_password": "bench-admin-password", "auth.jwt_secret": JWT_SECRET,
        "auth.service_token": SERVICE_TOKEN, "plugins.webhooks.webhook_key": "bench-webhook",
        "auth.registration_verify_code": "BENCH1"}, environ={})
    loop = new_event_loop(config)
    asyncio.set_event_loop(loop)
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, files_plugin,
                                                 ai_core_client_plugin, chat_plugin, voice_plugin])
    lags: list[float] = []
    monitor: list[asyncio.Task] = []

    async def watch() -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append((time.perf_counter() - started - 0.001) * 1000)

    async def lag(request: web.Request) -> web.Response:
        if request.query.get("action") == "start":
            lags.clear()
            monitor.append(asyncio.create_task(watch()))
            return web.json_response({})
        for task in monitor:
            task.cancel()
        monitor.clear()
        return web.json_response({"p50": percentile(lags, 50), "p99": percentile(lags, 99),
                                  "max": max(lags, default=float("nan")), "samples": len(lags)})

    app.router.add_get("/bench-lag", lag)
    app.router.add_get("/bench-health", lambda request: web.Response(text="ok"))
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, loop=loop)


async def measure(gateway_port: int, voice_url: str, spoken: bool, rounds: int) -> None:
    token = admin_token()
    base = f"http://127.0.0.1:{gateway_port}"
    async with aiohttp.ClientSession() as http:
        audio, per_100ms = await utterance(http, voice_url, spoken)
        with wave.open(io.BytesIO(audio)) as reader:
            seconds = reader.getnframes() / reader.getframerate()
        print(f"utterance: {seconds:.2f} s of audio in {len(range(0, len(audio), per_100ms))} chunks of 100 ms")
        finals, trailing, segments = [], [], []
        padded = with_silence(audio, 500)
        async with http.ws_connect(f"{base}/ws/chat?token={token}&session_id=bench-voice-1") as ws:
            await stream_once(ws, audio, per_100ms)  # warm-up (models loaded, connections open)
            await first_segment(ws)
            for _ in range(rounds):
                finals.append(await stream_once(ws, audio, per_100ms))
                trailing.append(await stream_once(ws, padded, per_100ms))
                segments.append(await first_segment(ws))
        async with http.ws_connect(f"{base}/ws/chat?token={token}&session_id=bench-voice-2") as first, \
                http.ws_connect(f"{base}/ws/chat?token={token}&session_id=bench-voice-3") as second:
            await (await http.get(f"{base}/bench-lag?action=start")).read()
            await asyncio.gather(stream_once(first, audio, per_100ms), stream_once(second, audio, per_100ms))
            lag = await (await http.get(f"{base}/bench-lag?action=stop")).json()
    ms = [value * 1000 for value in finals]
    padded_ms = [value * 1000 for value in trailing]
    seg = [value * 1000 for value in segments]
    print("| measurement | median | p90 | target |")
    print("|---|---|---|---|")
    print(f"| voice_stream_end → voice_final, the stream ending on speech ({rounds} runs) | {percentile(ms, 50):.1f} ms | "
          f"{percentile(ms, 90):.1f} ms (range {min(ms):.0f}–{max(ms):.0f}) | 300 ms |")
    print(f"| the same, 0.5 s of silence after the speech ({rounds} runs) | {percentile(padded_ms, 50):.1f} ms | "
          f"{percentile(padded_ms, 90):.1f} ms (range {min(padded_ms):.0f}–{max(padded_ms):.0f}) | 300 ms |")
    print(f"| first sentence complete → first stream_segments ({rounds} runs) | {percentile(seg, 50):.1f} ms | "
          f"{percentile(seg, 90):.1f} ms | 300 ms |")
    print(f"| gateway loop lag, two streams at once | p50 {lag['p50']:.2f} ms | p99 {lag['p99']:.2f} ms "
          f"(max {lag['max']:.2f}, {lag['samples']} samples) | p99 < 10 ms |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--voice-url", default="", help="a running voice service (with SERVICE_TOKEN "
                                                        f"{SERVICE_TOKEN!r}); default: start one")
    parser.add_argument("--base", metavar="REV", help="also run revision REV's voice service and gateway, "
                        "the rounds alternating between the two (bench/voice_compare.py)")
    parser.add_argument("--serve", choices=["mock", "gateway", "stand-in"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    parser.add_argument("--ai-core-url", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve == "mock":
        return serve_mock(args.port)
    if args.serve == "stand-in":
        return serve_stand_in(args.port)
    if args.serve == "gateway":
        return serve_gateway(args.port, args.database_url, args.ai_core_url, args.voice_url, args.data_dir)
    if args.base:
        return compare(args.base, args.rounds)
    data_dir = Path(tempfile.mkdtemp(prefix="bench-voice-"))
    processes = LoggedProcesses(data_dir)
    try:
        with database_server("bench-voice") as admin_url, scratch(admin_url, "bench_voice") as database_url:
            try:
                voice_url, spoken = args.voice_url.rstrip("/"), True
                if not voice_url:
                    voice_url, spoken = start_voice_service(processes, data_dir)
                gateway_port = start_gateway(processes, database_url, voice_url, data_dir)
                print(f"python {sys.version.split()[0]}, aiohttp {aiohttp.__version__}, {os.cpu_count()} cores")
                asyncio.run(measure(gateway_port, voice_url, spoken, args.rounds))
            finally:
                processes.stop_all()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


ME = [sys.executable, "-m", "bench.voice_gateway"]


def start_voice_service(processes: LoggedProcesses, data_dir: Path) -> tuple[str, bool]:
    """The real voice service when its plugin is installed, else the stand-in; its URL, and
    whether it speaks (the stand-in does not: the utterance is then silence)."""
    port = free_port()
    voice_url = f"http://127.0.0.1:{port}"
    if any(point.name == "voice_engines" for point in entry_points(group="gateway.plugins")):
        process = processes.start("voice-service", sys.executable, "-m", "gateway", "serve", "--service",
                                  "voice-service", "--port", str(port),
                                  environ={"SERVICE_TOKEN": SERVICE_TOKEN, "DATA_DIR": str(data_dir / "voice"),
                                           "JWT_SECRET": JWT_SECRET})
        print("voice service: the real one (gateway serve --service voice-service)")
        wait_until_up(voice_url + "/api/v1/health", process, 180)
        return voice_url, True
    process = processes.start("stand-in", *ME, "--serve", "stand-in", "--port", str(port))
    print("voice service: the stand-in of tests/support/fake_voice.py (voice_engines is not installed)")
    wait_until_up(voice_url + "/api/v1/health", process, 30)
    return voice_url, False


def start_gateway(processes: LoggedProcesses, database_url: str, voice_url: str, data_dir: Path) -> int:
    """The mock AI core and the gateway before it, once both answer; the gateway's port."""
    mock_port, gateway_port = free_port(), free_port()
    mock = processes.start("mock-ai-core", *ME, "--serve", "mock", "--port", str(mock_port))
    wait_until_up(f"http://127.0.0.1:{mock_port}/health", mock, 30)
    gateway = processes.start("gateway", *ME, "--serve", "gateway", "--port", str(gateway_port),
                              "--database-url", database_url, "--ai-core-url", f"http://127.0.0.1:{mock_port}",
                              "--voice-url", voice_url, "--data-dir", str(data_dir / "gateway"))
    wait_until_up(f"http://127.0.0.1:{gateway_port}/bench-health", gateway, 60)
    return gateway_port

if __name__ == "__main__":
    main()
