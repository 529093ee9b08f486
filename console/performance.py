"""Per-service performance: every `interval` seconds the console samples each running service's
process tree (psutil: CPU %, resident memory, threads, open files, connections) and the machine
(CPU, memory, the disk of DATA_DIR) into a bounded history, newest last.

A service's tree is its process and every descendant (workers), except a PostgreSQL server: the
embedded database is shared by every service and would be counted against whichever started it.
psutil reads /proc for each process, so a whole round runs in an executor; the routes only read
what the last rounds left."""
from __future__ import annotations

import asyncio
import collections
import logging
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import psutil

from gateway.config import Config
from gateway.jobs import JobGroup

# The sampling loop among the console's jobs.
SAMPLING_JOB = "performance_sampling"
log = logging.getLogger("console.performance")

DEFAULT_INTERVAL = 5.0
DEFAULT_HISTORY = 720  # samples per service: an hour at the default interval
METRICS = ("cpuPercent", "rssBytes", "threads", "openFiles", "connections")
SHARED_PROCESS_NAMES = ("postgres", "pg_ctl")


@dataclass(frozen=True)
class PerformanceSettings:
    interval: float = DEFAULT_INTERVAL
    history: int = DEFAULT_HISTORY

    @classmethod
    def from_config(cls, config: Config) -> "PerformanceSettings":
        console = config.settings.console
        return cls(interval=max(console.performance_interval, 0.1),
                   history=max(console.performance_history, 1))


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile: the smallest value with at least `fraction` of the values at or
    below it (so always one of the values)."""
    ordered = sorted(values)
    rank = max(math.ceil(fraction * len(ordered)), 1)
    return ordered[rank - 1]


def statistics(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "mean": round(sum(values) / len(values), 3), "max": max(values),
            "p95": percentile(values, 0.95)}


def summarize(samples: Iterable[dict]) -> dict[str, Any]:
    """min, mean, max and p95 of each metric over `samples`."""
    chosen = list(samples)
    summary: dict[str, Any] = {"count": len(chosen), "from": chosen[0]["time"] if chosen else None,
                               "to": chosen[-1]["time"] if chosen else None}
    for metric in METRICS:
        summary[metric] = statistics([sample[metric] for sample in chosen])
    return summary


class ProcessSampler:
    """Keeps one psutil.Process per pid between rounds: CPU % is measured since the previous
    call on the same object. A round lists the machine's processes once (who is whose child)
    and reads the socket tables once, whatever the number of services. Blocking; used from one
    executor call at a time."""

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self._processes: dict[int, psutil.Process] = {}

    def _process(self, pid: int) -> psutil.Process:
        process = self._processes.get(pid)
        if process is None or not process.is_running():
            process = self._processes[pid] = psutil.Process(pid)
            process.cpu_percent(None)  # the first reading is 0 by definition: start the clock
        return process

    @staticmethod
    def children_map() -> dict[int, list[tuple[int, str]]]:
        """Parent pid -> its children's (pid, name), from one listing of the processes."""
        children: dict[int, list[tuple[int, str]]] = collections.defaultdict(list)
        for process in psutil.process_iter(["ppid", "name"]):
            if process.info["ppid"]:
                children[process.info["ppid"]].append((process.pid, process.info["name"] or ""))
        return children

    @staticmethod
    def tree(pid: int, children: Mapping[int, list[tuple[int, str]]]) -> list[int]:
        """`pid` and its descendants, without a shared PostgreSQL server (nor what it started)."""
        members, pending = [pid], [pid]
        while pending:
            for child, name in children.get(pending.pop(), ()):
                if not name.startswith(SHARED_PROCESS_NAMES):
                    members.append(child)
                    pending.append(child)
        return members

    def sample(self, pids: list[int], now: float, sockets: "SocketCounter") -> dict[str, Any] | None:
        """One service's sample: `pids` is its tree, the main process first."""
        totals = {"cpuPercent": 0.0, "rssBytes": 0, "threads": 0, "openFiles": 0, "connections": 0}
        counted = 0
        for pid in pids:
            try:
                process = self._process(pid)
                with process.oneshot():
                    cpu = process.cpu_percent(None)
                    rss = process.memory_info().rss
                    threads = process.num_threads()
                    open_files = len(process.open_files())
                connections = sockets.count(process)
            except psutil.Error:
                continue  # exited between the listing and the reading
            totals["cpuPercent"] += cpu
            totals["rssBytes"] += rss
            totals["threads"] += threads
            totals["openFiles"] += open_files
            totals["connections"] += connections
            counted += 1
        if not counted:
            return None
        totals["cpuPercent"] = round(totals["cpuPercent"], 1)
        return {"time": round(now, 3), "pid": pids[0], "processes": counted, **totals}

    def system(self, now: float) -> dict[str, Any]:
        memory = psutil.virtual_memory()
        try:
            disk = psutil.disk_usage(str(self.data_dir if self.data_dir.exists() else self.data_dir.anchor))
            disk_body: dict[str, Any] | None = {
                "path": str(self.data_dir), "totalBytes": disk.total, "usedBytes": disk.used,
                "freeBytes": disk.free, "percent": disk.percent}
        except OSError:
            disk_body = None
        return {"time": round(now, 3), "cpuPercent": psutil.cpu_percent(None), "cpuCount": os.cpu_count() or 1,
                "loadAverage": [round(value, 2) for value in os.getloadavg()],
                "memory": {"totalBytes": memory.total, "usedBytes": memory.total - memory.available,
                           "availableBytes": memory.available, "percent": memory.percent},
                "disk": disk_body}

    def round(self, pids: dict[str, int]) -> tuple[dict[str, dict], dict]:
        now = time.time()
        samples = {}
        sampled: set[int] = set()
        if pids:
            children = self.children_map()
            sockets = SocketCounter()
            for service_id, pid in pids.items():
                members = self.tree(pid, children)
                sampled.update(members)
                sample = self.sample(members, now, sockets)
                if sample is not None:
                    samples[service_id] = sample
        for pid in list(self._processes):  # processes no longer in any tree
            if pid not in sampled:
                del self._processes[pid]
        return samples, self.system(now)


