"""Backup and restore of everything a deployment keeps: one archive (tar, gzip) with a consistent
PostgreSQL dump (`pg_dump`, one snapshot, taken while the services run), every blob (local or
S3), the files DATA_DIR holds besides them (the generated secrets, the plugin choices, the
Web Push key), the configuration files in use, and last a manifest with versions and the
SHA-256 of every member. Vectors are derived data: they are not archived, and the services
index the restored records again at their first start (a new collection is re-indexed).

An archive is optionally encrypted with a passphrase (scrypt, then AES-256-GCM in records of a
MiB, the last one marked), so that neither a changed byte nor a cut-off end goes unnoticed.

Restore reads the whole archive once and checks every checksum before it touches anything,
then refuses a data directory, database or bucket that holds something unless told `force`.
Everything here blocks or runs subprocesses: the CLI calls it, the console runs the CLI."""

from __future__ import annotations

import asyncio
import datetime
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, AsyncIterator, Callable

from .archive import (BLOBS_PREFIX, CONFIGURATION_PREFIX, DATA_DIR_SKIPPED, DATA_PREFIX, DATABASE_MEMBER, FORMAT,
                      FORMAT_VERSION, READ_CHUNK, RESTORED_CONFIGURATION, ArchiveWriter, opened_archive, verify_archive)
from .archive_crypto import BackupError
from .config import Config
from .pg_tools import (database_holds_data, dump_database, empty_database, migration_levels, postgres_tool,
                       restore_database)
from .version import __version__


# ---------------------------------------------------------------- backup

@dataclass
class BackupResult:
    path: Path
    size: int
    manifest: dict = field(default_factory=dict)


def _data_dir_files(data_dir: Path) -> list[Path]:
    if not data_dir.is_dir():
        return []
    return sorted(entry for entry in data_dir.iterdir()
                  if entry.is_file() and not entry.name.startswith(".") and not entry.name.endswith((".tmp", ".partial"))
                  and entry.name not in DATA_DIR_SKIPPED)


def _configuration_files() -> list[tuple[str, Path]]:
    """The configuration this deployment reads besides defaults: the file GATEWAY_CONFIG names and
    a GATEWAY_CONF_DIR's files."""
    found: list[tuple[str, Path]] = []
    if os.environ.get("GATEWAY_CONFIG"):
        path = Path(os.environ["GATEWAY_CONFIG"])
        if path.is_file():
            found.append((f"{CONFIGURATION_PREFIX}gateway-config.toml", path))
    if os.environ.get("GATEWAY_CONF_DIR"):
        directory = Path(os.environ["GATEWAY_CONF_DIR"])
        if directory.is_dir():
            found.extend((f"{CONFIGURATION_PREFIX}conf/{entry.name}", entry) for entry in sorted(directory.iterdir())
                         if entry.is_file() and entry.suffix == ".toml")
    return found


