"""A backup archive: tar and gzip, the SHA-256 of every member in its manifest, read whole and
checked before anything is restored from it."""
from __future__ import annotations

import contextlib
import datetime
import gzip
import hashlib
import io
import json
import os
import tarfile
import zlib
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Iterator

from .archive_crypto import ENCRYPTION_MAGIC, BackupError, DecryptingReader, EncryptingWriter

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

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


# ---------------------------------------------------------------- the archive

class _HashingReader(io.RawIOBase):
    """Passes a file's bytes to tarfile and hashes them on the way."""

    def __init__(self, source: IO[bytes]):
        self._source = source
        self.sha256 = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        # Released before returning: RawIOBase.read resizes its bytearray once this returns.
        with memoryview(buffer) as view:
            data = self._source.read(len(view))
            self.sha256.update(data)
            view[:len(data)] = data
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
def opened_archive(path: Path, passphrase: str | None) -> Iterator[tuple[tarfile.TarFile, gzip.GzipFile]]:
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
    with opened_archive(path, passphrase) as (archive, unpacked):
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

