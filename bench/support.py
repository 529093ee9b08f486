"""What the benchmarks share: loopback ports, waiting for a server they started, a scratch
database on a PostgreSQL they were pointed at (created, then dropped with everything in it),
an older revision checked out beside this one for the side-by-side `--base` runs, and the
percentile every latency table reports."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit, urlunsplit


ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """`revision` checked out into a temporary git worktree, removed on leaving."""
    path = Path(tempfile.mkdtemp(prefix="bench-base-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(path), revision], cwd=ROOT, check=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)
        shutil.rmtree(path.parent, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(url: str, process: subprocess.Popen, seconds: float, headers: dict | None = None) -> None:
    """Until `url` answers; stops the run with the tail of the process's log (its `log_path`,
    when set) if the process exits first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = getattr(process, "log_path", None)
            tail = Path(log).read_text(errors="replace")[-3000:] if log else ""
            raise SystemExit(f"{process.args} exited with {process.returncode} while starting\n{tail}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=2):
                return
        except Exception:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer within {seconds:g}s")


def _admin(url: str, statement: str) -> None:
    import psycopg2

    connection = psycopg2.connect(url)
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(statement)
    connection.close()


def scratch_database(admin_url: str, prefix: str) -> str:
    """A new empty database `<prefix>_<random>` on the server of `admin_url`; its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(admin_url)._replace(path="/" + name))


def drop_database(url: str, admin_url: str) -> None:
    _admin(admin_url, f'DROP DATABASE IF EXISTS "{urlsplit(url).path.lstrip("/")}" WITH (FORCE)')


@contextlib.contextmanager
def database_server(prefix: str) -> Iterator[str]:
    """The admin URL of DATABASE_URL's server, else of an embedded PostgreSQL started in a
    temporary directory `<prefix>-pg-*` and stopped on leaving: a bench runs on any machine."""
    admin_url = os.environ.get("DATABASE_URL", "")
    if admin_url:
        yield admin_url
        return
    sys.path.insert(0, str(ROOT))
    from gateway.embedded_database import start_embedded

    admin_url, embedded = start_embedded(Path(tempfile.mkdtemp(prefix=f"{prefix}-pg-")))
    try:
        yield admin_url
    finally:
        embedded.cleanup()


@contextlib.contextmanager
def scratch(admin_url: str, prefix: str) -> Iterator[str]:
    """A scratch database (`scratch_database`), dropped with everything in it on leaving."""
    database_url = scratch_database(admin_url, prefix)
    try:
        yield database_url
    finally:
        drop_database(database_url, admin_url)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank `q`th percentile (0 to 100) of `values`; NaN when there are none, so that
    a kind that never succeeded still has its row."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


class LoggedProcesses:
    """The processes a bench starts, each with its output in `<log_dir>/<name>.log` (which
    `wait_until_up` shows when one exits while starting), stopped in reverse order at the end."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.started: list[subprocess.Popen] = []

    def start(self, name: str, *args: str, environ: dict | None = None, root: Path = ROOT) -> subprocess.Popen:
        """`root`: the checkout whose code the process runs (`--base` starts another's)."""
        log = open(self.log_dir / f"{name}.log", "wb")
        process = subprocess.Popen(list(args), stdout=log, stderr=subprocess.STDOUT, cwd=root,
                                   env={**os.environ, **(environ or {})})
        process.log_path = str(self.log_dir / f"{name}.log")  # type: ignore[attr-defined]
        self.started.append(process)
        return process

    def stop_all(self) -> None:
        for process in reversed(self.started):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