async def create_backup(config: Config, target: Path, passphrase: str | None = None,
                        progress: Callable[[str], None] = lambda message: None) -> BackupResult:
    """Write the archive of this deployment (the environment's configuration) to `target`."""
    from .blobs import BlobNotFound, create_blob_store
    from .database import create_pool, resolve_database_url

    loop = asyncio.get_running_loop()
    target = Path(target).expanduser().resolve()
    url, _embedded = await resolve_database_url(config)
    db = await create_pool(url, minsize=1, maxsize=2)
    store = await create_blob_store(config)
    writer = await loop.run_in_executor(None, ArchiveWriter, target, passphrase)
    try:
        with tempfile.TemporaryDirectory(prefix=".backup-", dir=target.parent) as scratch:
            dump = Path(scratch) / DATABASE_MEMBER
            progress("dumping the database")
            levels = await migration_levels(db)
            await dump_database(url, dump)
            await loop.run_in_executor(None, writer.add_file, DATABASE_MEMBER, dump)
            await loop.run_in_executor(None, dump.unlink)
            progress("copying the blobs")
            blobs, blob_bytes, vanished = 0, 0, []
            copy = Path(scratch) / "blob"
            async for key in store.keys():
                # Each blob through a scratch file: tar needs its size first, and one that is
                # deleted meanwhile (after the dump saw its record) is noted, not fatal.
                handle = await loop.run_in_executor(None, open, copy, "wb")
                try:
                    async for chunk in store.read(key):
                        await loop.run_in_executor(None, handle.write, chunk)
                except BlobNotFound:
                    vanished.append(key)
                    continue
                finally:
                    await loop.run_in_executor(None, handle.close)
                await loop.run_in_executor(None, writer.add_file, BLOBS_PREFIX + key, copy)
                blobs += 1
                blob_bytes += writer.members[BLOBS_PREFIX + key]["size"]
            progress("copying the configuration and secrets")
            for path in await loop.run_in_executor(None, _data_dir_files, config.data_dir):
                await loop.run_in_executor(None, writer.add_file, DATA_PREFIX + path.name, path)
            for name, path in _configuration_files():
                await loop.run_in_executor(None, writer.add_file, name, path)
            manifest = {
                "format": FORMAT, "format_version": FORMAT_VERSION, "app_version": __version__,
                "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "database": {"source": "url" if config.settings.database.url else "embedded",
                             "tool": await _tool_version("pg_dump")},
                "migrations": levels,
                "blobs": {"storage": store.kind, "count": blobs, "bytes": blob_bytes, "vanished": vanished},
                "vectors": "not archived: indexed again from the restored records at the services' first start",
                "encrypted": bool(passphrase),
            }
            size = await loop.run_in_executor(None, writer.finish, manifest)
            progress("done")
            return BackupResult(target, size, {**manifest, "members": writer.members})
    except BaseException:
        await loop.run_in_executor(None, writer.abandon)
        raise
    finally:
        await store.close()
        db.close()
        await db.wait_closed()


async def _tool_version(name: str) -> str:
    process = await asyncio.create_subprocess_exec(postgres_tool(name), "--version", stdout=asyncio.subprocess.PIPE)
    output, _ = await process.communicate()
    return output.decode().strip()


# ---------------------------------------------------------------- restore

def data_dir_contents(data_dir: Path) -> list[str]:
    """What a data directory holds that a restore would replace or mix with (lock files, the
    console's own state and the backups folder do not count)."""
    if not data_dir.is_dir():
        return []
    return sorted(entry.name for entry in data_dir.iterdir()
                  if not entry.name.startswith(".") and entry.name not in {"run", "console", "logs", "backups"}
                  and not (entry.is_dir() and not any(entry.iterdir())))  # the blob store makes its folder


@dataclass
class RestoreResult:
    manifest: dict
    blobs: int
    data_files: list[str]
    configuration_files: list[str]


