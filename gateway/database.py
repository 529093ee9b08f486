"""PostgreSQL: the pool and the statement helpers plugins use. `DATABASE_URL` when set, otherwise
an embedded server in DATA_DIR started on demand (embedded_database.py); plugins' tables come
from their migration files (migrations.py).

A server that cannot be reached is told apart from a statement that failed (`unavailable`):
the error middleware answers the first 503 `database_unavailable`. The pool drops connections
the server closed (aiopg watches each idle connection's socket), so services reconnect by
themselves once the server answers again."""
from __future__ import annotations

import asyncio
import contextlib
import select
import time
from typing import Any, AsyncIterator, Sequence
from urllib.parse import urlsplit, urlunsplit

import aiopg
import psycopg2
import psycopg2.extras

from .config import Config
from .embedded_database import start_embedded
from .text import dumps_text


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



def drop_connections(db: aiopg.Pool) -> None:
    """Close every connection of `db`, idle or in use, when the server they lead to died: a
    statement waiting on one fails now (aiopg fails its waiter) instead of at the pool's timeout,
    which is what happens when uvloop misses the closing of a dead server's socket. The pool
    forgets closed connections and opens new ones. (aiopg keeps in-use ones in `_used` only.)"""
    for connection in [*db._free, *db._used]:
        connection.close()


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def named_in(url: str) -> bool:
    """Whether the URL (or key=value connection string) sets its own application_name."""
    try:
        return bool(psycopg2.extensions.parse_dsn(url).get("application_name"))
    except psycopg2.ProgrammingError:
        return False  # psycopg2.connect says what is wrong with it


async def resolve_database_url(config: Config) -> tuple[str, Any]:
    url = config.settings.database.url
    if url:
        return url, None
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(None, start_embedded, config.data_dir)
    except Exception as error:
        raise DatabaseError(f"the embedded PostgreSQL in {config.data_dir / 'postgres'} did not start: "
                            f"{error}. Set DATABASE_URL to use another server.") from error


async def create_pool(url: str, minsize: int = 1, maxsize: int = 10, timeout: float = 10.0,
                      application_name: str | None = None, idle_seconds: float = 0.0) -> aiopg.Pool:
    """The pool; its connections name themselves `application_name` (the service id) to the
    server, as pg_stat_activity shows them, unless the URL names one itself. `idle_seconds`:
    connections beyond `minsize` idle that long are closed (0: kept, aiopg's own way)."""
    named = application_name and not named_in(url)
    names: dict[str, Any] = {"application_name": application_name} if named else {}
    try:  # aiopg hands the keywords it does not know to psycopg2.connect, where they override the URL's
        pool = await aiopg.create_pool(url, minsize=minsize, maxsize=maxsize, timeout=timeout, **names)
    except (psycopg2.OperationalError, OSError, asyncio.TimeoutError) as error:
        raise DatabaseError(f"cannot connect to PostgreSQL at {redact(url)}: {error}".strip()) from error
    if idle_seconds > 0:
        _close_idle_every(pool, idle_seconds)
    return pool


# aiopg opens connections up to `maxsize` to meet concurrent statements and keeps them all for the
# pool's life: a burst at minute 22 of a soak left each gateway worker two more for good. A pool
# that returns to `minsize` once the burst is over keeps the server's connections to what the
# load needs. Each connection is stamped when put back (pooled_connection); the sweep closes those
# idle in the pool longer than `idle_seconds` beyond `minsize`, least recently used first.
IDLE_SINCE = "gateway_idle_since"


def _close_idle_every(db: aiopg.Pool, idle_seconds: float) -> None:
    loop = asyncio.get_running_loop()

    def sweep() -> None:
        if db.closed or db._closing:
            return
        close_idle(db, idle_seconds, time.monotonic())
        loop.call_later(idle_seconds / 2, sweep)

    loop.call_later(idle_seconds / 2, sweep)


def close_idle(db: aiopg.Pool, idle_seconds: float, now: float) -> int:
    """Close the idle connections beyond `minsize` unused since `now - idle_seconds`; how many.
    Not while aiopg is filling or reshuffling the idle ones (its lock held), nor while a
    statement waits for a connection."""
    try:
        free, condition = db._free, db._cond
        if condition.locked() or condition._waiters:
            return 0
    except AttributeError:  # aiopg keeps that state under other names: keep every connection
        return 0
    excess = db.size - db.minsize
    closed = 0
    for connection in list(free):  # the least recently used on the left (both ways of taking one)
        if excess - closed <= 0:
            break
        since = connection.__dict__.setdefault(IDLE_SINCE, now)  # put back by aiopg's release: seen now
        if now - since >= idle_seconds:
            free.remove(connection)
            _forget_cursor(connection)
            connection.close()
            closed += 1
    return closed


