"""Performance sampling: the statistics, the bound on each history, a service's workers counted
with it (real processes read by psutil), and the routes over a service the console really runs."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import psutil
import pytest

from console.app import create_console_app
from console.performance import PerformanceMonitor, PerformanceSettings, percentile, summarize


def samples_of(values: list[float]) -> list[dict]:
    return [{"time": 1000.0 + index, "pid": 1, "processes": 1, "cpuPercent": value, "rssBytes": int(value * 1000),
             "threads": 3, "openFiles": index % 2, "connections": 0} for index, value in enumerate(values)]


def test_the_summary_is_min_mean_max_and_nearest_rank_p95():
    summary = summarize(samples_of([float(n) for n in range(20, 0, -1)]))  # 20 .. 1, unordered in time
    assert summary["count"] == 20 and summary["from"] == 1000.0 and summary["to"] == 1019.0
    assert summary["cpuPercent"] == {"min": 1.0, "mean": 10.5, "max": 20.0, "p95": 19.0}
    assert summary["rssBytes"] == {"min": 1000, "mean": 10500.0, "max": 20000, "p95": 19000}
    assert summary["threads"] == {"min": 3, "mean": 3.0, "max": 3, "p95": 3}
    assert summary["openFiles"] == {"min": 0, "mean": 0.5, "max": 1, "p95": 1}
    assert percentile([float(n) for n in range(1, 101)], 0.95) == 95.0
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([1.0, 2.0], 0.95) == 2.0
    empty = summarize([])
    assert empty["count"] == 0 and empty["from"] is None and empty["cpuPercent"] is None


@pytest.fixture
def service_with_a_worker():
    """A real process that started a worker process, as `gateway serve --workers 2` does."""
    worker = ("import socket, time\n"
              "listener = socket.create_server(('127.0.0.1', 0))\n"  # one open inet socket
              "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "held = open(sys.executable, 'rb')\n"  # one open regular file
        f"worker = subprocess.Popen([sys.executable, '-c', {worker!r}])\n"
        "time.sleep(120)\n")])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
            child.net_connections(kind="inet") for child in psutil.Process(parent.pid).children()):
        time.sleep(0.05)
    yield parent
    for child in psutil.Process(parent.pid).children(recursive=True):
        child.kill()
    parent.kill()
    parent.wait()


async def test_each_history_keeps_its_bound_and_counts_the_workers(tmp_path, service_with_a_worker):
    pids = {"alpha": service_with_a_worker.pid}
    monitor = PerformanceMonitor(["alpha", "beta"], lambda: dict(pids), tmp_path,
                                 PerformanceSettings(interval=60, history=3))
    for _ in range(5):
        await monitor.sample_now()
    history = monitor.history("alpha")
    assert len(history) == 3  # the two oldest of five were dropped
    assert [sample["time"] for sample in history] == sorted(sample["time"] for sample in history)
    assert history[-1] is monitor.current("alpha")
    latest = history[-1]
    assert latest["pid"] == service_with_a_worker.pid and latest["processes"] == 2
    assert latest["rssBytes"] > 1_000_000 and latest["threads"] >= 2
    assert latest["openFiles"] >= 1 and latest["connections"] == 1
    assert monitor.history("beta") == [] and monitor.current("beta") is None  # not running: no samples
    assert monitor.totals()["processes"] == 2
    assert monitor.system is not None and monitor.system["memory"]["totalBytes"] > 0

    # The service stops: no current sample, its history stays.
    del pids["alpha"]
    await monitor.sample_now()
    assert monitor.current("alpha") is None and len(monitor.history("alpha")) == 3


async def test_the_routes_over_a_service_the_console_runs(aiohttp_client, service_table, make_config):
    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    app = create_console_app(make_config({"console.performance_interval": 0.2, "console.performance_history": 4,
                                          "console.stop_timeout": 5}), specs=specs)
    client = await aiohttp_client(app)
    started = await (await client.post("/api/services/alpha/start")).json()

    async def snapshot_with_a_sample() -> dict:
        while True:
            body = await (await client.get("/api/performance")).json()
            if body["services"][0]["sample"] is not None and len(
                    (await (await client.get("/api/performance/alpha")).json())["samples"]) >= 4:
                return body
            await asyncio.sleep(0.1)

    snapshot = await asyncio.wait_for(snapshot_with_a_sample(), 20)
    assert snapshot["interval"] == 0.2 and snapshot["historySize"] == 4
    row = snapshot["services"][0]
    assert row["id"] == "alpha" and row["status"] == "running" and row["sample"]["pid"] == started["pid"]
    assert snapshot["totals"]["rssBytes"] == row["sample"]["rssBytes"]

    history = await (await client.get("/api/performance/alpha")).json()
    assert history["id"] == "alpha" and len(history["samples"]) == 4  # bounded by performance_history
    everything = await (await client.get("/api/performance/history")).json()
    assert [service["id"] for service in everything["services"]] == ["alpha"]

    summary = await (await client.get("/api/performance/alpha/summary", params={"window": "60"})).json()
    assert summary["window"] == 60 and summary["count"] == 4
    assert set(summary["rssBytes"]) == {"min", "mean", "max", "p95"}
    assert summary["rssBytes"]["min"] <= summary["rssBytes"]["mean"] <= summary["rssBytes"]["max"]

    panel = await (await client.get("/api/performance/dashboard")).json()
    assert panel["window"] == 300 and panel["system"]["cpuCount"] >= 1
    assert panel["services"][0]["cpuPercent"]["max"] >= 0

    for path in ("/api/performance/nope", "/api/performance/nope/summary"):
        missing = await client.get(path)
        assert missing.status == 404 and (await missing.json())["errorType"] == "unknown_service"
    bad = await client.get("/api/performance/alpha/summary", params={"window": "0"})
    assert bad.status == 400 and (await bad.json())["errorType"] == "validation_error"

    await client.post("/api/services/alpha/stop")
    await asyncio.sleep(0.5)
    assert (await (await client.get("/api/performance")).json())["services"][0]["sample"] is None
