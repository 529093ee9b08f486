"""The supervisor: runs each service of the service table as a child process
(`python -m gateway serve --service ID`), watches it, and moves it through the states of
spec/console.md.

States reported: `stopped`, `starting` (spawned, health check not passed yet), `running`
(health check passed), `stopping`, `building`, `failed` (exited on its own, or never became
healthy; `lastError` says which). Commands are fixed argument lists from the service table,
never a shell and never anything from a request.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import aiohttp
import psutil

from gateway.config import PROJECT_ROOT
from gateway.services import ServiceSpec
from gateway.workers import can_share_port, rolling_status_path

from .build import BuildEnvironment, BuildRecords, BuildReport, StepReport, run_build
from .logstore import LogStore
from .push import PushHub

log = logging.getLogger("console.supervisor")

STOPPED, STARTING, RUNNING, STOPPING, BUILDING, FAILED = (
    "stopped", "starting", "running", "stopping", "building", "failed")

# The environment variable through which each service finds a peer, by service id.
PEER_URL_VARIABLES = {
    "gateway": "GATEWAY_URL",
    "ai-core": "AI_CORE_URL",
    "memory-service": "MEMORY_SERVICE_URL",
    "voice-service": "VOICE_SERVICE_URL",
    "iot-debug-service": "IOT_SERVICE_URL",
    "platform-bridge": "PLATFORM_BRIDGE_URL",
    "plugin-manager": "PLUGIN_MANAGER_URL",
}
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
    def from_config(cls, config) -> "SupervisorSettings":
        section = config.section("console")
        defaults = cls()
        return cls(**{name: type(getattr(defaults, name))(section[name])
                      for name in defaults.__dataclass_fields__ if name in section})


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


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")


def build_records_path(data_dir: Path) -> Path:
    """Where each service's last build is kept (the console's and the CLI's builds alike)."""
    return data_dir / "console" / "builds.json"


def service_command(spec: ServiceSpec) -> list[str]:
    command = [sys.executable, "-m", "gateway", "serve", "--service", spec.id]
    if rolls(spec) and can_share_port():
        # With one process (one core), a rolling restart starts the replacement beside it.
        command.append("--reuse-port")
    return command


def rolls(spec: ServiceSpec) -> bool:
    """Whether a rolling restart can replace the service's processes one at a time: only a
    service that may run several (the service table's `workers`) keeps no state in its process
    that a replacement would lose."""
    return "workers" in spec.extra


