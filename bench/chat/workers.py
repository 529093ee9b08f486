"""The gateway as an operator runs it, `gateway serve --workers N`, beside the bare relay in N
processes: how first-token latency, turns per second and CPU per turn scale with N."""
from __future__ import annotations

import asyncio
import random
import time
import uuid
from pathlib import Path

import aiohttp

from bench.chat.processes import Processes, start_gateway_workers
from bench.chat.servers import DELTA_GAP, DELTAS
from bench.chat.turns import gateway_turn, open_sessions, tree_cpu_seconds
from bench.support import free_port, percentile, wait_until_up

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
