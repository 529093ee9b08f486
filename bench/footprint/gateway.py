"""The gateway of several workers alone (issues 43 and 44): the PSS of its parent and workers at
rest, after a knowledge search through each worker, and after the models' idle release; and the
knowledge search's latency after first use, through each worker.

The gateway of conf/services.toml (every plugin) runs as `gateway serve --service gateway
--workers N` on a free port, on the embedded PostgreSQL in a temporary DATA_DIR (its processes are
not counted: the database is the same either way). `--checkout DIR` runs the gateway of another
copy of the code (e.g. `git archive COMMIT | tar -x -C DIR`), to compare before and after.

    .venv/bin/python -m bench.footprint.gateway [--workers 2] [--searches 20] [--idle-seconds 20]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import psutil

from bench.footprint.__main__ import DOCUMENT, MIB
from bench.support import free_port
from gateway.config import PROJECT_ROOT

QUERIES = ["where is the shed key?", "how often is the boiler serviced", "what pressure should the boiler have",
           "who services the heating", "which valve tops up the pressure"]


def gateway_processes(parent: psutil.Process) -> dict[str, psutil.Process]:
    found = {"parent": parent}
    for child in parent.children():
        command = child.cmdline()
        if "--worker-index" in command:
            found[f"worker {command[command.index('--worker-index') + 1]}"] = child
    return found


def measure(parent: psutil.Process) -> dict[str, float]:
    sizes = {name: process.memory_full_info().pss / MIB for name, process in gateway_processes(parent).items()}
    sizes["total"] = sum(sizes.values())
    return sizes


async def client_on(base: str, worker: int) -> aiohttp.ClientSession:
    """A client whose one kept-alive connection worker `worker` serves."""
    misplaced = []
    try:
        for _ in range(60):
            http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1))
            async with http.get(base + "/health") as answer:
                if (await answer.json()).get("worker") == worker:
                    return http
            misplaced.append(http)
        raise SystemExit(f"no connection landed on worker {worker}")
    finally:
        for http in misplaced:
            await http.close()


async def post(http: aiohttp.ClientSession, url: str, token: str, body: dict) -> dict:
    async with http.post(url, json=body, headers={"Authorization": f"Bearer {token}"}) as answer:
        result: dict = await answer.json()
        assert answer.status in (200, 201), (answer.status, result)
        return result


async def use(base: str, password: str, workers: int, searches: int) -> dict[str, list[float]]:
    """A document added, then searched through every worker (first use), then `searches` more
    searches per worker: their latencies in ms, per worker."""
    clients = [await client_on(base, index) for index in range(workers)]
    try:
        async with clients[0].post(base + "/auth/login", json={"username": "admin", "password": password}) as answer:
            token = (await answer.json())["token"]
        knowledge = await post(clients[0], base + "/knowledge/bases", token, {"name": "footprint"})
        await post(clients[0], f"{base}/knowledge/bases/{knowledge['id']}/documents", token,
                   {"title": "The house", "content": DOCUMENT})
        latencies: dict[str, list[float]] = {}
        for index, http in enumerate(clients):
            started = time.perf_counter()
            found = await post(http, base + "/knowledge/search", token, {"query": "where is the shed key?"})
            assert found["chunks"], found
            latencies[f"worker {index} first"] = [(time.perf_counter() - started) * 1000]
        for index, http in enumerate(clients):
            latencies[f"worker {index}"] = []
            for number in range(searches):
                started = time.perf_counter()
                await post(http, base + "/knowledge/search", token, {"query": QUERIES[number % len(QUERIES)]})
                latencies[f"worker {index}"].append((time.perf_counter() - started) * 1000)
        return latencies
    finally:
        for http in clients:
            await http.close()


async def until_answering(base: str, process: subprocess.Popen, workers: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    seen: set[int] = set()
    async with aiohttp.ClientSession() as http:
        while len(seen) < workers:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the gateway did not start")
            try:
                async with http.get(base + "/health", headers={"Connection": "close"}) as answer:
                    seen.add((await answer.json())["worker"])
            except (aiohttp.ClientError, KeyError, ValueError):
                await asyncio.sleep(0.5)


def run(checkout: Path, workers: int, searches: int, rest: float, idle_seconds: float) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="bench-footprint-gateway-"))
    conf = scratch / "conf"
    conf.mkdir()
    shutil.copy(checkout / "conf" / "default.toml", conf / "default.toml")
    port = free_port()
    table = (checkout / "conf" / "services.toml").read_text()
    conf.joinpath("services.toml").write_text(re.sub(r'(id = "gateway"\n(?:.*\n)*?port = )\d+', rf"\g<1>{port}", table))
    extra = scratch / "bench.toml"
    extra.write_text(f"[core]\nmodel_idle_seconds = {idle_seconds}\n")
    password = "footprint-" + uuid.uuid4().hex[:12]
    environment = {key: value for key, value in os.environ.items()
                   if not key.endswith("_URL") and key not in ("DATABASE_URL", "REDIS_URL", "QDRANT_URL")}
    environment.update(GATEWAY_CONF_DIR=str(conf), GATEWAY_CONFIG=str(extra), DATA_DIR=str(scratch / "data"),
                       ADMIN_PASSWORD=password, PYTHONPATH=str(checkout))
    base = f"http://127.0.0.1:{port}/api/v1"
    with (scratch / "gateway.log").open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--service", "gateway",
                                    "--workers", str(workers)], cwd=checkout, env=environment,
                                   stdout=log, stderr=subprocess.STDOUT)
    try:
        asyncio.run(until_answering(base, process, workers))
        time.sleep(rest)
        parent = psutil.Process(process.pid)
        moments = {"at rest": measure(parent)}
        latencies = asyncio.run(use(base, password, workers, searches))
        time.sleep(2)
        moments["after a search through each worker"] = measure(parent)
        time.sleep(idle_seconds * 1.5 + 10)
        moments["after the idle release"] = measure(parent)
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"gateway, {workers} workers, checkout {checkout}, load {os.getloadavg()[0]:.1f}, "
          f"{psutil.cpu_count()} CPUs, idle release {idle_seconds:g}s")
    print("| process | " + " | ".join(moments) + " |\n" + "|---" * (len(moments) + 1) + "|")
    for name in moments["at rest"]:
        print(f"| {name} | " + " | ".join(f"{sizes.get(name, 0):.1f}" for sizes in moments.values()) + " |")
    for name, values in latencies.items():
        if len(values) == 1:
            print(f"search {name}: {values[0]:.0f} ms")
        else:
            print(f"search {name} after first use: median {statistics.median(values):.0f} ms, "
                  f"p90 {sorted(values)[int(len(values) * 0.9) - 1]:.0f} ms (n={len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, default=PROJECT_ROOT, help="The code to run (default: this one).")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--searches", type=int, default=20, help="Searches per worker after the first.")
    parser.add_argument("--rest", type=float, default=10.0, help="Seconds of rest after the start.")
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="The models' idle release time.")
    arguments = parser.parse_args()
    run(arguments.checkout.resolve(), arguments.workers, arguments.searches, arguments.rest, arguments.idle_seconds)


if __name__ == "__main__":
    main()
