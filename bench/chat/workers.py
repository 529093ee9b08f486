"""The gateway as an operator runs it, `gateway serve --workers N`, beside the bare relay in N
processes: how first-token latency, turns per second and CPU per turn scale with N, and what the
service table's "auto" resolves to here, side by side (issue 44's measure in one command)."""
from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import aiohttp

from bench.chat.machine_cpu import OWN_ROLES, Meter, gateway_meter, postgres_pid, relay_meter, spent
from bench.chat.processes import Processes, auto_workers_here, start_gateway_workers
from bench.chat.servers import DELTA_GAP, DELTAS
from bench.chat.turns import gateway_turn, open_sessions
from bench.support import free_port, percentile, wait_until_up


@dataclass
class Row:
    label: str  # "1", "2", "auto (= 1)"
    concurrency: int
    target: str
    p50: float  # first token, ms
    p99: float
    rate: float  # turns/s
    cpu: float  # the target's own process tree, ms a turn
    roles: dict[str, float]  # ms a turn, by role, the rest of the machine included


async def scaling(urls: dict[str, str], meters: dict[str, Meter], concurrency: int, rounds: int,
                  turns: int) -> dict:
    """Per target: first-token latencies, counted turns, the batches' wall time and CPU time by
    role. `urls`: the WebSocket URL of a session, by target, with `{token}` and `{session}` in it."""
    samples: dict[str, dict] = {name: {"ttft": [], "turns": 0, "wall": 0.0, "cpu": {}} for name in urls}
    run_id = uuid.uuid4().hex[:6]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=300)) as http:
        for _ in range(rounds):
            order = list(urls)
            random.shuffle(order)
            for name in order:
                async with open_sessions(http, urls[name], concurrency, f"w_{run_id}") as sockets:
                    await asyncio.gather(*(gateway_turn(ws, sid) for ws, sid in sockets))  # warm-up, uncounted
                    cpu_before = meters[name]()
                    for _ in range(turns):
                        started = time.perf_counter()
                        results = await asyncio.gather(*(gateway_turn(ws, sid) for ws, sid in sockets))
                        samples[name]["wall"] += time.perf_counter() - started
                        samples[name]["ttft"].extend(ttft for ttft, _ in results)
                        samples[name]["turns"] += len(results)
                    for role, seconds in spent(cpu_before, meters[name]()).items():
                        samples[name]["cpu"][role] = samples[name]["cpu"].get(role, 0.0) + seconds
    return samples


async def measure(args, processes: Processes, database_url: str, data_dir: Path, mock, workers: int,
                  label: str, auto: bool = False) -> list[Row]:
    """The gateway of `workers` (started with no `--workers` when `auto`) beside the bare relay in
    as many processes, at each of `--concurrency`."""
    mock_url = f"http://127.0.0.1:{args.mock_port}"
    gateway_port, bare_port = free_port(), free_port()
    bare = [processes.start("bare-relay", "--port", str(bare_port), "--ai-core-url", mock_url,
                            *(["--reuse-port"] if workers > 1 else []), log_name=f"bare-relay-{label}-{index}")
            for index in range(workers)]
    for process in bare:
        wait_until_up(f"http://127.0.0.1:{bare_port}/bench-health", process, 30)
    gateway = start_gateway_workers(processes, None if auto else workers, gateway_port, database_url, mock_url,
                                    data_dir / f"workers-{label.split()[0]}")
    wait_until_up(f"http://127.0.0.1:{gateway_port}/api/v1/health", gateway, 120)
    await asyncio.sleep(2.0)  # every worker up, not only the first to answer
    database = postgres_pid(database_url)
    urls = {"bare relay": f"http://127.0.0.1:{bare_port}/ws",
            "gateway": f"http://127.0.0.1:{gateway_port}/ws/chat?token={{token}}&session_id={{session}}"}
    meters = {"bare relay": relay_meter([process.pid for process in bare], mock.pid, database),
              "gateway": gateway_meter(gateway.pid, workers, mock.pid, database)}
    rows = []
    try:
        for concurrency in args.concurrency:
            samples = await scaling(urls, meters, concurrency, args.rounds, args.turns_per_round)
            for name, series in samples.items():
                roles = {role: seconds / series["turns"] * 1000 for role, seconds in series["cpu"].items()}
                rows.append(Row(label, concurrency, name, percentile(series["ttft"], 50) * 1000,
                                percentile(series["ttft"], 99) * 1000, series["turns"] / series["wall"],
                                sum(ms for role, ms in roles.items() if role in OWN_ROLES), roles))
    except Exception:
        print(f"the gateway's log ({label} workers) ends:\n" + gateway.log_path.read_text()[-4000:])
        raise
    finally:
        processes.stop(gateway)
        for process in bare:
            processes.stop(process)
    return rows


async def run_workers(args, processes: Processes, database_url: str, data_dir: Path) -> None:
    args.mock_port = free_port()
    mock = processes.start("mock", "--port", str(args.mock_port))
    wait_until_up(f"http://127.0.0.1:{args.mock_port}/health", mock, 30)
    auto = auto_workers_here()
    print(f"\nworkers: {DELTAS} deltas {DELTA_GAP * 1000:g} ms apart; rounds={args.rounds}, "
          f"{args.turns_per_round} batches per round, the gateway on the embedded bus (no REDIS_URL); "
          f'"auto" resolves to {auto} here')
    rows: list[Row] = []
    try:
        for workers in args.workers:
            rows += await measure(args, processes, database_url, data_dir, mock, workers, str(workers))
        if auto in args.workers:
            print(f'  "auto (= {auto})": the rows of the {auto}-worker run (`gateway serve` with no --workers '
                  f"runs exactly that here), not run twice")
            rows += [replace(row, label=f"auto (= {auto})") for row in rows if row.label == str(auto)]
        else:
            rows += await measure(args, processes, database_url, data_dir, mock, auto, f"auto (= {auto})", auto=True)
    finally:
        processes.stop(mock)
    report(rows, base=str(min(args.workers)))


def report(rows: list[Row], base: str) -> None:
    print(f"  {'workers':>10} {'conc.':>6} {'target':12} {'TTFT p50 ms':>12} {'TTFT p99 ms':>12} {'turns/s':>8} "
          f"{'CPU/turn ms':>12}")
    for row in rows:
        print(f"  {row.label:>10} {row.concurrency:6d} {row.target:12} {row.p50:12.1f} {row.p99:12.1f} "
              f"{row.rate:8.1f} {row.cpu:12.2f}")
    print("  CPU per turn on the whole machine, ms (the target's own tree, then the rest):")
    for row in rows:
        own = sum(ms for role, ms in row.roles.items() if role in OWN_ROLES)
        total = sum(row.roles.values())
        servers = total - row.roles.get("load generator", 0.0)  # what a deployment's machine runs
        parts = ", ".join(f"{role} {ms:.2f}" for role, ms in row.roles.items())
        print(f"  {row.label:>10} {row.concurrency:6d} {row.target:12} {parts}; total {total:.2f}, "
              f"own share {own / total:.0%} ({own / servers:.0%} of the servers')")
    for row in rows:
        one = next(other for other in rows if (other.label, other.concurrency, other.target)
                   == (base, row.concurrency, row.target))
        if row.label != base:
            print(f"  {row.target}, concurrency {row.concurrency}: {row.label} workers vs {base}: turns/s "
                  f"x{row.rate / one.rate:.2f}, TTFT p50 x{row.p50 / one.p50:.2f}, CPU per turn x{row.cpu / one.cpu:.2f}")
