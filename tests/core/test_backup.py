"""Backup and restore (gateway/backup.py, `gateway backup` / `gateway restore`) on real
PostgreSQL databases and real blob stores (a directory; S3 through moto's server): what goes in
comes back, an archive that was changed or cut off is refused before anything is touched, and
a target that holds something is refused unless forced."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import psycopg2
import pytest

from gateway.backup import (BackupError, create_backup, parse_interval, prune, restore_backup, verify_archive,
                            archive_name)
from gateway.blobs import create_blob_store
from gateway.config import PROJECT_ROOT, Config

PASSPHRASE = "correct horse battery staple"


def deployment(tmp_path, name: str, database_url: str, **extra) -> Config:
    """A configuration as `serve` would read it from the environment: its own DATA_DIR and
    database, its secrets generated into the data directory."""
    return Config.load(overrides={"core.data_dir": str(tmp_path / name), "database.url": database_url, **extra},
                       environ={})


def query(url: str, sql: str) -> list[tuple]:
    connection = psycopg2.connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall() if cursor.description else []
    finally:
        connection.commit()
        connection.close()


def seed_database(url: str) -> None:
    query(url, "CREATE EXTENSION IF NOT EXISTS pg_trgm; "
               "CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL); "
               "CREATE INDEX notes_trgm ON notes USING gin (body gin_trgm_ops); "
               "INSERT INTO notes (body) SELECT 'note ' || n FROM generate_series(1, 500) AS n; "
               "CREATE TABLE schema_migrations (plugin text, version int, name text); "
               "INSERT INTO schema_migrations VALUES ('notes', 1, 'create'), ('notes', 2, 'index')")


@pytest.fixture
def second_database(postgres_server):
    name = postgres_server.create_database()
    yield postgres_server.database_url(name)
    postgres_server.drop_database(name)


@pytest.fixture(params=["local", "s3"])
def blob_settings(request) -> dict:
    if request.param == "local":
        return {}
    endpoint = request.getfixturevalue("s3_endpoint")
    return {"blobs.s3_endpoint": endpoint, "blobs.s3_access_key": "test", "blobs.s3_secret_key": "test"}


async def put_blobs(config: Config, blobs: dict[str, bytes]) -> None:
    store = await create_blob_store(config)
    try:
        for key, data in blobs.items():
            await store.put(key, data)
    finally:
        await store.close()


async def read_blobs(config: Config) -> dict[str, bytes]:
    store = await create_blob_store(config)
    try:
        return {key: await store.read_all(key) async for key in store.keys()}
    finally:
        await store.close()


@pytest.mark.parametrize("passphrase", [None, PASSPHRASE])
async def test_everything_comes_back_in_a_fresh_data_directory_and_database(tmp_path, database_url, second_database,
                                                                          blob_settings, passphrase):
    bucket = {"blobs.s3_bucket": f"source-{os.urandom(4).hex()}"} if blob_settings else {}
    source = deployment(tmp_path, "source", database_url, **blob_settings, **bucket)
    seed_database(database_url)
    blobs = {"files/a": os.urandom(300_000), "files/thumbs/a-256": b"thumbnail", "files/empty": b""}
    await put_blobs(source, blobs)
    (source.data_dir / "service-plugins.toml").write_text('[gateway]\ndisabled = ["webhooks"]\n')

    archive = tmp_path / "backups" / "one.tar.gz"
    result = await create_backup(source, archive, passphrase)
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    assert result.size == archive.stat().st_size
    manifest = verify_archive(archive, passphrase)
    assert manifest["migrations"] == {"notes": 2}
    assert manifest["blobs"]["count"] == 3 and manifest["encrypted"] == bool(passphrase)
    assert set(manifest["members"]) >= {"database.dump", "data/secrets.json", "data/service-plugins.toml",
                                        "blobs/files/a", "blobs/files/thumbs/a-256"}

    target_bucket = {"blobs.s3_bucket": f"target-{os.urandom(4).hex()}"} if blob_settings else {}
    target = Config.load(overrides={"core.data_dir": str(tmp_path / "target"), "database.url": second_database,
                                    **blob_settings, **target_bucket}, environ={}, generate_secrets=False)
    restored = await restore_backup(target, archive, passphrase)
    assert restored.blobs == 3
    assert query(second_database, "SELECT count(*), max(body) FROM notes") == [(500, "note 99")]
    assert query(second_database, "SELECT count(*) FROM notes WHERE body % 'note 42'")[0][0] > 0  # the trigram index
    assert await read_blobs(target) == blobs
    secrets = target.data_dir / "secrets.json"
    assert json.loads(secrets.read_text()) == json.loads((source.data_dir / "secrets.json").read_text())
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert (target.data_dir / "service-plugins.toml").read_text() == '[gateway]\ndisabled = ["webhooks"]\n'
    # The restored deployment reads the restored secrets: the same JWT secret signs its tokens.
    again = Config.load(overrides={"core.data_dir": str(tmp_path / "target")}, environ={})
    assert again.get("auth.jwt_secret") == source.get("auth.jwt_secret")


@pytest.mark.slow
async def test_the_embedded_database_is_dumped_and_restored_into_a_new_data_directory():
    """No DATABASE_URL: the embedded server of DATA_DIR is joined (started here) for the dump, and
    a fresh one is made in the new DATA_DIR for the restore. (Outside pytest's tmp_path, as
    PostgresForTests: the embedded server runs as another user, who must reach the folder.)"""
    import shutil
    import tempfile
    from pathlib import Path

    from gateway.database import resolve_database_url

    root = Path(tempfile.mkdtemp(prefix="gateway-test-backup-"))
    servers = []
    try:
        source = Config.load(overrides={"core.data_dir": str(root / "source")}, environ={})
        url, server = await resolve_database_url(source)
        servers.append(server)
        seed_database(url)
        archive = root / "embedded.tar.gz"
        result = await create_backup(source, archive)
        assert result.manifest["database"]["source"] == "embedded"

        target = Config.load(overrides={"core.data_dir": str(root / "target")}, environ={}, generate_secrets=False)
        await restore_backup(target, archive)
        target_url, server = await resolve_database_url(target)
        servers.append(server)
        assert query(target_url, "SELECT count(*) FROM notes") == [(500,)]
        assert (root / "target" / "postgres" / "PG_VERSION").exists()
    finally:
        for server in servers:
            server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def damaged_copies(archive, tmp_path) -> dict:
    data = archive.read_bytes()
    middle = bytearray(data)
    middle[len(data) // 2] ^= 0xFF
    copies = {"a byte changed": bytes(middle), "cut off at 60%": data[:int(len(data) * 0.6)],
              "cut off before the end": data[:-9], "empty": b"", "not an archive": b"hello " * 100}
    paths = {}
    for label, content in copies.items():
        path = tmp_path / f"damaged-{len(paths)}.tar.gz"
        path.write_bytes(content)
        paths[label] = path
    return paths


@pytest.mark.parametrize("passphrase", [None, PASSPHRASE])
async def test_a_changed_or_truncated_archive_is_refused_before_anything_is_touched(tmp_path, database_url,
                                                                                 second_database, passphrase):
    source = deployment(tmp_path, "source", database_url)
    seed_database(database_url)
    await put_blobs(source, {"files/big": os.urandom(3_000_000)})
    archive = tmp_path / "good.tar.gz"
    await create_backup(source, archive, passphrase)
    target = Config.load(overrides={"core.data_dir": str(tmp_path / "target"), "database.url": second_database},
                         environ={}, generate_secrets=False)
    for label, path in damaged_copies(archive, tmp_path).items():
        with pytest.raises(BackupError) as refused:
            await restore_backup(target, path, passphrase)
        message = str(refused.value)
        assert any(word in message for word in ("corrupt", "truncated", "not an encrypted", "no backup manifest",
                                                "passphrase")), (label, message)
        assert not target.data_dir.exists(), label
        assert query(second_database, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)], label


async def test_a_wrong_or_missing_passphrase_is_refused(tmp_path, database_url):
    source = deployment(tmp_path, "source", database_url)
    archive = tmp_path / "secret.tar.gz"
    await create_backup(source, archive, PASSPHRASE)
    assert b"secrets.json" not in archive.read_bytes()
    with pytest.raises(BackupError, match="passphrase is wrong"):
        verify_archive(archive, "not it")
    with pytest.raises(BackupError, match="encrypted: give its passphrase"):
        verify_archive(archive, None)


async def test_a_target_that_holds_something_is_refused_unless_forced(tmp_path, database_url, second_database):
    source = deployment(tmp_path, "source", database_url)
    seed_database(database_url)
    await put_blobs(source, {"files/kept": b"from the backup"})
    archive = tmp_path / "one.tar.gz"
    await create_backup(source, archive)

    target = Config.load(overrides={"core.data_dir": str(tmp_path / "target"), "database.url": second_database},
                         environ={}, generate_secrets=False)
    query(second_database, "CREATE TABLE stray (x int); INSERT INTO stray VALUES (1)")
    with pytest.raises(BackupError, match="database is not empty"):
        await restore_backup(target, archive)
    target.data_dir.mkdir(exist_ok=True)  # (the blob store's empty folder does not count)
    (target.data_dir / "secrets.json").write_text("{}")
    with pytest.raises(BackupError, match="data directory .* is not empty"):
        await restore_backup(target, archive)
    assert query(second_database, "SELECT x FROM stray") == [(1,)]
    await put_blobs(target, {"files/stray": b"not in the backup"})
    (target.data_dir / "vectors" / "gateway").mkdir(parents=True)

    await restore_backup(target, archive, force=True)
    assert query(second_database, "SELECT to_regclass('stray') IS NULL, (SELECT count(*) FROM notes)") == [(True, 500)]
    assert await read_blobs(target) == {"files/kept": b"from the backup"}
    assert not (target.data_dir / "vectors").exists()  # indexed again from the records at the next start
    assert json.loads((target.data_dir / "secrets.json").read_text())["auth.jwt_secret"] == source.get("auth.jwt_secret")


def test_the_command_line_backs_up_checks_and_restores(tmp_path, database_url, second_database):
    seed_database(database_url)
    passphrase_file = tmp_path / "passphrase"
    passphrase_file.write_text(PASSPHRASE + "\n")
    environment = {key: value for key, value in os.environ.items()
                   if key not in {"DATABASE_URL", "S3_ENDPOINT", "GATEWAY_CONFIG", "JWT_SECRET", "GATEWAY_CONF_DIR"}}

    def gateway(*arguments: str, data_dir: str, url: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gateway", *arguments], cwd=PROJECT_ROOT, capture_output=True,
                              text=True, timeout=120,
                              env={**environment, "DATA_DIR": str(tmp_path / data_dir), "DATABASE_URL": url})

    archive = tmp_path / "cli.tar.gz"
    made = gateway("backup", str(archive), "--passphrase-file", str(passphrase_file), data_dir="source",
                   url=database_url)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["encrypted"] is True
    checked = gateway("restore", "--check", str(archive), "--passphrase-file", str(passphrase_file),
                      data_dir="target", url=second_database)
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"] is True, checked.stderr
    assert not (tmp_path / "target").exists()
    refused = gateway("restore", str(archive), data_dir="target", url=second_database)
    assert refused.returncode != 0 and "encrypted" in refused.stderr
    restored = gateway("restore", str(archive), "--passphrase-file", str(passphrase_file), data_dir="target",
                       url=second_database)
    assert restored.returncode == 0, restored.stderr
    assert query(second_database, "SELECT count(*) FROM notes") == [(500,)]
    again = gateway("restore", str(archive), "--passphrase-file", str(passphrase_file), data_dir="target",
                    url=second_database)
    assert again.returncode != 0 and "not empty" in again.stderr and "--force" in again.stderr


def test_intervals_and_retention(tmp_path):
    assert parse_interval("") is None and parse_interval("off") is None
    assert parse_interval("1d") == 86400 and parse_interval("6h") == 21600 and parse_interval("90m") == 5400
    for bad in ("soon", "10s", "-1d"):
        with pytest.raises(BackupError):
            parse_interval(bad)
    import datetime
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    names = [archive_name(start + datetime.timedelta(days=day)) for day in range(5)]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "unrelated.txt").write_text("kept")
    removed = prune(tmp_path, keep=2)
    assert sorted(path.name for path in removed) == names[:3]
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(names[3:] + ["unrelated.txt"])
