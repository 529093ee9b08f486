"""What the supervisor (supervisor.py) runs and keeps: the states of a service, the supervisor's
settings, one supervised service (`ManagedService`), the command and environment of a child, and
the processes a previous console left running (orphans), found and stopped."""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import AbstractSet

import psutil

from gateway.config import Config
from gateway.peer_location import PEER_SERVICES
from gateway.services import ServiceSpec
from gateway.worker_count import can_share_port

from .build import BuildReport

log = logging.getLogger("console.supervisor")

STOPPED, STARTING, RUNNING, STOPPING, BUILDING, FAILED = (
    "stopped", "starting", "running", "stopping", "building", "failed")

# The environment variable through which each service finds a peer, by service id (the core's
# one table of peers, gateway/peers.py).
PEER_URL_VARIABLES = {table_id: variable for table_id, variable in PEER_SERVICES.values()}
# The console's own credential is not the services' business.
WITHHELD_VARIABLES = ("CONSOLE_TOKEN",)


class SupervisorError(Exception):
    """A transition that did not happen; `service` names the service, the message says why."""

    def __init__(self, service: str, message: str, error_type: str = "start_failed", status: int | None = None):
        super().__init__(message)
        self.service = service
        self.error_type = error_type
        self.status = status  # the HTTP status, where not the usual one of its error type


class UnknownService(KeyError):
    pass


@dataclass
class SupervisorSettings:
    health_timeout: float = 60.0
    stop_timeout: float = 10.0
    build_timeout: float = 600.0
    restart_on_exit: bool = False
    restart_backoff_initial: float = 1.0
    restart_backoff_max: float = 60.0
    health_interval: float = 0.2

    @classmethod
    def from_config(cls, config: Config) -> "SupervisorSettings":
        console = config.settings.console
        return cls(health_timeout=console.health_timeout, stop_timeout=console.stop_timeout,
                   build_timeout=console.build_timeout, restart_on_exit=console.restart_on_exit,
                   restart_backoff_initial=console.restart_backoff_initial,
                   restart_backoff_max=console.restart_backoff_max)


@dataclass
class ManagedService:
    spec: ServiceSpec
    state: str = STOPPED
    process: asyncio.subprocess.Process | None = None
    started_at: float | None = None  # wall clock, for display
    started_monotonic: float | None = None  # for uptime
    exit_code: int | None = None
    last_error: str | None = None
    restarts: int = 0
    consecutive_failures: int = 0
    stopping: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    reader_task: asyncio.Task | None = None
    monitor_task: asyncio.Task | None = None
    restart_task: asyncio.Task | None = None
    last_build: BuildReport | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def uptime(self) -> float:
        if not self.alive or self.started_monotonic is None:
            return 0.0
        return round(time.monotonic() - self.started_monotonic, 1)


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")


def build_records_path(data_dir: Path) -> Path:
    """Where each service's last build is kept (the console's and the CLI's builds alike)."""
    return data_dir / "console" / "builds.json"


def service_command(spec: ServiceSpec) -> list[str]:
    command = [sys.executable, "-m", "gateway", "serve", "--service", spec.id]
    if "workers" in spec.extra and can_share_port():
        # With one process (one core), a rolling restart starts the replacement beside it.
        command.append("--reuse-port")
    return command


def child_environment(specs: list[ServiceSpec], data_dir: Path, peer_urls: dict[str, str]) -> dict[str, str]:
    """The environment of a service the console runs: the console's, less its own credential,
    with DATA_DIR and each peer's `*_URL` the operator left unset (`peer_urls`, else the
    table's port on 127.0.0.1): an address the operator set stands."""
    environ = {key: value for key, value in os.environ.items() if key not in WITHHELD_VARIABLES}
    environ["DATA_DIR"] = str(data_dir)
    environ["PYTHONUNBUFFERED"] = "1"
    for spec in specs:
        variable = PEER_URL_VARIABLES.get(spec.id)
        if variable and not environ.get(variable):
            environ[variable] = peer_urls.get(spec.id) or f"http://127.0.0.1:{spec.port}"
    return environ


def kill_tree(pid: int) -> None:
    """SIGKILL the child and what it started, except a PostgreSQL server: the embedded
    database is shared by every service and stops cleanly on its own."""
    try:
        parent = psutil.Process(pid)
        descendants = parent.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for process in [parent, *descendants]:
        try:
            if process.pid != pid and process.name().startswith(("postgres", "pg_ctl")):
                continue
            process.kill()
        except psutil.NoSuchProcess:
            pass


def find_orphans(service_ids: set[str], data_dir: Path,
                 exclude: AbstractSet[int] = frozenset()) -> list[psutil.Process]:
    """Services that a previous console left running on this DATA_DIR (it was killed, or the
    machine's session ended). Matches the command line the supervisor starts and the DATA_DIR it
    passes, so nothing else on the machine is ever taken for one. Blocking."""
    found: list[psutil.Process] = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if process.pid in exclude or not _is_service_command(cmdline, service_ids):
            continue
        try:
            if process.environ().get("DATA_DIR") != str(data_dir):
                continue
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
        found.append(process)
    return found


def terminate_orphans(service_ids: set[str], data_dir: Path, exclude: AbstractSet[int] = frozenset(),
                      timeout: float = 10.0) -> list[int]:
    """SIGTERM the orphans of `find_orphans`, SIGKILL those still alive after `timeout`. Blocking."""
    found = find_orphans(service_ids, data_dir, exclude)
    for process in found:
        log.warning("stopping %s (pid %s), left running by a previous console",
                    " ".join(process.info["cmdline"]), process.pid)
        try:
            process.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(found, timeout=timeout)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)
    return [process.pid for process in found]


def _is_service_command(cmdline: list[str], service_ids: set[str]) -> bool:
    """`... gateway serve --service ID` (through `python -m gateway` or the `gateway` script)."""
    for index in range(1, len(cmdline) - 2):
        if (cmdline[index] == "serve" and cmdline[index + 1] == "--service"
                and cmdline[index + 2] in service_ids
                and any(Path(part).name == "gateway" for part in cmdline[:index])):
            return True
    return False
