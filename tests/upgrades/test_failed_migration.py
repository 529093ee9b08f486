"""A migration that fails at a service's start leaves the database as it was before it (no part
of its DDL or data, the plugin's level unchanged), stops the start with an error naming the plugin
and the file, and is applied once it is fixed. The plugin is written into a temporary package, as
a plugin author's next release would ship it."""
from __future__ import annotations

import importlib
import sys
import uuid

import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.database import DatabaseError, create_pool, fetch_all
from gateway.migrations import migration_files
from gateway.plugins import Plugin

GOOD = "CREATE TABLE probe_items (id serial PRIMARY KEY, text text NOT NULL);\n" \
       "INSERT INTO probe_items (text) VALUES ('kept');\n"
# Every kind of change, then a failure: none of them may remain.
BAD = "ALTER TABLE probe_items ADD COLUMN extra integer DEFAULT 7;\n" \
      "CREATE TABLE probe_more (id integer);\n" \
      "CREATE INDEX probe_items_text ON probe_items (text);\n" \
      "UPDATE probe_items SET text = 'changed';\n" \
      "DELETE FROM probe_items WHERE id > 100;\n" \
      "SELECT 1 / 0;\n"
FIXED = "ALTER TABLE probe_items ADD COLUMN extra integer DEFAULT 7;\n"
LATER = "CREATE TABLE probe_later (id integer);\n"


@pytest.fixture
def probe_package(tmp_path, monkeypatch):
    """A package `probe_<random>` on sys.path with a `migrations` folder; returns (name, folder)."""
    name = f"probe_{uuid.uuid4().hex[:8]}"
    package = tmp_path / "packages" / name
    (package / "migrations").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "packages"))
    importlib.invalidate_caches()
    yield name, package / "migrations"
    sys.modules.pop(name, None)


def probe_plugin(package: str) -> Plugin:
    class Probe(Plugin):
        name = "probe"
        version = "1.0"

        def setup(self, registrar):
            registrar.migrations(package)

    return Probe()


async def start(config, package: str) -> None:
    """Start a service with the probe plugin (its migrations run), then stop it."""
    runner = web.AppRunner(create_app("probe-service", config, plugins=[probe_plugin(package)]))
    try:
        await runner.setup()
    finally:
        await runner.cleanup()


async def snapshot(database_url: str) -> dict:
    """Everything a migration could have changed: tables, columns, indexes, rows, levels."""
    pool = await create_pool(database_url)
    try:
        return {
            "columns": await fetch_all(pool, "SELECT table_name, column_name, data_type, column_default "
                                             "FROM information_schema.columns WHERE table_schema = 'public' "
                                             "ORDER BY table_name, column_name"),
            "indexes": await fetch_all(pool, "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' "
                                             "ORDER BY indexname"),
            "rows": await fetch_all(pool, "SELECT id, text FROM probe_items ORDER BY id"),
            "levels": await fetch_all(pool, "SELECT plugin, version, name FROM schema_migrations "
                                            "ORDER BY plugin, version"),
        }
    finally:
        pool.close()
        await pool.wait_closed()


async def test_a_failing_migration_leaves_the_database_as_it_was_and_names_itself(config, database_url,
                                                                                   probe_package):
    package, migrations = probe_package
    (migrations / "001_create_items.sql").write_text(GOOD)
    await start(config, package)
    before = await snapshot(database_url)
    assert before["levels"] == [{"plugin": "probe", "version": 1, "name": "create_items"}]
    assert before["rows"] == [{"id": 1, "text": "kept"}]

    # The next release: a migration that fails half way, and one after it.
    (migrations / "002_add_extra.sql").write_text(BAD)
    (migrations / "003_create_later.sql").write_text(LATER)
    with pytest.raises(DatabaseError) as failed:
        await start(config, package)
    message = str(failed.value)
    assert "probe/002_add_extra" in message and "002_add_extra.sql" in message and "'probe'" in message
    assert "division by zero" in message and "stay at 001" in message
    assert await snapshot(database_url) == before  # not a column, index, row or record more

    # Fixed, it is applied, and the one after it too.
    (migrations / "002_add_extra.sql").write_text(FIXED)
    await start(config, package)
    after = await snapshot(database_url)
    assert [row["version"] for row in after["levels"]] == [1, 2, 3]
    assert {"table_name": "probe_items", "column_name": "extra", "data_type": "integer",
            "column_default": "7"} in after["columns"]
    assert {"probe_later"} <= {column["table_name"] for column in after["columns"]}
    assert after["rows"] == before["rows"]


