"""The supervisor: runs each service of the service table as a child process
(`python -m gateway serve --service ID`), watches it, and moves it through the states of
spec/console.md.

States reported: `stopped`, `starting` (spawned, health check not passed yet), `running`
(health check passed), `stopping`, `building`, `failed` (exited on its own, or never became
healthy; `lastError` says which). Commands are fixed argument lists from the service table,
never a shell and never anything from a request. Watching a running service (its output, its
exit, a restart after a crash) is in console/watching.py.
"""
from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any, Callable

from gateway.config import PROJECT_ROOT, Config
from gateway.peers import PeerFailed, PeerTimeout
from gateway.services import ServiceSpec

from .build import BuildEnvironment, BuildRecords, StepReport, run_build
from .logstore import LogStore
from .peers import Peers
from .processes import (BUILDING, FAILED, PEER_URL_VARIABLES, RUNNING, STARTING, STOPPED, STOPPING,
                        ManagedService, SupervisorError, SupervisorSettings, UnknownService, build_records_path,
                        child_environment, find_orphans, iso, kill_tree, service_command, terminate_orphans)
from .push import PushHub
from .rolling import rolling_restart, rolls
from .watching import ServiceWatch

# The states, settings and errors of supervised services live in processes.py; named here too,
# where the console's modules and tests have always found them.
__all__ = ["BUILDING", "FAILED", "PEER_URL_VARIABLES", "RUNNING", "STARTING", "STOPPED", "STOPPING",
           "ManagedService", "Supervisor", "SupervisorError", "SupervisorSettings", "UnknownService",
           "build_records_path", "find_orphans", "terminate_orphans"]


# One health check's limit (the service answers its health route without touching anything else).
HEALTH_CHECK_TIMEOUT = PeerTimeout(connect=None, total=2.0)


class Supervisor(ServiceWatch):
    def __init__(self, specs: list[ServiceSpec], data_dir: Path, logs: LogStore, hub: PushHub,
                 settings: SupervisorSettings | None = None, host: str = "127.0.0.1",
                 line_listener: Callable[[str, str], object] | None = None,
                 build_environment: BuildEnvironment | None = None, peer_urls: dict[str, str] | None = None,
                 peers: Peers | None = None):
        self.specs = list(specs)
        # How the health checks reach each service: the console's peer transport, which finds it
        # where its peers do (its *_URL variable, else its table port). Built bare (tests), one of
        # its own over the table alone, opened and closed with the supervisor.
        self._own_peers = peers is None
        self.peers = peers or Peers(self.specs, Config({}))
        # Where each service's peers find it, by service id, when no `*_URL` variable says
        # (`gateway.peer_location.service_url`: a `[peers]` setting of the configuration, else the table).
        self.peer_urls = dict(peer_urls or {})
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

    # ------------------------------------------------------------ lifecycle of the supervisor

    async def open(self) -> None:
        if self._own_peers:
            await self.peers.open()
        records = await asyncio.get_running_loop().run_in_executor(None, self.build_records.load)
        for service_id, report in records.items():
            if service_id in self._services:
                self._services[service_id].last_build = report

    async def close(self) -> None:
        """Stop every service: the console never leaves children behind when it stops."""
        for service in self._services.values():
            self._cancel_restart(service)
        await self.stop_all()
        if self._own_peers:
            await self.peers.close()

    # ------------------------------------------------------------ reading state

    def service(self, service_id: str) -> ManagedService:
        try:
            return self._services[service_id]
        except KeyError:
            raise UnknownService(service_id) from None

    def health_url(self, spec: ServiceSpec) -> str:
        return self.peers.peer_url(spec.id) + spec.health

    def status(self, service_id: str) -> dict[str, Any]:
        service = self.service(service_id)
        spec = service.spec
        return {
            "id": spec.id, "name": spec.name, "port": spec.port, "status": service.state,
            "running": service.state == RUNNING,
            "pid": service.process.pid if service.alive and service.process is not None else None,
            "uptime": service.uptime(), "startedAt": iso(service.started_at) if service.alive else None,
            "exitCode": service.exit_code, "lastError": service.last_error, "restarts": service.restarts,
            "depends": list(spec.depends), "healthUrl": self.health_url(spec),
            "rolling": rolls(spec),
            "build": service.last_build.public() if service.last_build is not None else None,
        }

    def statuses(self) -> list[dict[str, Any]]:
        return [self.status(spec.id) for spec in self.specs]

    def child_pids(self) -> list[int]:
        return [s.process.pid for s in self._services.values() if s.alive and s.process is not None]

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
        """Replace the service's processes one at a time (console/rolling.py)."""
        service = self.service(service_id)
        async with service.lock:
            self._cancel_restart(service)
            await rolling_restart(self, service)
        return self.status(service_id)

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

    def child_environment(self) -> dict[str, str]:
        return child_environment(self.specs, self.data_dir, self.peer_urls)

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
                assert service.process is not None  # _start_locked started it before asking
                raise SupervisorError(spec.id, f"{spec.id} exited with code {service.process.returncode} "
                                               f"before its health check passed; see its log")
            try:
                health = self.peers.client(spec.id, credential=False)
                answer = await health.request("GET", spec.health, timeout=HEALTH_CHECK_TIMEOUT)
                if answer.status == 200:
                    return
                last = f"HTTP {answer.status}"
            except PeerFailed as failure:
                last = str(failure).rstrip(".")
            if time.monotonic() >= deadline:
                raise SupervisorError(spec.id, f"{spec.id}: health check {url} did not pass within "
                                               f"{timeout:g}s (last: {last})",
                                      "health_check_failed")
            assert service.monitor_task is not None  # set with the process
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
        monitor = service.monitor_task
        assert monitor is not None  # set with the process, which runs
        done, _ = await asyncio.wait([monitor], timeout=self.settings.stop_timeout)
        if not done:
            await self._note(service, f"pid {process.pid} did not stop within "
                                      f"{self.settings.stop_timeout:g}s; killing it (SIGKILL)")
            kill_tree(process.pid)
            await monitor

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
