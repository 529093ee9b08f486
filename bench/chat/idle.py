"""Memory per idle WebSocket (the chat benchmarks' second part): 10,000 connections held open
against the bare server and against the gateway, each server's RSS growth divided by the count."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp

from bench.chat.processes import Processes, access_token
from bench.chat.servers import HEARTBEAT
from bench.support import free_port, wait_until_up

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
