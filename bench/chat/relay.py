"""The relay's added latency (the chat benchmarks' first part): the mock's SSE read straight,
through the bare relay and through the gateway, interleaved; what the gateway adds, and its CPU
per turn beside the bare relay's."""
from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path

import aiohttp

from bench.chat.processes import Processes, access_token, relays
from bench.chat.servers import DELTA_GAP, DELTAS
from bench.chat.turns import cpu_seconds, direct_turn, gateway_turn
from bench.support import percentile

TARGETS = ("direct", "bare relay", "gateway")


class RelayRun:
    """One concurrency's run over one client session: the sockets open to the relays, and the
    samples of every target (first tokens, gaps, and the relays' CPU over their counted turns)."""

    def __init__(self, http: aiohttp.ClientSession, gateway_port: int, bare_port: int, mock_port: int,
                 concurrency: int, relay_pids: dict[str, int]):
        self.http, self.concurrency, self.relay_pids = http, concurrency, relay_pids
        self.gateway_port, self.bare_port = gateway_port, bare_port
        self.mock_url = f"http://127.0.0.1:{mock_port}/api/v1/chat/stream"
        self.samples: dict[str, dict] = {name: {"ttft": [], "gap": [], "cpu": 0.0, "turns": 0} for name in TARGETS}
        self.sockets: list[tuple[aiohttp.ClientWebSocketResponse, str]] = []
        self.run_id = uuid.uuid4().hex[:6]

    def url(self, name: str, index: int) -> str:
        """The WebSocket of relay `name` for session `index` (one user each)."""
        if name != "gateway":
            return f"http://127.0.0.1:{self.bare_port}/ws"
        return (f"http://127.0.0.1:{self.gateway_port}/ws/chat?token={access_token(f'user_bench_{self.run_id}_{index}')}"
                f"&session_id=bench_{self.run_id}_{index}")

    async def connect(self, name: str) -> None:
        """Open one socket per session (one user each: a device gets only its own turn). A
        socket is opened afresh for each gateway phase: nothing reads it during the direct
        phase, so it would miss the server's heartbeat pings and be closed."""
        await self.close()
        for index in range(self.concurrency):
            ws = await self.http.ws_connect(self.url(name, index), max_msg_size=0)
            self.sockets.append((ws, f"bench_{self.run_id}_{index}"))

    async def close(self) -> None:
        await asyncio.gather(*(ws.close() for ws, _ in self.sockets), return_exceptions=True)
        self.sockets.clear()

    def record(self, name: str, ttft: float, gaps: list[float]) -> None:
        self.samples[name]["ttft"].append(ttft)
        self.samples[name]["gap"].extend(gaps)

    def cpu(self, name: str) -> float:
        pid = self.relay_pids.get(name)
        return cpu_seconds(pid) if pid else 0.0

    def count_cpu(self, name: str, before: float, turns: int) -> None:
        if self.relay_pids.get(name):
            self.samples[name]["cpu"] += self.cpu(name) - before
            self.samples[name]["turns"] += turns

    async def one_turn(self, name: str, by_name: dict) -> tuple[float, list[float]]:
        if name == "direct":
            return await direct_turn(self.http, self.mock_url)
        return await gateway_turn(by_name[name], f"bench_{self.run_id}_0")

    async def alternating(self, count: int) -> None:
        """`count` turns a target one at a time, the targets taking turns (a new random order
        for each three): a single turn's CPU is a few milliseconds, and this machine's speed
        drifts by more than the gateway's difference within the minute a phase of turns
        would last. Both relays' sockets stay open throughout (a turn of another target
        lasts a second or two, the heartbeat 30 s)."""
        for name in ("gateway", "bare relay"):
            self.sockets.append((await self.http.ws_connect(self.url(name, 0), max_msg_size=0), name))
        by_name = {name: ws for ws, name in self.sockets}
        for name in TARGETS:  # one uncounted turn each, as the batches below have
            await self.one_turn(name, by_name)
        for _ in range(count):
            for name in random.sample(TARGETS, len(TARGETS)):
                cpu_before = self.cpu(name)
                ttft, gaps = await self.one_turn(name, by_name)
                self.count_cpu(name, cpu_before, 1)
                self.record(name, ttft, gaps)

    async def batch(self, name: str) -> list[tuple[float, list[float]]]:
        if name == "direct":
            return await asyncio.gather(*(direct_turn(self.http, self.mock_url) for _ in range(self.concurrency)))
        return await asyncio.gather(*(gateway_turn(ws, sid) for ws, sid in self.sockets))

    async def batches(self, rounds: int, turns: int) -> None:
        """`turns` batches of simultaneous turns per target and round, the targets in a new
        random order each round."""
        for _ in range(rounds):
            order = list(TARGETS)
            random.shuffle(order)
            for name in order:
                if name != "direct":
                    await self.connect(name)
                # One uncounted batch first, for both targets alike: while the other target's
                # batch ran, this one's processes sat idle, and on this VM a process's first
                # work after seconds of idleness runs several times slower (see README).
                await self.batch(name)
                cpu_before = self.cpu(name)
                for _ in range(turns):
                    for ttft, gaps in await self.batch(name):
                        self.record(name, ttft, gaps)
                self.count_cpu(name, cpu_before, turns * self.concurrency)


async def relay(gateway_port: int, bare_port: int, mock_port: int, concurrency: int, rounds: int,
                turns: int, relay_pids: dict[str, int]) -> dict:
    """Samples of every target at one concurrency: `turns` batches of `concurrency` simultaneous
    turns per round, targets interleaved in a new random order each round (at concurrency 1
    turn by turn, see `RelayRun.alternating`). `relay_pids`: the relays' processes, whose CPU
    time over their counted turns is recorded too."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=300)) as http:
        run = RelayRun(http, gateway_port, bare_port, mock_port, concurrency, relay_pids)
        try:
            if concurrency == 1:
                await run.alternating(rounds * turns)
            else:
                await run.batches(rounds, turns)
        finally:
            await run.close()
    return run.samples


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
