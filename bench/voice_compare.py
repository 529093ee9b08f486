"""`python -m bench.voice_gateway --base REV`: the voice timings of revision REV and of this
checkout side by side (issue 44: nothing a person uses may get slower after its first use).

Each side is its own voice service and gateway, both started from their checkout (REV in a
temporary `git worktree`), on one mock AI core and one PostgreSQL (a scratch database each). The
same utterance (this checkout's synthesis) is streamed to both; after one warm-up use on each side
(models loaded), the rounds alternate between the sides, the first side swapped each round, so
the drift of a shared machine falls on both alike."""
from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import aiohttp

from bench.support import (LoggedProcesses, checkout, database_server, drop_database, free_port, percentile,
                           scratch_database, wait_until_up)
from bench.voice_client import (JWT_SECRET, ROOT, SERVICE_TOKEN, admin_token, first_segment, stream_once, utterance,
                                with_silence)

MEASURES = (("final", "`voice_stream_end` → `voice_final`, ending on speech"),
            ("trailing", "the same with 0.5 s of silence after the speech"),
            ("segment", "first sentence → first `stream_segments`"))


def start_side(processes: LoggedProcesses, name: str, root: Path, admin_url: str, mock_url: str,
               data_dir: Path) -> tuple[str, str, str]:
    """The voice service and gateway of checkout `root`: (gateway URL, voice URL, database URL)."""
    database_url = scratch_database(admin_url, f"bench_voice_{name}")
    voice_port, gateway_port = free_port(), free_port()
    voice_url = f"http://127.0.0.1:{voice_port}"
    voice = processes.start(f"voice-service-{name}", sys.executable, "-m", "gateway", "serve", "--service",
                            "voice-service", "--port", str(voice_port), root=root,
                            environ={"SERVICE_TOKEN": SERVICE_TOKEN, "DATA_DIR": str(data_dir / f"voice-{name}"),
                                     "JWT_SECRET": JWT_SECRET})
    wait_until_up(voice_url + "/api/v1/health", voice, 180)
    gateway = processes.start(f"gateway-{name}", sys.executable, "-m", "bench.voice_gateway", "--serve", "gateway",
                              "--port", str(gateway_port), "--database-url", database_url, "--ai-core-url",
                              mock_url, "--voice-url", voice_url, "--data-dir", str(data_dir / f"gateway-{name}"),
                              root=root)
    wait_until_up(f"http://127.0.0.1:{gateway_port}/bench-health", gateway, 120)
    return f"http://127.0.0.1:{gateway_port}", voice_url, database_url


async def one_round(ws, audio: bytes, padded: bytes, per_100ms: int, out: dict[str, list[float]]) -> None:
    out["final"].append(await stream_once(ws, audio, per_100ms) * 1000)
    out["trailing"].append(await stream_once(ws, padded, per_100ms) * 1000)
    out["segment"].append(await first_segment(ws) * 1000)


async def alternate(gateways: dict[str, str], voice_url: str, rounds: int) -> dict[str, dict[str, list[float]]]:
    token = admin_token()
    results: dict[str, dict[str, list[float]]] = {side: {key: [] for key, _ in MEASURES} for side in gateways}
    async with aiohttp.ClientSession() as http, contextlib.AsyncExitStack() as stack:
        audio, per_100ms = await utterance(http, voice_url, True)
        padded = with_silence(audio, 500)
        sockets = {side: await stack.enter_async_context(
            http.ws_connect(f"{url}/ws/chat?token={token}&session_id=bench-voice-{side}"))
            for side, url in gateways.items()}
        for ws in sockets.values():  # the first use: models loaded, connections open
            await stream_once(ws, audio, per_100ms)
            await first_segment(ws)
        order = list(sockets)
        for number in range(rounds):
            for side in order if number % 2 == 0 else order[::-1]:
                await one_round(sockets[side], audio, padded, per_100ms, results[side])
            print(f"  round {number + 1}: " + "; ".join(
                f"{side} final {results[side]['final'][-1]:.0f} ms, segment {results[side]['segment'][-1]:.0f} ms"
                for side in order), flush=True)
    return results


def print_table(results: dict[str, dict[str, list[float]]], base: str, rounds: int, load: str) -> None:
    before, now = results["before"], results["now"]
    print(f"\n{rounds} alternating rounds a side after one warm-up use; before = {base}, now = this checkout; "
          f"load {load}\n")
    print("| measurement | before median (range) | now median (range) | now / before | before p90 | now p90 |"
          " now / before p90 |")
    print("|---|---|---|---|---|---|---|")
    for key, title in MEASURES:
        b, n = before[key], now[key]
        print(f"| {title} | {percentile(b, 50):.1f} ms ({min(b):.0f}–{max(b):.0f}) | {percentile(n, 50):.1f} ms "
              f"({min(n):.0f}–{max(n):.0f}) | {percentile(n, 50) / percentile(b, 50):.2f} | "
              f"{percentile(b, 90):.1f} ms | {percentile(n, 90):.1f} ms | "
              f"{percentile(n, 90) / percentile(b, 90):.2f} |")


def load_average() -> str:
    return " / ".join(f"{value:.1f}" for value in os.getloadavg())


def compare(base: str, rounds: int) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="bench-voice-compare-"))
    processes = LoggedProcesses(data_dir)
    databases: list[str] = []
    try:
        with database_server("bench-voice") as admin_url:
            try:
                with checkout(base) as base_root:
                    mock_port = free_port()
                    mock = processes.start("mock-ai-core", sys.executable, "-m", "bench.voice_gateway", "--serve",
                                           "mock", "--port", str(mock_port))
                    mock_url = f"http://127.0.0.1:{mock_port}"
                    wait_until_up(mock_url + "/health", mock, 30)
                    gateways, voice_urls = {}, {}
                    for side, root in (("before", base_root), ("now", ROOT)):
                        gateways[side], voice_urls[side], database_url = start_side(processes, side, root, admin_url,
                                                                                    mock_url, data_dir)
                        databases.append(database_url)
                    print(f"both sides up (voice service and gateway each); load {load_average()}", flush=True)
                    results = asyncio.run(alternate(gateways, voice_urls["now"], rounds))
                    print_table(results, base, rounds, load_average())
            finally:
                processes.stop_all()
                for database_url in databases:
                    drop_database(database_url, admin_url)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