async def restore_backup(config: Config, source: Path, passphrase: str | None = None, force: bool = False,
                         progress: Callable[[str], None] = lambda message: None) -> RestoreResult:
    """Restore the archive into the environment's DATA_DIR, database and blob storage."""
    from .blobs import create_blob_store
    from .database import create_pool, resolve_database_url

    loop = asyncio.get_running_loop()
    source = Path(source).expanduser().resolve()
    progress("checking the archive")
    manifest = await loop.run_in_executor(None, verify_archive, source, passphrase)

    data_dir = config.data_dir
    occupied = await loop.run_in_executor(None, data_dir_contents, data_dir)
    if occupied and not force:
        raise BackupError(f"the data directory {data_dir} is not empty ({', '.join(occupied[:5])}); "
                          "restore into an empty one, or give --force to replace what it holds")
    url, _embedded = await resolve_database_url(config)
    db = await create_pool(url, minsize=1, maxsize=2)
    store = await create_blob_store(config)
    try:
        if await database_holds_data(db) and not force:
            raise BackupError("the database is not empty; restore into an empty one, or give --force to replace it")
        keys_present = [key async for key in store.keys()]
        if keys_present and not force:
            raise BackupError(f"the blob storage ({store.kind}) is not empty ({len(keys_present)} blobs); "
                              "restore into an empty one, or give --force to replace it")
        if force:
            progress("emptying the database, the blob storage and the vector store")
            await empty_database(db)
            for key in keys_present:
                await store.delete(key)
            await loop.run_in_executor(None, shutil.rmtree, data_dir / "vectors", True)
        restored_blobs, data_files, configuration_files = 0, [], []
        with tempfile.TemporaryDirectory(prefix=".restore-") as scratch:
            # tar's stream mode reads members in order; each is taken in an executor.
            opened = opened_archive(source, passphrase)
            archive, _ = await loop.run_in_executor(None, opened.__enter__)
            try:
                members = iter(archive)
                while True:
                    member = await loop.run_in_executor(None, next, members, None)
                    if member is None:
                        break
                    name = member.name
                    handle = archive.extractfile(member)
                    assert handle is not None
                    if name == DATABASE_MEMBER:
                        progress("restoring the database")
                        dump = Path(scratch) / DATABASE_MEMBER
                        await loop.run_in_executor(None, _copy_to, handle, dump)
                        await restore_database(url, dump)
                        await loop.run_in_executor(None, dump.unlink)
                    elif name.startswith(BLOBS_PREFIX):
                        await store.put(name[len(BLOBS_PREFIX):], _chunks_of(loop, handle))
                        restored_blobs += 1
                    elif name.startswith(DATA_PREFIX):
                        file_name = Path(name[len(DATA_PREFIX):]).name
                        await loop.run_in_executor(None, _write_private, handle, data_dir / file_name)
                        data_files.append(file_name)
                    elif name.startswith(CONFIGURATION_PREFIX):
                        relative = Path(name[len(CONFIGURATION_PREFIX):])
                        target = data_dir / RESTORED_CONFIGURATION / relative.parent.name / relative.name \
                            if relative.parent.name else data_dir / RESTORED_CONFIGURATION / relative.name
                        await loop.run_in_executor(None, _write_private, handle, target)
                        configuration_files.append(str(target))
            finally:
                await loop.run_in_executor(None, opened.__exit__, None, None, None)
        progress("done")
        return RestoreResult(manifest, restored_blobs, data_files, configuration_files)
    finally:
        await store.close()
        db.close()
        await db.wait_closed()


def _copy_to(handle: IO[bytes], target: Path) -> None:
    with open(target, "wb") as output:
        shutil.copyfileobj(handle, output, READ_CHUNK)


def _write_private(handle: IO[bytes], target: Path) -> None:
    """Secrets and configuration come back readable by their owner only."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = target.with_name(f".{target.name}.restoring")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as output:
        shutil.copyfileobj(handle, output, READ_CHUNK)
    os.chmod(temporary, 0o600)
    os.replace(temporary, target)


async def _chunks_of(loop: asyncio.AbstractEventLoop, handle: IO[bytes]) -> AsyncIterator[bytes]:
    while chunk := await loop.run_in_executor(None, handle.read, READ_CHUNK):
        yield chunk


# ---------------------------------------------------------------- schedule and retention

def parse_interval(text: str) -> float | None:
    """`[backup] every`: "30m", "6h", "1d", "1w" (or plain seconds); "" or "off": None."""
    text = str(text or "").strip().lower()
    if text in ("", "off", "0", "none", "never"):
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    try:
        if text[-1] in units:
            value = float(text[:-1]) * units[text[-1]]
        else:
            value = float(text)
    except ValueError:
        raise BackupError(f"[backup] every = {text!r} is not an interval (use e.g. 30m, 6h, 1d, 1w, or off)") from None
    if value < 60:
        raise BackupError(f"[backup] every = {text!r} is shorter than a minute")
    return value


ARCHIVE_PATTERN = "backup-*.tar.gz*"


def archive_name(now: datetime.datetime | None = None, encrypted: bool = False) -> str:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return f"backup-{now.strftime('%Y%m%d-%H%M%S')}.tar.gz" + (".enc" if encrypted else "")


def backups_in(directory: Path) -> list[Path]:
    """The archives in `directory`, newest first."""
    if not directory.is_dir():
        return []
    return sorted((path for path in directory.glob(ARCHIVE_PATTERN) if path.is_file()),
                  key=lambda path: path.name, reverse=True)


def prune(directory: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` archives (0 keeps every one); those deleted."""
    if keep <= 0:
        return []
    removed = backups_in(directory)[keep:]
    for path in removed:
        path.unlink(missing_ok=True)
    return removed
