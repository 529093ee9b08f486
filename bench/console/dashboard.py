"""What one dashboard poll costs (the page polls every 5 s), and one performance sampling round.

The console runs in front of the real memory service, AI core and gateway (built by the
production factory, on loopback ports, one scratch PostgreSQL database). Interleaved rounds, in
a new random order each round, time:

- `GET /api/health`: the floor (routing, middlewares, JSON);
- `GET /api/dashboard`, shared: within the 2 s in which one asking of the sources serves everyone;
- `GET /api/dashboard`, fresh: the sources asked (gateway admin API twice, the memory service,
  five port checks, the embedded server's pid file), by waiting out the shared answer first.

Then one sampling round (`ProcessSampler.round`, run in the executor by the console) over
`--services` real processes, each with one worker child, as psutil reads them.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python -m bench.console.dashboard

Without DATABASE_URL an embedded PostgreSQL is started in a temporary directory."""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bench.support import drop_database, free_port, scratch_database
from console.app import create_console_app
from console.dashboard import SOURCE_TTL
from console.performance import ProcessSampler
from gateway.app import create_app
from gateway.config import Config
from gateway.services import ServiceSpec
from plugins.admin import plugin as admin_plugin
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import auth_plugin, tokens_plugin
from plugins.memory import plugin as memory_plugin
from plugins.memory import proxy_plugin as memory_proxy_plugin
from plugins.sessions import plugin as sessions_plugin


def milliseconds(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[max(int(len(ordered) * 0.95 + 0.5) - 1, 0)]
    return f"{statistics.median(ordered) * 1000:.2f} / {p95 * 1000:.2f}"


async def serve(app: web.Application, port: int) -> web.AppRunner:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def timed(client: TestClient, path: str) -> float:
    started = time.perf_counter()
    response = await client.get(path)
    await response.read()
    assert response.status == 200, (path, response.status)
    return time.perf_counter() - started


async def run(database_url: str, data_dir: Path, rounds: int, batch: int, fresh: int, services: int) -> None:
    ports = {"memory-service": free_port(), "ai-core": free_port(), "gateway": free_port()}
    base = {"core.data_dir": str(data_dir), "database.url": database_url, "auth.admin_password": "bench-admin",
            "auth.jwt_secret": "bench-" + "x" * 40, "auth.service_token": "bench-service-token",
            "peers.memory_service_url": f"http://127.0.0.1:{ports['memory-service']}",
            "peers.ai_core_url": f"http://127.0.0.1:{ports['ai-core']}", "plugins.ai_core": {"timezone": "UTC"}}
    config = Config.load(overrides=base, environ={})
    runners = [
        await serve(create_app("memory-service", config, plugins=[tokens_plugin, memory_plugin]), ports["memory-service"]),
        await serve(create_app("ai-core", config, plugins=[tokens_plugin, ai_core_plugin]), ports["ai-core"]),
        await serve(create_app("gateway", config, plugins=[tokens_plugin, auth_plugin, ai_core_client_plugin,
                                                           sessions_plugin, admin_plugin, memory_proxy_plugin]),
                    ports["gateway"]),
    ]
    specs = [ServiceSpec(id=service_id, name=service_id, port=port) for service_id, port in ports.items()]
    console = TestClient(TestServer(create_console_app(config, specs=specs)))
    await console.start_server()
    try:
        body = await (await console.get("/api/dashboard")).json()
        assert body["sessions"]["available"] and body["memory"]["available"], body
        times: dict[str, list[float]] = {"health": [], "shared": []}
        for _ in range(rounds):
            order = ["health", "shared"]
            random.shuffle(order)
            for name in order:
                path = "/api/health" if name == "health" else "/api/dashboard"
                samples = [await timed(console, path) for _ in range(batch)]
                times[name].append(statistics.median(samples))
        fresh_times = []
        for _ in range(fresh):
            await asyncio.sleep(SOURCE_TTL + 0.05)
            fresh_times.append(await timed(console, "/api/dashboard"))
    finally:
        await console.close()
        for runner in reversed(runners):
            await runner.cleanup()

    sleepers = [subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "time.sleep(600)\n")]) for _ in range(services)]
    try:
        await asyncio.sleep(1.0)
        sampler = ProcessSampler(data_dir)
        pids = {f"service-{n}": process.pid for n, process in enumerate(sleepers)}
        sampler.round(pids)  # the first round starts each CPU clock
        round_times = []
        for _ in range(10):
            started = time.perf_counter()
            sampler.round(pids)
            round_times.append(time.perf_counter() - started)
    finally:
        for process in sleepers:
            for child in psutil.Process(process.pid).children(recursive=True):
                child.kill()
            process.kill()
            process.wait()

    print(f"console dashboard, {rounds} rounds x {batch} requests (medians of batch medians); ms median / p95")
    print("| request | ms (median / p95) | ratio to health |")
    print("|---|---|---|")
    health = statistics.median(times["health"])
    print(f"| GET /api/health | {milliseconds(times['health'])} | 1.0 |")
    print(f"| GET /api/dashboard, shared answer | {milliseconds(times['shared'])} | "
          f"{statistics.median(times['shared']) / health:.1f} |")
    print(f"| GET /api/dashboard, sources asked ({fresh} polls) | {milliseconds(fresh_times)} | "
          f"{statistics.median(fresh_times) / health:.1f} |")
    print(f"| one sampling round, {services} services x 2 processes (executor) | {milliseconds(round_times)} | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=30)
    parser.add_argument("--fresh", type=int, default=8)
    parser.add_argument("--services", type=int, default=8)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-console-") as scratch:
        data_dir = Path(scratch)
        admin_url = os.environ.get("DATABASE_URL")
        handle = None
        if not admin_url:
            from gateway.embedded_database import start_embedded
            admin_url, handle = start_embedded(data_dir / "pg")
        database_url = scratch_database(admin_url, "bench_console")
        try:
            asyncio.run(run(database_url, data_dir / "data", arguments.rounds, arguments.batch, arguments.fresh,
                            arguments.services))
        finally:
            drop_database(database_url, admin_url)
            if handle is not None:
                handle.cleanup()


if __name__ == "__main__":
    main()
