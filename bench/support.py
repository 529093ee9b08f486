"""What the benchmarks share: loopback ports, waiting for a server they started, a scratch
database on a PostgreSQL they were pointed at (created, then dropped with everything in it), and
an older revision checked out beside this one for the side-by-side `--base` runs."""
from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
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
