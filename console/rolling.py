"""A rolling restart: a service's processes replaced one at a time, each new one serving before
the old one drains (its WebSockets told to reconnect with 1012), so that clients barely notice.
With workers, their parent does it (SIGHUP; `gateway.rolling_restart.RollingRestart`); with one
process, the console starts the replacement on the same port (SO_REUSEPORT) first
(docs/operations.md)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Protocol

import psutil

from gateway.config import PROJECT_ROOT
from gateway.rolling_restart import rolling_status_path
from gateway.services import ServiceSpec

from .processes import RUNNING, ManagedService, SupervisorError, SupervisorSettings, kill_tree, service_command


class Supervisor(Protocol):
    """What a rolling restart asks of the console's supervisor (console/supervisor.py)."""
    data_dir: Path
    settings: SupervisorSettings

    async def _note(self, service: ManagedService, text: str) -> None: ...

    def child_environment(self) -> dict[str, str]: ...

    async def _read_output(self, service: ManagedService, process: asyncio.subprocess.Process) -> None: ...

    async def _monitor(self, service: ManagedService, process: asyncio.subprocess.Process) -> None: ...

    def _set_state(self, service: ManagedService, state: str, error: str | None = None) -> Any: ...


def rolls(spec: ServiceSpec) -> bool:
    """Whether a rolling restart can replace the service's processes one at a time: only a
    service that may run several (the service table's `workers`) keeps no state in its process
    that a replacement would lose."""
    return "workers" in spec.extra


async def rolling_restart(supervisor: Supervisor, service: ManagedService) -> None:
    spec = service.spec
    if not rolls(spec):
        raise SupervisorError(spec.id, f"{spec.id} keeps state in its process (the service table gives it "
                                       f"no `workers`), so it cannot be replaced one process at a time; "
                                       f"restart it instead", "rolling_unsupported", status=409)
    process = service.process
    if process is None or not (service.alive and service.state == RUNNING):
        raise SupervisorError(spec.id, f"{spec.id} is not running ({service.state}); start it instead",
                              "not_running", status=409)
    if await asyncio.get_running_loop().run_in_executor(None, _has_workers, process.pid):
        await _roll_workers(supervisor, service)
    else:
        await _replace_process(supervisor, service)
    service.restarts += 1


async def _roll_workers(supervisor: Supervisor, service: ManagedService) -> None:
    spec, process = service.spec, service.process
    assert process is not None  # rolling_restart found it running
    status_file = rolling_status_path(supervisor.data_dir, spec.id)
    before = _read_json(status_file)
    generation = before.get("generation", 0) if before.get("pid") == process.pid else 0
    await supervisor._note(service, f"rolling restart: SIGHUP to pid {process.pid}, which replaces its workers "
                                    f"one at a time")
    process.send_signal(signal.SIGHUP)
    settings = supervisor.settings
    deadline = time.monotonic() + (settings.health_timeout + settings.stop_timeout + 30) * 8
    while True:
        record = _read_json(status_file)
        if record.get("pid") == process.pid and record.get("generation", 0) > generation \
                and record.get("state") in ("done", "failed"):
            break
        if not service.alive or time.monotonic() > deadline:
            message = (f"{spec.id}: the rolling restart did not finish"
                       + ("" if service.alive else f" (pid {process.pid} exited)"))
            await supervisor._note(service, message)
            raise SupervisorError(spec.id, message, "rolling_failed")
        await asyncio.sleep(0.2)
    if record["state"] == "failed":
        message = f"{spec.id}: rolling restart stopped: {record.get('error')}"
        await supervisor._note(service, message)
        raise SupervisorError(spec.id, message, "rolling_failed")
    await supervisor._note(service, f"rolling restart done: {record.get('replaced')} workers replaced")


async def _replace_process(supervisor: Supervisor, service: ManagedService) -> None:
    spec, old = service.spec, service.process
    assert old is not None  # rolling_restart found it running
    ready_file = supervisor.data_dir / "run" / f"{spec.id}-replacement.ready"
    ready_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    ready_file.unlink(missing_ok=True)
    command = [*service_command(spec), "--ready-file", str(ready_file)]
    await supervisor._note(service, "rolling restart: starting the replacement beside pid "
                                    f"{old.pid}: " + " ".join(command))
    new = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, env=supervisor.child_environment(), cwd=str(PROJECT_ROOT),
        start_new_session=os.name == "posix")
    reader = asyncio.ensure_future(supervisor._read_output(service, new))
    deadline = time.monotonic() + float(spec.extra.get("health_timeout", supervisor.settings.health_timeout))
    while not ready_file.exists():
        if new.returncode is not None or time.monotonic() > deadline:
            if new.returncode is None:
                new.terminate()
            await new.wait()
            await reader
            message = f"{spec.id}: the replacement did not serve (exit code {new.returncode}); pid {old.pid} serves on"
            await supervisor._note(service, message)
            raise SupervisorError(spec.id, message, "rolling_failed")
        await asyncio.sleep(0.1)
    retired_monitor = service.monitor_task
    assert retired_monitor is not None  # set with the process it watches
    service.process, service.reader_task = new, reader
    service.started_at, service.started_monotonic = time.time(), time.monotonic()
    service.monitor_task = asyncio.ensure_future(supervisor._monitor(service, new))
    await supervisor._note(service, f"replacement pid {new.pid} serves; draining pid {old.pid}")
    with contextlib.suppress(ProcessLookupError):
        old.send_signal(getattr(signal, "SIGUSR2", signal.SIGTERM))
    done, _ = await asyncio.wait([retired_monitor], timeout=supervisor.settings.stop_timeout)
    if not done:
        kill_tree(old.pid)
        await retired_monitor
    supervisor._set_state(service, RUNNING)


def _has_workers(pid: int) -> bool:
    """Whether the process is the parent of `gateway serve --workers N`. Blocking."""
    try:
        return any("--worker-index" in child.cmdline() for child in psutil.Process(pid).children())
    except psutil.Error:
        return False


def _read_json(path: Path) -> dict:
    try:
        record: dict = json.loads(path.read_text())
        return record
    except (OSError, ValueError):
        return {}
