"""Opt-in tracemalloc snapshots of a running service process, to find what its memory grows by
(a soak's slow rise: docs/operations.md "Soak"). Off unless `MEMORY_SNAPSHOTS` is set when the
service starts:

    MEMORY_SNAPSHOTS=60                         every service: a snapshot a minute
    MEMORY_SNAPSHOTS=gateway,memory-service:60  only those services (each worker of theirs)

Each process then traces allocations (`MEMORY_SNAPSHOTS_FRAMES` frames deep, 10 by default;
tracing costs CPU and memory: a diagnostic, not for production) and writes
DATA_DIR/memory-snapshots/<service>-<pid>-<number>-<seconds since start>s.tracemalloc every so
many seconds, and at once on SIGUSR1, each after a full pass of the garbage collector.
`python -m bench.soak.snapshots OLD NEW` shows what grew between two of them, by traceback."""
from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import os
import signal
import time
import tracemalloc
from pathlib import Path

log = logging.getLogger("gateway.memory_snapshots")

ENVIRONMENT = "MEMORY_SNAPSHOTS"
FRAMES_ENVIRONMENT = "MEMORY_SNAPSHOTS_FRAMES"
DIRECTORY = "memory-snapshots"
SNAPSHOT_SIGNAL = getattr(signal, "SIGUSR1", None)


def parse(value: str) -> tuple[set[str] | None, float] | None:
    """`[service,service:]seconds` as (the services, None for all; the interval); None: off or
    not understood (said in the log: a diagnostic must not stop a service)."""
    value = value.strip()
    if not value:
        return None
    services_part, _, seconds_part = value.rpartition(":")
    try:
        seconds = float(seconds_part)
    except ValueError:
        log.warning("%s=%r: expected [service,...:]seconds; no snapshots", ENVIRONMENT, value)
        return None
    if seconds <= 0:
        return None
    services = {name.strip() for name in services_part.split(",") if name.strip()} or None
    return services, seconds


def start(loop: asyncio.AbstractEventLoop, service_id: str, data_dir: Path) -> bool:
    """Trace this process's allocations and write snapshots as `MEMORY_SNAPSHOTS` says; False
    (nothing done) when it is unset or names other services."""
    parsed = parse(os.environ.get(ENVIRONMENT, ""))
    if parsed is None or (parsed[0] is not None and service_id not in parsed[0]):
        return False
    interval = parsed[1]
    frames = int(os.environ.get(FRAMES_ENVIRONMENT, "") or 10)
    directory = data_dir / DIRECTORY
    directory.mkdir(parents=True, exist_ok=True)
    if not tracemalloc.is_tracing():
        tracemalloc.start(frames)
    started = time.monotonic()
    numbers = itertools.count(1)

    def write() -> None:
        # Taken on the loop (a consistent picture), written off it. The collector runs first: what
        # a snapshot holds is then reachable, not garbage in reference cycles awaiting its next
        # full pass (a request's marshmallow schema, say), which comes and goes with its timing.
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
        seconds = time.monotonic() - started
        path = directory / f"{service_id}-{os.getpid()}-{next(numbers):04d}-{seconds:.0f}s.tracemalloc"
        loop.run_in_executor(None, snapshot.dump, str(path))

    def periodic() -> None:
        write()
        loop.call_later(interval, periodic)

    loop.call_later(interval, periodic)
    if SNAPSHOT_SIGNAL is not None:
        loop.add_signal_handler(SNAPSHOT_SIGNAL, write)
    log.warning("%s (pid %s): tracing allocations (%s frames), a snapshot every %gs in %s",
                service_id, os.getpid(), frames, interval, directory)
    return True
