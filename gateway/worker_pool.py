"""The parent's handle on one worker process (`Worker`): its command line, starting it in a
session of its own, signalling it, and draining workers (SIGTERM, then SIGKILL after a bound)."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger("gateway.workers")


# Seconds the parent waits for its workers beyond their own drain (`core.shutdown_timeout`),
# then kills them.
STOP_GRACE = 5.0

class Worker:
    """One worker process as its parent sees it; `start` again replaces the process it ran."""

    def __init__(self, index: int, command: list[str], environment: dict[str, str],
                 ready_file: Path | None = None) -> None:
        self.index, self.command, self.environment = index, command, environment
        self.ready_file = ready_file  # written by the worker once it serves the port
        self.process: asyncio.subprocess.Process | None = None
        self.started = 0.0
        self.failures = 0
        self.retiring = False  # replaced by a rolling restart: its exit is not a death to repair

    async def start(self) -> None:
        command = self.command
        if self.ready_file is not None:
            with contextlib.suppress(FileNotFoundError):
                self.ready_file.unlink()
            command = [*command, "--ready-file", str(self.ready_file)]
        # A session of its own: signals reach a worker once, from the parent (a second SIGTERM
        # would cut its drain short), not also from a terminal's Ctrl-C to the whole group.
        self.process = await asyncio.create_subprocess_exec(*command, stdin=subprocess.DEVNULL,
                                                            env=self.environment, start_new_session=True)
        self.started = time.monotonic()
        log.info("worker %d started (pid %s)", self.index, self.process.pid)

    def signal(self, number: int) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(number)


def worker_command(service_id: str, host: str, port: int, index: int, bus_url: str | None,
                   vectors_socket: str | None, log_level: str = "info", take_over_vectors: bool = False) -> list[str]:
    """`gateway serve` as worker `index` of the parent's: on the parent's bus and vector store;
    `take_over_vectors`: the parent replaces a process that holds the store (a rolling restart)."""
    command = [sys.executable, "-m", "gateway", "--log-level", log_level, "serve", "--service", service_id,
               "--host", host,
               "--port", str(port), "--worker-index", str(index)]
    if bus_url:
        command += ["--bus-url", bus_url]
    if vectors_socket:
        command += ["--vectors-socket", vectors_socket]
        if take_over_vectors:
            command.append("--take-over-vectors")
    return command


async def drain(workers: list[Worker], timeout: float, already_signalled: bool = False) -> None:
    """SIGTERM every worker (each drains: in-flight turns finish or end cleanly), SIGKILL what is
    left after `timeout`."""
    alive = [worker for worker in workers if worker.process is not None and worker.process.returncode is None]
    for worker in alive:
        if not already_signalled:
            worker.signal(signal.SIGTERM)
    if not alive:
        return
    waits = [asyncio.ensure_future(worker.process.wait()) for worker in alive if worker.process]
    _, pending = await asyncio.wait(waits, timeout=timeout)
    if pending:
        log.warning("%d workers did not stop within %gs; killing them", len(pending), timeout)
        for worker in alive:
            worker.signal(signal.SIGKILL)
        await asyncio.wait(pending)
