import asyncio
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import psycopg2
import pytest

from gateway.app import create_app
from gateway.context import get_context
from gateway.database import (BUSY_POOL_TIMEOUTS, KEPT_CURSOR, DatabaseError, DatabaseTimeout, _put_back, _take_idle,
                              close_idle, create_pool, execute, fetch_all, fetch_value, json_rows, pooled_connection,
                              transaction, unavailable)
from gateway.embedded_database import embedded_status, restart_embedded
from gateway.migrations import apply_migrations, migration_files
from tests.core.sample_plugin import SamplePlugin


async def test_migrations_apply_once_and_are_recorded(database_url):
    plans = [("sample", migration_files("tests.core.sample_plugin", "migrations"))]
    pool = await create_pool(database_url)
    try:
        assert await apply_migrations(pool, plans) == ["sample/001_create_notes", "sample/002_add_created"]
        assert await apply_migrations(pool, plans) == []  # the second run changes nothing
        rows = await fetch_all(pool, "SELECT plugin, version, name FROM schema_migrations ORDER BY version")
        assert rows == [{"plugin": "sample", "version": 1, "name": "create_notes"},
                        {"plugin": "sample", "version": 2, "name": "add_created"}]
    finally:
        pool.close()
        await pool.wait_closed()


async def test_two_services_starting_on_one_database_migrate_it_once(aiohttp_client, config):
    first = await aiohttp_client(create_app("one", config, plugins=[SamplePlugin()]))
    second = await aiohttp_client(create_app("two", config, plugins=[SamplePlugin()]))
    await first.post("/api/v1/notes", json={"text": "kept"})
    notes = await (await second.get("/api/v1/notes")).json()
    assert [n["text"] for n in notes["notes"]] == ["kept"]


async def test_a_failing_migration_is_rolled_back_and_named(database_url, tmp_path):
    pool = await create_pool(database_url)
    try:
        bad = [("broken", [(1, "good", "CREATE TABLE broken_a (id int);"),
                           (2, "bad", "CREATE TABLE broken_b (id int); SELECT no_such_function();")])]
        with pytest.raises(DatabaseError, match="broken/002_bad failed .*002_bad.sql of the plugin .broken.*stay at 001.*no_such_function"):
            await apply_migrations(pool, bad)
        assert await fetch_value(pool, "SELECT to_regclass('broken_b') IS NULL") is True
        assert await fetch_value(pool, "SELECT count(*) FROM schema_migrations WHERE plugin = 'broken'") == 1
    finally:
        pool.close()
        await pool.wait_closed()


async def test_transaction_rolls_back_on_error(database_url):
    pool = await create_pool(database_url)
    try:
        async with transaction(pool) as cursor:
            await cursor.execute("CREATE TABLE counted (n int)")
        with pytest.raises(RuntimeError):
            async with transaction(pool) as cursor:
                await cursor.execute("INSERT INTO counted VALUES (1)")
                raise RuntimeError("abandon")
        assert await fetch_value(pool, "SELECT count(*) FROM counted") == 0
    finally:
        pool.close()
        await pool.wait_closed()


async def test_json_rows_reach_the_database_as_sent_with_their_places(database_url):
    """The one parameter of a batch: every text as it was (quotes, backslashes, a percent sign
    psycopg2 would read as a placeholder in the statement, other scripts), nulls as NULL."""
    texts = ["it's \\ \"quoted\"", "100% %s %(x)s", "会话 🙂", "line\nbreak", ""]
    rows = [{"text": text, "note": None if index % 2 else {"n": index}} for index, text in enumerate(texts)]
    pool = await create_pool(database_url)
    try:
        read = await fetch_all(pool, "SELECT batch_index, text, note FROM json_to_recordset(%s::json) "
                                     "AS given (batch_index int, text text, note jsonb) ORDER BY batch_index",
                               (json_rows(rows),))
    finally:
        pool.close()
        await pool.wait_closed()
    assert read == [{"batch_index": index, **row} for index, row in enumerate(rows)]


async def test_unreachable_database_is_a_clear_error():
    with pytest.raises(DatabaseError, match="cannot connect to PostgreSQL at postgresql://u:\\*\\*\\*@127.0.0.1:1/x"):
        await create_pool("postgresql://u:secret@127.0.0.1:1/x", timeout=3)


