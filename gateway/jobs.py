"""Background jobs, the one way: what runs beside a service's requests for as long as it runs.

- A declared job (`registrar.job(name, factory)`): one coroutine per service, started by the core
  once the lifespans have run and cancelled as the service begins to stop (gateway/app.py).
- A job group (`registrar.job_group(name)`): loops the plugin starts and stops as items come and
  go (a poller per bot, a connection per MCP server, a re-index when the model changed). Declared
  once, so `gateway plugins` lists it; whatever of it still runs is cancelled by the core with the
  declared jobs.

Both run inside `run_logged`, the one place a failed job is logged (once, not restarted)."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Coroutine, Iterable

log = logging.getLogger("gateway.jobs")

Work = Coroutine[Any, Any, None]


async def run_logged(name: str, work: Awaitable[object], *, redact: bool = False,
                     stopping: Callable[[], bool] | None = None) -> None:
    """Run `work`, logging its failure once under `name`. `redact`: the exception's type only,
    without its text or traceback (a URL in it may carry a secret, a bot's token). `stopping`:
    true once the job was asked to stop, when a cancellation caught as an error (inside a
    database call, a connect) is no failure."""
    started = time.monotonic()
    try:
        await work
    except asyncio.CancelledError:
        raise
    except Exception as error:
        elapsed = time.monotonic() - started
        if stopping is not None and stopping():
            log.debug("background job %s ended with %s as it stopped", name, type(error).__name__)
        elif redact:
            log.error("background job %s failed after %.1fs: %s", name, elapsed, type(error).__name__)
        else:
            log.exception("background job %s failed after %.1fs", name, elapsed)


async def cancel_all(tasks: Iterable[asyncio.Task], patience: float = 5.0) -> None:
    """Cancels `tasks` and waits for them, cancelling again while one runs on: a cancellation
    that lands as a timeout or a connection error is caught by the code it interrupts, and the
    task would then run on (and the service never stop). Bounded by `patience` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    pending = {task for task in tasks if not task.done()}
    while pending and loop.time() < deadline:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.5)
    if pending:
        log.warning("%d background task(s) did not stop within %g s: %s", len(pending), patience,
                    ", ".join(sorted(task.get_name() for task in pending)))


class JobGroup:
    """One plugin's loops of one kind, one per item (`key`), started and stopped as items come
    and go; each runs in `run_logged` as `<plugin>.<group>[<key>]`."""

    def __init__(self, name: str, *, redact: bool = False):
        self.name, self.redact = name, redact
        self._running: dict[str, asyncio.Task] = {}
        self._stopping: set[asyncio.Task] = set()

    def start(self, key: str, work: Work, patience: float = 5.0) -> asyncio.Task:
        """Run `work` for `key`; callable from sync code. One still running for `key` (two
        changes of one item that raced) is cancelled and the newest start wins, but its loop
        begins only once the old one has ended (waited for as `stop` does, at most `patience`
        seconds): two pollers of one bot token at once get 409 Conflict from Telegram."""
        previous = self._running.get(key)
        if previous is not None and not previous.done():
            self._stopping.add(previous)
            previous.cancel()
            work = self._after(previous, work, patience)
        name = f"{self.name}[{key}]"
        task: asyncio.Task | None = None
        task = asyncio.create_task(run_logged(name, work, redact=self.redact,
                                              stopping=lambda: task in self._stopping), name=name)
        self._running[key] = task
        task.add_done_callback(lambda done: self._forget(key, done))
        return task

    @staticmethod
    async def _after(previous: asyncio.Task, work: Work, patience: float) -> None:
        """`work`, once `previous` (the loop it replaces, cancelled by `start`) has ended or
        `patience` ran out. Not cancelled again at once: that would cut short its closing."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience
        try:
            await asyncio.wait([previous], timeout=min(patience, 0.5))
            if not previous.done():
                await cancel_all([previous], max(0.0, deadline - loop.time()))
        except BaseException:
            work.close()  # never started: no "never awaited" warning
            raise
        if not previous.done():
            log.warning("%s still runs after %g s; its replacement starts anyway", previous.get_name(), patience)
        await work

    def _forget(self, key: str, task: asyncio.Task) -> None:
        self._stopping.discard(task)
        if self._running.get(key) is task:
            del self._running[key]

    def running(self) -> list[str]:
        """The keys whose loop runs now."""
        return sorted(key for key, task in self._running.items() if not task.done())

    async def stop(self, key: str, patience: float = 5.0) -> None:
        """Cancel the loop of `key` and wait for it to end (cancelling again while it runs on,
        as `cancel_all` does, for at most `patience` seconds), and any loop of `key` that a newer
        start replaced and that still runs; none running is no error."""
        name = f"{self.name}[{key}]"
        tasks = {task for task in self._stopping if task.get_name() == name}  # replaced, still ending
        task = self._running.get(key)
        if task is not None:
            self._stopping.add(task)
            tasks.add(task)
        await cancel_all(tasks, patience)

    async def close(self, patience: float = 5.0) -> None:
        """Stop every loop of the group (the core does, as the service stops), those a newer
        start of their key replaced and that still run among them."""
        tasks = {*self._running.values(), *self._stopping}
        self._stopping.update(tasks)
        await cancel_all(tasks, patience)
