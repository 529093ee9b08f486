"""The supervisor's watch over a running service: its output into its log, to the console's
push socket and to a line listener; its exit noticed; a restart after an unexpected exit, with
backoff. `Supervisor` (console/supervisor.py) derives from `ServiceWatch`; what the watch asks
of it (its state changes, a start) is declared here."""
from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
import time
from datetime import datetime, timezone
from typing import Callable

from .logstore import LogStore
from .processes import FAILED, STARTING, STOPPED, ManagedService, SupervisorError, SupervisorSettings
from .push import PushHub

log = logging.getLogger("console.supervisor")


class ServiceWatch(ABC):
    logs: LogStore
    hub: PushHub
    settings: SupervisorSettings
    # Called with (service id, line) for each line a service writes.
    line_listener: Callable[[str, str], object] | None

    @abstractmethod
    def _set_state(self, service: ManagedService, state: str, error: str | None = None) -> None:
        """The supervisor's: it publishes the service's whole status."""

    @abstractmethod
    async def _start_locked(self, service: ManagedService) -> None:
        """The supervisor's: a start under the service's lock."""

    async def _note(self, service: ManagedService, text: str) -> None:
        """A line of the console's own in the service's log, so the log tells the whole story."""
        line = f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} [console] {text}"
        await self.logs.get(service.spec.id).append((line + "\n").encode())
        self.hub.publish({"type": "log", "service": service.spec.id, "line": line, "source": "console"})

    async def _read_output(self, service: ManagedService, process: asyncio.subprocess.Process) -> None:
        service_log = self.logs.get(service.spec.id)
        pending = b""
        assert process.stdout is not None  # every service starts with stdout=PIPE
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
        assert reader is not None  # set before the monitor starts
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