async def test_embedded_database_starts_when_no_database_url_is_given(aiohttp_client, make_config, tmp_path):
    config = make_config({"database.url": ""})
    plugin = SamplePlugin()
    client = await aiohttp_client(create_app("embedded", config, plugins=[plugin]))
    assert (tmp_path / "data" / "postgres" / "PG_VERSION").exists()
    assert (await client.post("/api/v1/notes", json={"text": "in the embedded server"})).status == 201
    context = get_context(client.app)
    url = context.embedded_database.get_uri("assistant")
    connection = psycopg2.connect(url)
    with connection.cursor() as cursor:
        cursor.execute("SELECT text FROM sample_notes")
        assert cursor.fetchall() == [("in the embedded server",)]
    connection.close()
    await client.close()
    context.embedded_database.cleanup()  # this test's server; services stop theirs at exit


def test_gateway_migrate_command_applies_installed_plugins_migrations_once(database_url, tmp_path):
    import shutil

    from click.testing import CliRunner

    from gateway.cli import main as gateway_cli
    from gateway.config import conf_dir

    conf = tmp_path / "conf"
    conf.mkdir()
    shutil.copy(conf_dir() / "default.toml", conf / "default.toml")
    (conf / "services.toml").write_text('[[service]]\nid = "accounts"\nport = 1\n'
                                        'plugins = ["auth_tokens", "auth"]\n')
    env = {"GATEWAY_CONF_DIR": str(conf), "DATABASE_URL": database_url, "DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    first = runner.invoke(gateway_cli, ["migrate", "--service", "accounts"], env=env)
    assert first.exit_code == 0, first.output
    assert "applied auth/001_" in first.output
    second = runner.invoke(gateway_cli, ["migrate"], env=env)
    assert second.exit_code == 0 and "nothing to apply" in second.output, second.output
    unknown = runner.invoke(gateway_cli, ["migrate", "--service", "nope"], env=env)
    assert unknown.exit_code != 0 and "unknown service" in unknown.output


# ---------------------------------------------------------------- outages

async def test_a_database_that_refuses_connections_answers_503_and_is_used_again_when_it_returns(
        aiohttp_client, config, database_url, postgres_server):
    """Not a 500: 503 `database_unavailable` with a hint and Retry-After, while the server
    refuses connections and the pooled ones are gone; answered again once it accepts them."""
    client = await aiohttp_client(create_app("outage", config, plugins=[SamplePlugin()]))
    assert (await client.post("/api/v1/notes", json={"text": "kept"})).status == 201
    name = urlsplit(database_url).path.lstrip("/")
    admin = psycopg2.connect(postgres_server.url)
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                           " WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
        for request in (client.get("/api/v1/notes"), client.post("/api/v1/notes", json={"text": "lost"})):
            answer = await request
            assert answer.status == 503
            body = await answer.json()
            assert body["errorType"] == "database_unavailable" and body["hint"]
            assert answer.headers["Retry-After"] == "5"
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.close()
    answer = await client.get("/api/v1/notes")
    assert answer.status == 200
    assert [note["text"] for note in (await answer.json())["notes"]] == ["kept"]


async def test_a_statement_that_fails_is_not_taken_for_an_outage(database_url):
    pool = await create_pool(database_url)
    try:
        with pytest.raises(psycopg2.Error) as division:
            await fetch_value(pool, "SELECT 1 / 0")
        assert not unavailable(division.value)
        with pytest.raises(psycopg2.Error) as locked:  # an OperationalError, but the server answers
            await execute(pool, "CREATE TABLE contended (x integer)")
            async with transaction(pool) as cursor:
                await cursor.execute("LOCK TABLE contended IN ACCESS EXCLUSIVE MODE")
                async with transaction(pool) as other:
                    await other.execute("LOCK TABLE contended IN ACCESS EXCLUSIVE MODE NOWAIT")
        assert isinstance(locked.value, psycopg2.OperationalError) and not unavailable(locked.value)
        assert await fetch_value(pool, "SELECT 1") == 1
    finally:
        pool.close()
        await pool.wait_closed()


async def test_pooled_connections_are_handed_on_to_waiters_and_dropped_when_unusable(database_url):
    """The helpers check a connection out and in directly when one is idle and nobody waits
    (gateway.database._take_idle): a task waiting in aiopg's acquire must still get each one
    back, a connection the server closed is replaced, and one left inside a transaction is dropped
    rather than lent out again."""
    pool = await create_pool(database_url, maxsize=2, timeout=5)
    try:
        # 20 statements through a pool of 2: most of them wait for a connection the others return.
        started = asyncio.get_running_loop().time()
        assert await asyncio.gather(*(fetch_value(pool, "SELECT %s::int FROM pg_sleep(0.02)", (n,))
                                      for n in range(20))) == list(range(20))
        assert asyncio.get_running_loop().time() - started < 4  # none waited out the pool's timeout
        assert pool.size <= 2 and len(pool._used) == 0 and pool.freesize == pool.size

        # A connection the server ended is noticed at checkout and another one is opened.
        pid = await fetch_value(pool, "SELECT pg_backend_pid()")
        await fetch_value(pool, "SELECT pg_terminate_backend(%s) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
                                " AND pid = %s", (pid, pid))
        await asyncio.sleep(0.2)
        assert {await fetch_value(pool, "SELECT 1") for _ in range(3)} == {1}

        # A connection that comes back in the middle of a transaction is closed, not lent out again.
        with pytest.warns(ResourceWarning):  # aiopg's release says so
            async with pooled_connection(pool) as connection:
                async with connection.cursor() as cursor:
                    await cursor.execute("BEGIN")
        assert connection.closed
        assert await fetch_value(pool, "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' "
                                       "AND datname = current_database()") == 0
    finally:
        pool.close()
        await pool.wait_closed()


async def test_statements_reuse_their_connections_cursor_and_leave_no_garbage_cycles(database_url):
    """A pooled connection keeps one cursor for its statements (aiopg's cursor per statement was
    a reference cycle for the garbage collector), but not after a failure, a cancelled
    statement or a result of many rows; each time the next statement still runs."""
    import gc

    pool = await create_pool(database_url, maxsize=1)
    try:
        await fetch_value(pool, "SELECT 1")
        gc.collect()
        gc.disable()
        try:
            for n in range(50):
                assert await fetch_value(pool, "SELECT %s::int", (n,)) == n
                assert await fetch_all(pool, "SELECT %s::int AS n", (n,)) == [{"n": n}]
                assert await execute(pool, "SELECT 1") == 1
            assert gc.collect() < 100  # aiopg's cursors: six objects a statement, 900 here
        finally:
            gc.enable()
        with pytest.raises(psycopg2.Error):
            await fetch_value(pool, "SELECT 1 / 0")
        assert await fetch_value(pool, "SELECT 2") == 2
        statement = asyncio.create_task(fetch_value(pool, "SELECT pg_sleep(5)"))
        await asyncio.sleep(0.2)
        statement.cancel()
        with pytest.raises(asyncio.CancelledError):
            await statement
        assert await fetch_value(pool, "SELECT 3") == 3
        async with pooled_connection(pool) as connection:
            assert KEPT_CURSOR in connection.__dict__
        assert len(await fetch_all(pool, "SELECT generate_series(1, 150) AS n")) == 150
        async with pooled_connection(pool) as connection:  # its result is not held while the connection waits
            assert KEPT_CURSOR not in connection.__dict__
        assert await fetch_all(pool, "SELECT 4 AS n") == [{"n": 4}]
    finally:
        pool.close()
        await pool.wait_closed()


def test_the_direct_checkout_leaves_a_pool_it_does_not_know_to_aiopg():
    """Another aiopg (or asyncio) may keep the pool's state under other names: then every
    checkout goes through aiopg's own acquire and release, none fails."""
    unknown = SimpleNamespace(_free=[object()], _closing=False, _recycle=-1)  # no _cond
    assert _take_idle(unknown) is None  # type: ignore[arg-type]
    assert _put_back(unknown, SimpleNamespace(closed=False)) is False  # type: ignore[arg-type]


@pytest.mark.slow
async def test_an_embedded_server_killed_is_started_again_by_the_service_using_it(aiohttp_client, make_config):
    """kill -9 of the embedded postmaster: requests answer 503 meanwhile (never 500), the
    service's watchdog starts the server again, and what was committed is there."""
    data_dir = Path(tempfile.mkdtemp(prefix="gateway-test-embedded-"))  # reachable by the server's user when root
    client = await aiohttp_client(create_app("embedded", make_config({"core.data_dir": str(data_dir),
                                                                      "database.url": ""}),
                                             plugins=[SamplePlugin()]))
    server = get_context(client.app).embedded_database
    try:
        assert (await client.post("/api/v1/notes", json={"text": "committed"})).status == 201
        killed = embedded_status(data_dir)["pid"]
        os.kill(killed, signal.SIGKILL)
        statuses = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while loop.time() < deadline:
            answer = await client.get("/api/v1/notes")
            statuses.append(answer.status)
            if answer.status == 503:
                assert (await answer.json())["errorType"] == "database_unavailable"
            elif answer.status == 200 and 503 in statuses:
                break
            await asyncio.sleep(0.05)
        assert set(statuses) <= {200, 503} and statuses[-1] == 200 and 503 in statuses, statuses
        assert embedded_status(data_dir)["running"] and embedded_status(data_dir)["pid"] != killed
        assert [note["text"] for note in (await answer.json())["notes"]] == ["committed"]
        assert (await client.post("/api/v1/notes", json={"text": "after"})).status == 201
    finally:
        await client.close()
        await loop.run_in_executor(None, restart_embedded, server)  # a failed test may leave it dead
        await loop.run_in_executor(None, server.cleanup)
        shutil.rmtree(data_dir, ignore_errors=True)


async def test_a_pools_connections_carry_the_service_name_unless_the_url_names_one(database_url):
    """pg_stat_activity tells the services apart (an operator's view; the soak counts each one's
    connections there); an application_name the URL sets itself still wins."""
    separator = "&" if "?" in database_url else "?"
    for url, expected in [(database_url, "iot-debug-service"),
                          (f"{database_url}{separator}application_name=operator-chose", "operator-chose")]:
        pool = await create_pool(url, minsize=2, application_name="iot-debug-service")
        try:
            names = await fetch_all(pool, "SELECT application_name FROM pg_stat_activity "
                                          "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            assert [row["application_name"] for row in names] == [expected]  # the other pooled one
            assert await fetch_value(pool, "SHOW application_name") == expected
        finally:
            pool.close()
            await pool.wait_closed()


async def test_a_pool_grown_by_a_burst_returns_to_its_minimum_once_idle(database_url):
    """aiopg keeps every connection a burst opened (a soak's gateway kept two more for good):
    those beyond pool_min idle for `idle_seconds` are closed at the server, least recently used
    first, and the pool opens new ones for the next burst."""
    pool = await create_pool(database_url, minsize=1, maxsize=5, application_name="burst-test", idle_seconds=0.4)

    async def at_server() -> int:
        return await fetch_value(pool, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'burst-test'")

    async def burst() -> None:
        await asyncio.gather(*(fetch_value(pool, "SELECT pg_sleep(0.2)") for _ in range(5)))

    try:
        await burst()
        assert pool.size == 5 and await at_server() == 5
        assert close_idle(pool, 0.4, time.monotonic()) == 0  # just used: kept
        await asyncio.sleep(1.0)  # the sweep runs every idle_seconds / 2
        assert pool.size == 1 and await at_server() == 1
        await burst()  # the pool grows again, and works
        assert pool.size == 5 and await fetch_value(pool, "SELECT 1") == 1
    finally:
        pool.close()
        await pool.wait_closed()


async def test_connections_in_use_and_the_minimum_are_never_closed_as_idle(database_url):
    pool = await create_pool(database_url, minsize=2, maxsize=4)  # no sweep: close_idle called here
    try:
        async with pooled_connection(pool):
            async with pooled_connection(pool):
                async with pooled_connection(pool):
                    async with pooled_connection(pool):
                        pass
        assert pool.size == 4
        async with pooled_connection(pool) as busy:
            assert close_idle(pool, 10, time.monotonic() + 60) == 2  # down to the minimum, the busy one kept
            assert pool.size == 2 and not busy.closed
        assert close_idle(pool, 10, time.monotonic() + 60) == 0
        assert await fetch_value(pool, "SELECT 2") == 2
    finally:
        pool.close()
        await pool.wait_closed()


async def test_a_burst_queued_behind_busy_connections_waits_past_the_timeout_while_they_keep_coming_back(
        database_url):
    """A statement queued longer than the pool's timeout behind statements the server answers
    runs; one behind a connection that never comes back still fails at the timeout."""
    pool = await create_pool(database_url, minsize=1, maxsize=1, timeout=0.5)
    try:
        # Eight statements of 0.2 s on one connection: the last waits about 1.4 s, three timeouts.
        answers = await asyncio.gather(*(fetch_value(pool, "SELECT %s FROM pg_sleep(0.2)", (n,)) for n in range(8)))
        assert answers == list(range(8))

        # The connection held and no statement finishing: the server is taken as not answering.
        async with pooled_connection(pool):
            started = time.monotonic()
            with pytest.raises(DatabaseTimeout, match="did not answer within 0.5s"):
                await fetch_value(pool, "SELECT 1")
            assert time.monotonic() - started < 1.5

        # Statements that keep the one connection busy past every timeout: a clear error at the bound.
        async def hold(seconds: float) -> None:
            await fetch_value(pool, "SELECT pg_sleep(%s)", (seconds,))

        holders = [asyncio.ensure_future(hold(0.45)) for _ in range(2 * BUSY_POOL_TIMEOUTS + 2)]
        await asyncio.sleep(0.05)
        with pytest.raises(DatabaseTimeout, match="pooled connections stayed busy for 3s"):
            await fetch_value(pool, "SELECT 1")
        await asyncio.gather(*holders, return_exceptions=True)
        assert await fetch_value(pool, "SELECT 2") == 2
    finally:
        pool.close()
        await pool.wait_closed()
