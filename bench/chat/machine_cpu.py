"""Where a turn's CPU goes on the whole machine in the workers run: the gateway's workers, their
parent and its bus (redis-server), and beside them the mock AI core, PostgreSQL and the load
generator (this process), each from its processes' CPU clocks. How many workers pay off depends
on what share of a turn the gateway's processes take: the rest needs cores too."""
from __future__ import annotations

import time
from typing import Callable

from bench.chat.turns import cpu_seconds

Meter = Callable[[], dict[str, float]]  # CPU seconds so far, by role


def tree_cpu(root_pid: int) -> float:
    """CPU seconds of the process and its descendants, those that exited included (a live
    process's reaped children's times: PostgreSQL's backends come and go with connections)."""
    import psutil

    try:
        root = psutil.Process(root_pid)
        times = root.cpu_times()
        total = cpu_seconds(root_pid) + times.children_user + times.children_system
        return total + sum(tree_cpu(child.pid) for child in root.children())
    except psutil.NoSuchProcess:
        return 0.0


def is_bus(process) -> bool:
    try:
        return "redis" in process.name()
    except Exception:
        return False


def gateway_roles(pid: int, workers: int) -> dict[str, float]:
    """`gateway serve`: one process is its one worker; with several, the parent, its workers
    and the bus it started."""
    import psutil

    if workers == 1:
        return {"gateway workers": tree_cpu(pid), "gateway parent": 0.0, "bus": 0.0}
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return {}
    return {"gateway workers": sum(tree_cpu(child.pid) for child in children if not is_bus(child)),
            "gateway parent": cpu_seconds(pid),
            "bus": sum(tree_cpu(child.pid) for child in children if is_bus(child))}


def postgres_pid(database_url: str) -> int | None:
    """The postmaster serving `database_url` (the parent of this connection's backend), where it
    is a process on this machine that psutil may read; None otherwise."""
    import psutil
    import psycopg2

    try:
        with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
        connection.close()
        return psutil.Process(backend).ppid()
    except Exception:
        return None


def surroundings(mock_pid: int, database_pid: int | None) -> dict[str, float]:
    """What else a turn keeps busy: the mock AI core, PostgreSQL (every backend) and this
    process, the load generator."""
    return {"mock AI core": tree_cpu(mock_pid),
            "PostgreSQL": tree_cpu(database_pid) if database_pid else float("nan"),
            "load generator": time.process_time()}


def gateway_meter(pid: int, workers: int, mock_pid: int, database_pid: int | None) -> Meter:
    return lambda: {**gateway_roles(pid, workers), **surroundings(mock_pid, database_pid)}


def relay_meter(pids: list[int], mock_pid: int, database_pid: int | None) -> Meter:
    return lambda: {"relay": sum(tree_cpu(pid) for pid in pids), **surroundings(mock_pid, database_pid)}


OWN_ROLES = ("relay", "gateway workers", "gateway parent", "bus")  # a target's own process tree


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {role: after[role] - before.get(role, 0.0) for role in after}