# ---------------------------------------------------------------- queries

@contextlib.asynccontextmanager
async def pooled_connection(db: aiopg.Pool) -> AsyncIterator[Any]:
    """A pooled connection for the statements of one helper, the server still at its other end.
    aiopg's timeout (asyncio's TimeoutError, which says nothing of where it came from) becomes
    a DatabaseTimeout."""
    try:
        connection = _take_idle(db)  # the usual case; else aiopg's acquire
        for _ in range((db.maxsize or 10) + 1):  # every pooled connection, then one new
            if connection is None:
                connection = await _acquire(db)
            if not _closed_by_server(connection):
                break
            connection.close()  # the pool forgets a closed connection and opens a new one
            await db.release(connection)
            connection = None
        else:
            raise psycopg2.OperationalError("every pooled connection was closed by the server")
        answered = False
        try:
            yield connection
            answered = True
        finally:
            connection.__dict__[IDLE_SINCE] = time.monotonic()
            if answered:  # what a statement waiting for a connection takes for the server answering
                db.__dict__[RETURNED] = db.__dict__.get(RETURNED, 0) + 1
            if not _put_back(db, connection):
                await db.release(connection)
    except asyncio.TimeoutError as error:
        raise DatabaseTimeout(f"PostgreSQL did not answer within {db.timeout:g}s") from error


# aiopg's timeout bounds the wait for a connection as well as a statement. A burst of statements
# (a thousand chat turns at once on a small, loaded machine) waited more than that behind the
# pool's busy connections and failed as "did not answer" while the server answered every
# statement. So the wait goes on while connections keep coming back from statements that ran (not
# from failed ones: a server gone fails them), a timeout's worth at a time, up to
# BUSY_POOL_TIMEOUTS of them; a timeout in which none came back is the server not answering, as
# before.
RETURNED = "gateway_connections_returned"
BUSY_POOL_TIMEOUTS = 6


async def _acquire(db: aiopg.Pool) -> Any:
    timeouts = 0
    while True:
        returned = db.__dict__.get(RETURNED, 0)
        try:
            return await db.acquire()
        except asyncio.TimeoutError as error:
            timeouts += 1
            if timeouts == BUSY_POOL_TIMEOUTS:
                raise DatabaseTimeout(f"every one of PostgreSQL's {db.maxsize} pooled connections stayed busy for "
                                      f"{BUSY_POOL_TIMEOUTS * db.timeout:g}s: more statements at once than this "
                                      "machine answers; raise [database] pool_max or lower the load") from error
            if db.__dict__.get(RETURNED, 0) == returned:
                raise


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
    async with pooled_connection(db) as connection:
        cursor = await _executed(connection, sql, params)
        rows = await cursor.fetchall()
        names = [column.name for column in cursor.description]
        _fetched(connection, cursor)
        return [dict(zip(names, row)) for row in rows]


async def fetch_one(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> dict | None:
    async with pooled_connection(db) as connection:
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
    async with pooled_connection(db) as connection:
        cursor = await _executed(connection, sql, params)
        row = await cursor.fetchone()
        _fetched(connection, cursor)
        return row[0] if row is not None else None


async def execute(db: aiopg.Pool, sql: str, params: Sequence | dict = ()) -> int:
    """Run one statement; return the number of rows it touched."""
    async with pooled_connection(db) as connection:
        touched: int = (await _executed(connection, sql, params)).rowcount
        return touched


@contextlib.asynccontextmanager
async def transaction(db: aiopg.Pool) -> AsyncIterator[Any]:
    """A cursor (rows as dicts) inside one transaction: committed on success, rolled back on error."""
    async with pooled_connection(db) as connection:
        async with connection.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cursor:
            async with in_transaction(connection, cursor):
                yield cursor


@contextlib.asynccontextmanager
async def in_transaction(connection: aiopg.Connection, cursor: aiopg.Cursor) -> AsyncIterator[None]:
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