class SocketCounter:
    """Open TCP/UDP sockets of a process. On Linux the kernel's socket tables are read once per
    round and each process's descriptors are matched against them; elsewhere psutil asks per
    process."""

    TABLES = ("tcp", "tcp6", "udp", "udp6")

    def __init__(self) -> None:
        self.inodes: set[str] | None = self._inet_inodes() if sys.platform.startswith("linux") else None

    def _inet_inodes(self) -> set[str] | None:
        inodes: set[str] = set()
        for table in self.TABLES:
            try:
                with open(f"/proc/net/{table}") as handle:
                    next(handle, None)  # the header
                    inodes.update(fields[9] for fields in map(str.split, handle) if len(fields) > 9)
            except OSError:
                return None
        return inodes

    def count(self, process: psutil.Process) -> int:
        if self.inodes is None:
            return len(process.net_connections(kind="inet"))
        directory = f"/proc/{process.pid}/fd"
        try:
            descriptors = os.listdir(directory)
        except FileNotFoundError:
            raise psutil.NoSuchProcess(process.pid) from None
        except PermissionError:
            raise psutil.AccessDenied(process.pid) from None
        count = 0
        for descriptor in descriptors:
            try:
                target = os.readlink(f"{directory}/{descriptor}")
            except OSError:
                continue  # closed meanwhile
            if target.startswith("socket:[") and target[8:-1] in self.inodes:
                count += 1
        return count


class PerformanceMonitor:
    """The sampling task and the histories. `pids()` names each running service's main process."""

    def __init__(self, service_ids: list[str], pids: Callable[[], dict[str, int]], data_dir: Path,
                 settings: PerformanceSettings | None = None):
        self.settings = settings or PerformanceSettings()
        self.service_ids = list(service_ids)
        self._pids = pids
        self._sampler = ProcessSampler(data_dir)
        self._histories: dict[str, collections.deque[dict]] = {
            service_id: collections.deque(maxlen=self.settings.history) for service_id in self.service_ids}
        self._current: dict[str, dict] = {}  # the last round's sample of each service it found running
        self.system: dict | None = None
        self.sampled_at: float | None = None
        self._lock = asyncio.Lock()

    async def sample_now(self) -> None:
        """One round: each running service's tree and the machine."""
        async with self._lock:
            pids = self._pids()
            samples, system = await asyncio.get_running_loop().run_in_executor(None, self._sampler.round, pids)
            for service_id, sample in samples.items():
                self._histories[service_id].append(sample)
            self._current = samples
            self.system = system
            self.sampled_at = system["time"]

    async def _run(self) -> None:
        while True:
            try:
                await self.sample_now()
            except Exception:  # one bad round must not end the sampling
                log.exception("a performance sampling round failed")
            await asyncio.sleep(self.settings.interval)

    def start(self, jobs: JobGroup) -> None:
        """The sampling loop, one of the console's jobs (`SAMPLING_JOB`)."""
        jobs.start(SAMPLING_JOB, self._run())

    # ---------------------------------------------------------------- reading

    def current(self, service_id: str) -> dict | None:
        return self._current.get(service_id)

    def history(self, service_id: str, window: float | None = None) -> list[dict]:
        samples = list(self._histories[service_id])
        if window is not None:
            since = time.time() - window
            samples = [sample for sample in samples if sample["time"] >= since]
        return samples

    def summary(self, service_id: str, window: float) -> dict[str, Any]:
        return summarize(self.history(service_id, window))

    def totals(self) -> dict[str, Any]:
        current = self._current.values()
        return {"cpuPercent": round(sum(sample["cpuPercent"] for sample in current), 1),
                "rssBytes": sum(sample["rssBytes"] for sample in current),
                "processes": sum(sample["processes"] for sample in current)}
