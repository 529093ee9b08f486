"""A backup archive's encryption with a passphrase: scrypt, then AES-256-GCM in numbered records of
a MiB, the last one marked, so that neither a changed byte nor a cut-off end goes unnoticed."""
from __future__ import annotations

import io
import os
import struct
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why and what to do."""


ENCRYPTION_MAGIC = b"ASSISTANT-BACKUP-AES256GCM\n"
ENCRYPTION_VERSION = 1
RECORD_PLAINTEXT = 1024 * 1024
SCRYPT_LOG2_N, SCRYPT_R, SCRYPT_P = 15, 8, 1


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

    def write(self, data: ReadableBuffer) -> int:
        self._buffer += data
        while len(self._buffer) > RECORD_PLAINTEXT:
            self._record(bytes(self._buffer[:RECORD_PLAINTEXT]), final=False)
            del self._buffer[:RECORD_PLAINTEXT]
        return memoryview(data).nbytes

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

    def readinto(self, buffer: WriteableBuffer) -> int:
        while not self._pending:
            if self._finished:
                return 0
            self._next_record()
        # Released before returning: RawIOBase.read resizes its bytearray once this returns.
        with memoryview(buffer) as view:
            size = min(len(view), len(self._pending))
            view[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def is_encrypted(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(len(ENCRYPTION_MAGIC)) == ENCRYPTION_MAGIC

