import psycopg2
import pytest

from gateway.app import create_app
from gateway.context import get_context
from gateway.database import (DatabaseError, apply_migrations, create_pool, fetch_all, fetch_value,
                              migration_files, transaction)
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
        with pytest.raises(DatabaseError, match="broken/002_bad failed"):
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
