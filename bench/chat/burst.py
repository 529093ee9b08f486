"""Burst starts and two revisions side by side: CPU per turn of batches of simultaneous turns of
one delta and of 64, and when their requests reached the mock; a diagnosis, not the full run."""
from __future__ import annotations

import asyncio
import random
import time
import uuid
from pathlib import Path

import aiohttp

from bench.chat.processes import GATEWAY_WS_URL, Processes, relays, start_gateway_app
from bench.chat.servers import DELTAS
from bench.chat.turns import gateway_turn, open_sessions
from bench.support import checkout, free_port, percentile

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
