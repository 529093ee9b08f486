"""A rolling restart of a service's workers (SIGHUP to their parent): each replaced in turn by
one that already serves the port, the old one drained; every step recorded where
`console.sh restart --rolling` reads it."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path

from .worker_pool import Worker, drain
from .worker_process import REPLACED_SIGNAL

log = logging.getLogger("gateway.workers")

# Seconds a rolling restart waits for a new worker to serve before giving up (the old one serves on).
READY_TIMEOUT = 120.0


def rolling_status_path(data_dir: Path, service_id: str) -> Path:
    """Where the parent records its rolling restarts (what `console.sh restart --rolling` reads)."""
    return data_dir / "run" / f"{service_id}-rolling.json"


class RollingRestart:
    """SIGHUP to the parent: each worker in turn is replaced. The new one is started beside the
    old (SO_REUSEPORT: both serve the port) and, once it serves, the old one is sent
    `REPLACED_SIGNAL`: it stops accepting, closes its WebSockets with 1012 "service restart" (the
    devices reconnect at once, to a worker that serves), lets its running turns finish and exits.
    Only then is the next worker replaced. A replacement that does not come up ends the restart
    and leaves the old worker serving. Each step is recorded in `rolling_status_path`: the
    generation (one per restart asked for), its state (idle, rolling, done, failed) and why."""

    def __init__(self, service_id: str, status_file: Path, directory: Path, drain_timeout: float) -> None:
        self.service_id, self.status_file, self.directory = service_id, status_file, directory
        self.drain_timeout = drain_timeout
        self.requested = asyncio.Event()
        self.generation = 0
        # Started or retiring workers not in the list of serving ones: drained at the stop too.
        self.outside: list[Worker] = []

    def record(self, state: str, **details: object) -> None:
        self.status_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        written = self.status_file.with_suffix(".tmp")
        written.write_text(json.dumps({"pid": os.getpid(), "generation": self.generation, "state": state,
                                       "at": time.time(), **details}))
        written.replace(self.status_file)

    async def roll(self, workers: list[Worker], stop: asyncio.Event) -> None:
        self.generation += 1
        self.record("rolling", replaced=0, workers=len(workers))
        log.info("%s: rolling restart %d of %d workers", self.service_id, self.generation, len(workers))
        for position, old in enumerate(list(workers)):
            new = Worker(old.index, old.command, old.environment,
                         self.directory / f"{self.service_id}-worker-{old.index}.ready")
            self.outside.append(new)
            await new.start()
            if not await until_ready(new, stop, READY_TIMEOUT):
                why = (f"the replacement of worker {old.index} exited with code {new.process.returncode}"
                       if new.process is not None and new.process.returncode is not None
                       else f"the replacement of worker {old.index} did not serve within {READY_TIMEOUT:g}s")
                log.error("%s: rolling restart stopped: %s; worker %d (pid %s) serves on", self.service_id,
                          why, old.index, old.process.pid if old.process else "?")
                await drain([new], self.drain_timeout)
                self.outside.remove(new)
                self.record("failed", replaced=position, workers=len(workers), error=why)
                return
            workers[position] = new
            self.outside.remove(new)
            old.retiring = True
            self.outside.append(old)
            log.info("%s: worker %d replaced by pid %s; draining pid %s", self.service_id, old.index,
                     new.process.pid if new.process else "?", old.process.pid if old.process else "?")
            if REPLACED_SIGNAL is not None:
                old.signal(REPLACED_SIGNAL)
            await drain([old], self.drain_timeout, already_signalled=REPLACED_SIGNAL is not None)
            self.outside.remove(old)
            self.record("rolling", replaced=position + 1, workers=len(workers))
        self.record("done", replaced=len(workers), workers=len(workers))
        log.info("%s: rolling restart %d done", self.service_id, self.generation)


async def until_ready(worker: Worker, stop: asyncio.Event, timeout: float) -> bool:
    """Whether `worker` wrote its ready file (it serves the port) within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stop.is_set():
        if worker.process is None or worker.process.returncode is not None:
            return False
        if worker.ready_file is not None and worker.ready_file.exists():
            return True
        await asyncio.sleep(0.1)
    return False