class Supervisor:
    def __init__(self, specs: list[ServiceSpec], data_dir: Path, logs: LogStore, hub: PushHub,
                 settings: SupervisorSettings | None = None, host: str = "127.0.0.1",
                 line_listener: Callable[[str, str], object] | None = None,
                 build_environment: BuildEnvironment | None = None):
        self.specs = list(specs)
        # Called with (service id, line) for each line a service writes: the STT log reads its
        # entries from the voice service's output this way.
        self.line_listener = line_listener
        self.data_dir = data_dir
        self.logs = logs
        self.hub = hub
        self.settings = settings or SupervisorSettings()
        self.host = host
        self.build_environment = build_environment or BuildEnvironment()
        self.build_records = BuildRecords(build_records_path(data_dir))
        self._services = {spec.id: ManagedService(spec) for spec in self.specs}
        self._all_lock = asyncio.Lock()
        self._http: aiohttp.ClientSession | None = None

    # ------------------------------------------------------------ lifecycle of the supervisor

    async def open(self) -> None:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2))
        records = await asyncio.get_running_loop().run_in_executor(None, self.build_records.load)
        for service_id, report in records.items():
            if service_id in self._services:
                self._services[service_id].last_build = report

    async def close(self) -> None:
        """Stop every service: the console never leaves children behind when it stops."""
        for service in self._services.values():
            self._cancel_restart(service)
        await self.stop_all()
        if self._http is not None:
            await self._http.close()

    # ------------------------------------------------------------ reading state

    def service(self, service_id: str) -> ManagedService:
        try:
            return self._services[service_id]
        except KeyError:
            raise UnknownService(service_id) from None

    def health_url(self, spec: ServiceSpec) -> str:
        return f"http://127.0.0.1:{spec.port}{spec.health}"

    def status(self, service_id: str) -> dict[str, Any]:
        service = self.service(service_id)
        spec = service.spec
        return {
            "id": spec.id, "name": spec.name, "port": spec.port, "status": service.state,
            "running": service.state == RUNNING, "pid": service.process.pid if service.alive else None,
            "uptime": service.uptime(), "startedAt": _iso(service.started_at) if service.alive else None,
            "exitCode": service.exit_code, "lastError": service.last_error, "restarts": service.restarts,
            "depends": list(spec.depends), "healthUrl": self.health_url(spec),
            "rolling": rolls(spec),
            "build": service.last_build.public() if service.last_build is not None else None,
        }

    def statuses(self) -> list[dict[str, Any]]:
        return [self.status(spec.id) for spec in self.specs]

    def child_pids(self) -> list[int]:
        return [s.process.pid for s in self._services.values() if s.alive]

    def pids(self) -> dict[str, int]:
        """Each live service's main process, by service id (the performance sampler's list)."""
        return {service_id: s.process.pid for service_id, s in self._services.items()
                if s.alive and s.process is not None}

    # ------------------------------------------------------------ transitions

    async def start(self, service_id: str) -> dict:
        service = self.service(service_id)
        async with service.lock:
            self._refuse_failed_build(service)
            await self._start_locked(service)
        return self.status(service_id)

    async def stop(self, service_id: str) -> dict:
        service = self.service(service_id)
        async with service.lock:
            self._cancel_restart(service)
            await self._stop_locked(service)
        return self.status(service_id)

    async def restart(self, service_id: str) -> dict:
        service = self.service(service_id)
        async with service.lock:
            self._refuse_failed_build(service)
            self._cancel_restart(service)
            await self._stop_locked(service)
            await self._start_locked(service)
        return self.status(service_id)

    async def rolling_restart(self, service_id: str) -> dict:
        """Replace the service's processes one at a time, each new one serving before the old one
        drains (its WebSockets told to reconnect with 1012), so that clients barely notice.
        With workers, their parent does it (SIGHUP; `gateway.workers.RollingRestart`); with one
        process, the console starts the replacement on the same port (SO_REUSEPORT) first."""
        service = self.service(service_id)
        async with service.lock:
            spec = service.spec
            if not rolls(spec):
                raise SupervisorError(spec.id, f"{spec.id} keeps state in its process (the service table gives it "
                                               f"no `workers`), so it cannot be replaced one process at a time; "
                                               f"restart it instead", "rolling_unsupported", status=409)
            if not (service.alive and service.state == RUNNING):
                raise SupervisorError(spec.id, f"{spec.id} is not running ({service.state}); start it instead",
                                      "not_running", status=409)
            self._cancel_restart(service)
            if await asyncio.get_running_loop().run_in_executor(None, _has_workers, service.process.pid):
                await self._roll_workers(service)
            else:
                await self._replace_process(service)
            service.restarts += 1
        return self.status(service_id)

    async def _roll_workers(self, service: ManagedService) -> None:
        spec, process = service.spec, service.process
        status_file = rolling_status_path(self.data_dir, spec.id)
        before = _read_json(status_file)
        generation = before.get("generation", 0) if before.get("pid") == process.pid else 0
        await self._note(service, f"rolling restart: SIGHUP to pid {process.pid}, which replaces its workers "
                                  f"one at a time")
        process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + (self.settings.health_timeout + self.settings.stop_timeout + 30) * 8
        while True:
            record = _read_json(status_file)
            if record.get("pid") == process.pid and record.get("generation", 0) > generation \
                    and record.get("state") in ("done", "failed"):
                break
            if not service.alive or time.monotonic() > deadline:
                message = (f"{spec.id}: the rolling restart did not finish"
                           + ("" if service.alive else f" (pid {process.pid} exited)"))
                await self._note(service, message)
                raise SupervisorError(spec.id, message, "rolling_failed")
            await asyncio.sleep(0.2)
        if record["state"] == "failed":
            message = f"{spec.id}: rolling restart stopped: {record.get('error')}"
            await self._note(service, message)
            raise SupervisorError(spec.id, message, "rolling_failed")
        await self._note(service, f"rolling restart done: {record.get('replaced')} workers replaced")

    async def _replace_process(self, service: ManagedService) -> None:
        spec, old = service.spec, service.process
        ready_file = self.data_dir / "run" / f"{spec.id}-replacement.ready"
        ready_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        ready_file.unlink(missing_ok=True)
        command = [*service_command(spec), "--ready-file", str(ready_file)]
        await self._note(service, "rolling restart: starting the replacement beside pid "
                                  f"{old.pid}: " + " ".join(command))
        new = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env=self.child_environment(), cwd=str(PROJECT_ROOT),
            start_new_session=os.name == "posix")
        reader = asyncio.ensure_future(self._read_output(service, new))
        deadline = time.monotonic() + float(spec.extra.get("health_timeout", self.settings.health_timeout))
        while not ready_file.exists():
            if new.returncode is not None or time.monotonic() > deadline:
                if new.returncode is None:
                    new.terminate()
                await new.wait()
                await reader
                message = (f"{spec.id}: the replacement did not serve (exit code {new.returncode}); "
                           f"pid {old.pid} serves on")
                await self._note(service, message)
                raise SupervisorError(spec.id, message, "rolling_failed")
            await asyncio.sleep(0.1)
        retired_monitor = service.monitor_task
        service.process, service.reader_task = new, reader
        service.started_at, service.started_monotonic = time.time(), time.monotonic()
        service.monitor_task = asyncio.ensure_future(self._monitor(service, new))
        await self._note(service, f"replacement pid {new.pid} serves; draining pid {old.pid}")
        with contextlib.suppress(ProcessLookupError):
            old.send_signal(getattr(signal, "SIGUSR2", signal.SIGTERM))
        done, _ = await asyncio.wait([retired_monitor], timeout=self.settings.stop_timeout)
        if not done:
            self._kill_tree(old.pid)
            await retired_monitor
        self._set_state(service, RUNNING)

    async def build(self, service_id: str) -> dict:
        """Run the service's build step; only when it succeeds, restart the service on the result.
        A failed build leaves a running service running."""
        service = self.service(service_id)
        async with service.lock:
            await self._build_locked(service)
            self._cancel_restart(service)
            await self._stop_locked(service)
            await self._start_locked(service)
        return self.status(service_id)

    async def start_all(self) -> list[dict]:
        """Start in table order, each waiting for the previous one's health check; the first
        failure ends the sequence (what follows depends on it)."""
        async with self._all_lock:
            for spec in self.specs:
                await self.start(spec.id)
        return self.statuses()

    async def start_all_fresh(self) -> list[dict]:
        async with self._all_lock:
            await self._stop_all_locked()
            await asyncio.get_running_loop().run_in_executor(None, self.terminate_orphans)
            for spec in self.specs:
                await self.start(spec.id)
        return self.statuses()

    async def stop_all(self) -> list[dict]:
        async with self._all_lock:
            await self._stop_all_locked()
        return self.statuses()

    async def _stop_all_locked(self) -> None:
        for spec in reversed(self.specs):
            await self.stop(spec.id)

    # ------------------------------------------------------------ internals

    def _set_state(self, service: ManagedService, state: str, error: str | None = None) -> None:
        service.state = state
        if error is not None:
            service.last_error = error
        self.hub.publish({"type": "status", "service": service.spec.id,
                          "status": self.status(service.spec.id)})

    async def _note(self, service: ManagedService, text: str) -> None:
        """A line of the console's own in the service's log, so the log tells the whole story."""
        line = f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} [console] {text}"
        await self.logs.get(service.spec.id).append((line + "\n").encode())
        self.hub.publish({"type": "log", "service": service.spec.id, "line": line, "source": "console"})

    def child_environment(self) -> dict[str, str]:
        environ = {key: value for key, value in os.environ.items() if key not in WITHHELD_VARIABLES}
        environ["DATA_DIR"] = str(self.data_dir)
        environ["PYTHONUNBUFFERED"] = "1"
        for spec in self.specs:
            variable = PEER_URL_VARIABLES.get(spec.id)
            if variable:
                environ[variable] = f"http://127.0.0.1:{spec.port}"
        return environ

    async def _port_in_use(self, port: int) -> bool:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 1)
        except (OSError, asyncio.TimeoutError):
            return False
        writer.close()
        await writer.wait_closed()
        return True

    async def _start_locked(self, service: ManagedService) -> None:
        spec = service.spec
        if service.alive and service.state == RUNNING:
            return
        self._cancel_restart(service)
        if service.alive:  # starting or stopping half-way: begin again from a clean state
            await self._stop_locked(service)
        if await self._port_in_use(spec.port):
            message = (f"port {spec.port} is already in use by another process; stop it "
                       f"(`start --fresh` stops services a previous console left behind)")
            self._set_state(service, FAILED, message)
            await self._note(service, message)
            raise SupervisorError(spec.id, message, "port_in_use")
        command = service_command(spec)
        await self._note(service, "starting: " + " ".join(command))
        service.stopping = False
        service.exit_code = None
        service.last_error = None
        service.process = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env=self.child_environment(), cwd=str(PROJECT_ROOT),
            start_new_session=os.name == "posix")
        service.started_at = time.time()
        service.started_monotonic = time.monotonic()
        service.reader_task = asyncio.ensure_future(self._read_output(service, service.process))
        service.monitor_task = asyncio.ensure_future(self._monitor(service, service.process))
        self._set_state(service, STARTING)
        try:
            await self._wait_healthy(service)
        except SupervisorError as error:
            await self._stop_locked(service)
            self._set_state(service, FAILED, str(error))
            await self._note(service, str(error))
            raise
        self._set_state(service, RUNNING)
        await self._note(service, f"healthy at {self.health_url(spec)} (pid {service.process.pid})")

    async def _wait_healthy(self, service: ManagedService) -> None:
        spec = service.spec
        url = self.health_url(spec)
        timeout = float(spec.extra.get("health_timeout", self.settings.health_timeout))
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            if not service.alive:
                raise SupervisorError(spec.id, f"{spec.id} exited with code {service.process.returncode} "
                                               f"before its health check passed; see its log")
            try:
                async with self._http.get(url, timeout=aiohttp.ClientTimeout(total=2)) as response:
                    if response.status == 200:
                        return
                    last = f"HTTP {response.status}"
            except (aiohttp.ClientError, asyncio.TimeoutError) as error:
                last = type(error).__name__
            if time.monotonic() >= deadline:
                raise SupervisorError(spec.id, f"{spec.id}: health check {url} did not pass within "
                                               f"{timeout:g}s (last: {last})",
                                      "health_check_failed")
            await asyncio.wait([service.monitor_task], timeout=self.settings.health_interval)

    async def _stop_locked(self, service: ManagedService) -> None:
        process = service.process
        if process is None or process.returncode is not None:
            if service.monitor_task is not None:
                await service.monitor_task  # output drained, state settled
            if service.state != STOPPED:
                self._set_state(service, STOPPED)
            return
        service.stopping = True
        self._set_state(service, STOPPING)
        await self._note(service, f"stopping pid {process.pid} (SIGTERM)")
        try:
            process.terminate()
        except ProcessLookupError:
            pass
        done, _ = await asyncio.wait([service.monitor_task], timeout=self.settings.stop_timeout)
        if not done:
            await self._note(service, f"pid {process.pid} did not stop within "
                                      f"{self.settings.stop_timeout:g}s; killing it (SIGKILL)")
            self._kill_tree(process.pid)
            await service.monitor_task

    @staticmethod
    def _kill_tree(pid: int) -> None:
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

    async def _read_output(self, service: ManagedService, process: asyncio.subprocess.Process) -> None:
        service_log = self.logs.get(service.spec.id)
        pending = b""
        while True:
            chunk = await process.stdout.read(65536)
            if not chunk:
                break
            await service_log.append(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._heard(service.spec.id, line.decode("utf-8", "replace").rstrip("\r"))
        if pending:
            await service_log.append(b"\n")
            self._heard(service.spec.id, pending.decode("utf-8", "replace"))

    def _heard(self, service_id: str, line: str) -> None:
        self.hub.publish({"type": "log", "service": service_id, "line": line, "source": "service"})
        if self.line_listener is not None:
            try:
                self.line_listener(service_id, line)
            except Exception:  # a listener's bug must not stop the service's log
                log.exception("a log line listener failed")

    async def _monitor(self, service: ManagedService, process: asyncio.subprocess.Process) -> None:
        reader = service.reader_task
        code = await process.wait()
        await reader
        if process is not service.process:  # replaced by a rolling restart
            await self._note(service, f"replaced pid {process.pid} stopped (exit code {code})")
            return
        service.exit_code = code
        if service.stopping:
            await self._note(service, f"stopped (exit code {code})")
            self._set_state(service, STOPPED)
            return
        if service.state == STARTING:
            return  # the starter reports it, with the reason
        message = f"{service.spec.id} exited unexpectedly with code {code}"
        ran_for = time.monotonic() - (service.started_monotonic or time.monotonic())
        if ran_for > self.settings.restart_backoff_max:
            service.consecutive_failures = 0
        service.consecutive_failures += 1
        self._set_state(service, FAILED, message)
        await self._note(service, message)
        log.warning(message)
        if self.settings.restart_on_exit:
            self._schedule_restart(service)

    def _schedule_restart(self, service: ManagedService) -> None:
        delay = min(self.settings.restart_backoff_initial * 2 ** (service.consecutive_failures - 1),
                    self.settings.restart_backoff_max)
        service.restart_task = asyncio.ensure_future(self._restart_later(service, delay))

    async def _restart_later(self, service: ManagedService, delay: float) -> None:
        await self._note(service, f"restarting in {delay:g}s "
                                  f"(failure {service.consecutive_failures} in a row)")
        await asyncio.sleep(delay)
        async with service.lock:
            service.restart_task = None  # from here on, a stop waits for the lock instead of cancelling
            if service.state != FAILED:
                return
            if service.last_build is not None and not service.last_build.ok:
                await self._note(service, "not restarted: its last build failed")
                return
            try:
                await self._start_locked(service)
            except SupervisorError:
                service.consecutive_failures += 1
                self._schedule_restart(service)
                return
            service.restarts += 1

    @staticmethod
    def _cancel_restart(service: ManagedService) -> None:
        if service.restart_task is not None and service.restart_task is not asyncio.current_task():
            service.restart_task.cancel()
        service.restart_task = None

    def _refuse_failed_build(self, service: ManagedService) -> None:
        """A service whose last build failed would start on what failed to build: refused until
        a build succeeds (a stop is always allowed)."""
        report = service.last_build
        if report is None or report.ok:
            return
        raise SupervisorError(service.spec.id, f"{service.spec.id} is not started: its last build ({report.at}) "
                                               f"failed: {report.error}. Fix the cause, then build it again "
                                               f"(console.sh build {service.spec.id}, or POST "
                                               f"/api/services/{service.spec.id}/build).", "build_failed", status=409)

    async def _build_locked(self, service: ManagedService) -> None:
        spec = service.spec
        if not spec.build:
            await self._note(service, "no build step in the service table: it runs from source")
            return
        previous = service.state
        self._set_state(service, BUILDING)
        await self._note(service, "building: " + ", ".join(item if isinstance(item, str) else " ".join(item)
                                                          for item in spec.build))
        service_log = self.logs.get(spec.id)

        async def notify(step: StepReport) -> None:
            await self._note(service, "build " + step.line())

        report = await run_build(spec, self.build_environment, environ=self.child_environment(),
                                 timeout=self.settings.build_timeout, notify=notify, output=service_log.append)
        service.last_build = report
        await asyncio.get_running_loop().run_in_executor(None, self.build_records.save, report)
        if not report.ok:
            reason = report.error or f"build of {spec.id} failed"
            self._set_state(service, previous if service.alive else FAILED, reason)
            raise SupervisorError(spec.id, reason, "build_failed")
        await self._note(service, "build finished")
        self._set_state(service, previous)

    def terminate_orphans(self) -> list[int]:
        """Blocking: run it in an executor."""
        return terminate_orphans({spec.id for spec in self.specs}, self.data_dir,
                                 exclude=set(self.child_pids()), timeout=self.settings.stop_timeout)


def _has_workers(pid: int) -> bool:
    """Whether the process is the parent of `gateway serve --workers N`. Blocking."""
    try:
        return any("--worker-index" in child.cmdline() for child in psutil.Process(pid).children())
    except psutil.Error:
        return False


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def find_orphans(service_ids: set[str], data_dir: Path,
                 exclude: set[int] = frozenset()) -> list[psutil.Process]:
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


def terminate_orphans(service_ids: set[str], data_dir: Path, exclude: set[int] = frozenset(),
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