@pytest.mark.parametrize("statement", ["COMMIT;", "begin;", "END;", "ROLLBACK;", "START TRANSACTION;"])
async def test_a_migration_that_ends_the_transaction_itself_is_refused_before_anything_runs(
        config, database_url, probe_package, statement):
    """A COMMIT in a file would make the statements before it stay when a later one fails."""
    package, migrations = probe_package
    (migrations / "001_create_items.sql").write_text(GOOD)
    (migrations / "002_split.sql").write_text(f"CREATE TABLE probe_split (id int);\n{statement}\nSELECT 1 / 0;\n")
    with pytest.raises(DatabaseError, match=rf"{package}/migrations/002_split.sql controls the transaction"):
        migration_files(package, "migrations")
    with pytest.raises(DatabaseError, match="002_split.sql controls the transaction"):
        await start(config, package)
    pool = await create_pool(database_url)
    try:
        assert await fetch_all(pool, "SELECT to_regclass('probe_items') AS items, "
                                     "to_regclass('probe_split') AS split") == [{"items": None, "split": None}]
    finally:
        pool.close()
        await pool.wait_closed()


def test_function_bodies_and_quoted_text_are_not_transaction_control(probe_package):
    package, migrations = probe_package
    (migrations / "001_functions.sql").write_text(
        "CREATE FUNCTION probe_one() RETURNS int AS $$ BEGIN RETURN 1; END; $$ LANGUAGE plpgsql;\n"
        "DO $body$ BEGIN PERFORM 1; END $body$;\n"
        "CREATE FUNCTION probe_two() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 2; END;\n"
        "-- COMMIT; in a comment\n/* END; */\n"
        "COMMENT ON FUNCTION probe_one() IS 'ends with; COMMIT';\n"
        "SAVEPOINT inner_step; ROLLBACK TO inner_step;\n")
    assert [version for version, _, _ in migration_files(package, "migrations")] == [1]


def test_gateway_migrate_names_the_failed_migration_and_leaves_it_unapplied(database_url, tmp_path):
    """An operator's `gateway migrate` (and `gateway serve`) on a database where a table of the
    auth plugin's second migration exists already (left by hand): that migration's first table is
    not left behind, the error says which file failed, and the command exits with it, no traceback."""
    import shutil

    import psycopg2
    from click.testing import CliRunner

    from gateway.cli import main as gateway_cli
    from gateway.config import conf_dir

    conf = tmp_path / "conf"
    conf.mkdir()
    shutil.copy(conf_dir() / "default.toml", conf / "default.toml")
    (conf / "services.toml").write_text('[[service]]\nid = "accounts"\nport = 1\nplugins = ["auth_tokens", "auth"]\n')
    connection = psycopg2.connect(database_url)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE auth_spent_access_tokens (left_by_hand int)")
        env = {"GATEWAY_CONF_DIR": str(conf), "DATABASE_URL": database_url, "DATA_DIR": str(tmp_path / "data")}
        result = CliRunner().invoke(gateway_cli, ["migrate"], env=env)
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output
        assert "migration auth/002_create_refresh_tokens failed" in result.output
        assert "002_create_refresh_tokens.sql of the plugin 'auth'" in result.output
        assert "stay at 001" in result.output and "already exists" in result.output
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('auth_users') IS NOT NULL, to_regclass('auth_refresh_tokens') IS NULL")
            assert cursor.fetchone() == (True, True)  # 001 applied, nothing of 002
            cursor.execute("SELECT plugin, version FROM schema_migrations ORDER BY plugin, version")
            assert cursor.fetchall() == [("auth", 1)]
    finally:
        connection.close()
