"""Blob storage: a directory in DATA_DIR by default, S3 or MinIO (aiobotocore) when
`S3_ENDPOINT` is set. Both stream in and out in chunks, so a large file is never held whole in
memory, and both read byte ranges. Keys are chosen by the server (`files/<uuid>`), never by a
client, and are checked anyway."""
from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import re
import uuid
from pathlib import Path

import aiohttp
from typing import (Any, AsyncIterable, AsyncIterator, BinaryIO, Callable, Iterator, TypeVar, TypeVarTuple,
                    Unpack)

from .config import Config

Result = TypeVar("Result")
Arguments = TypeVarTuple("Arguments")

CHUNK = 256 * 1024
S3_PART = 8 * 1024 * 1024  # S3 parts must be at least 5 MiB, except the last
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-./]{0,511}\Z")


class BlobError(Exception):
    pass


class BlobNotFound(BlobError):
    pass


def check_key(key: str) -> str:
    if not _KEY.match(key) or ".." in key.split("/") or "//" in key:
        raise BlobError(f"invalid blob key {key!r}")
    return key


async def _chunks(data: bytes | AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        for start in range(0, len(data), CHUNK):
            yield bytes(data[start:start + CHUNK])
        return
    async for chunk in data:
        if chunk:
            yield chunk


class BlobStore(abc.ABC):
    kind = ""

    @abc.abstractmethod
    async def put(self, key: str, data: bytes | AsyncIterable[bytes], content_type: str = "") -> int:
        """Store the bytes under `key`, replacing what was there; return the size written."""

    @abc.abstractmethod
    async def size(self, key: str) -> int | None:
        """Size in bytes, or None when nothing is stored under `key`."""

    @abc.abstractmethod
    def read(self, key: str, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        """The bytes from `start` up to but not including `end`; BlobNotFound when missing."""

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Remove `key`; nothing happens when it is not there."""

    @abc.abstractmethod
    def keys(self) -> AsyncIterator[str]:
        """Every stored key, in no promised order (backups copy them all)."""

    async def exists(self, key: str) -> bool:
        return await self.size(key) is not None

    async def read_all(self, key: str) -> bytes:
        return b"".join([chunk async for chunk in self.read(key)])

    async def close(self) -> None:
        pass


class LocalBlobStore(BlobStore):
    kind = "local"

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    async def _run(self, function: Callable[[Unpack[Arguments]], Result], *args: Unpack[Arguments]) -> Result:
        return await asyncio.get_running_loop().run_in_executor(None, function, *args)

    async def put(self, key: str, data: bytes | AsyncIterable[bytes], content_type: str = "") -> int:
        path = self._path(key)
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")

        def open_file() -> BinaryIO:
            path.parent.mkdir(parents=True, exist_ok=True)
            return open(temporary, "wb")

        handle = await self._run(open_file)
        size = 0
        try:
            async for chunk in _chunks(data):
                await self._run(handle.write, chunk)
                size += len(chunk)
            await self._run(handle.close)
            await self._run(os.replace, temporary, path)
        except BaseException:
            handle.close()
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        return size

    async def size(self, key: str) -> int | None:
        try:
            return (await self._run(os.stat, self._path(key))).st_size
        except FileNotFoundError:
            return None

    async def read(self, key: str, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        path = self._path(key)
        try:
            handle = await self._run(open, path, "rb")
        except FileNotFoundError:
            raise BlobNotFound(key) from None
        try:
            await self._run(handle.seek, start)
            remaining = None if end is None else max(0, end - start)
            while remaining is None or remaining > 0:
                want = CHUNK if remaining is None else min(CHUNK, remaining)
                chunk = await self._run(handle.read, want)
                if not chunk:
                    break
                if remaining is not None:
                    remaining -= len(chunk)
                yield chunk
        finally:
            handle.close()

    async def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            await self._run(os.unlink, self._path(key))

    async def keys(self) -> AsyncIterator[str]:
        def walk() -> list[str]:
            found = []
            for directory, _, names in os.walk(self.root):
                for name in names:
                    if not name.startswith("."):  # an upload still being written
                        found.append(Path(directory, name).relative_to(self.root).as_posix())
            return sorted(found)

        for key in await self._run(walk):
            yield key


@contextlib.contextmanager
def _s3_failures(operation: str, key: str) -> Iterator[None]:
    """The S3 endpoint being down or refusing is a BlobError, whatever library raised it."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except BlobError:
        raise
    except (BotoCoreError, ClientError, aiohttp.ClientError, OSError, asyncio.TimeoutError) as error:
        raise BlobError(f"S3 {operation} of {key!r} failed: {error}") from error


class S3BlobStore(BlobStore):
    kind = "s3"

    # `client`: aiobotocore's S3 client, a class it builds at run time and ships no types for.
    def __init__(self, client: Any, bucket: str, exit_stack: contextlib.AsyncExitStack):
        self.client = client
        self.bucket = bucket
        self._exit_stack = exit_stack

    @classmethod
    async def connect(cls, endpoint: str, bucket: str, access_key: str, secret_key: str,
                      region: str = "us-east-1") -> "S3BlobStore":
        from aiobotocore.config import AioConfig
        from aiobotocore.session import get_session

        stack = contextlib.AsyncExitStack()
        # Bounded: a storage outage should answer a request in seconds, not stall it in retries.
        bounded = AioConfig(connect_timeout=5, read_timeout=60, retries={"max_attempts": 2, "mode": "standard"})
        client = await stack.enter_async_context(get_session().create_client(
            "s3", endpoint_url=endpoint, region_name=region, config=bounded,
            aws_access_key_id=access_key or None, aws_secret_access_key=secret_key or None))
        store = cls(client, bucket, stack)
        try:
            await client.head_bucket(Bucket=bucket)
        except client.exceptions.ClientError as error:
            if error.response.get("Error", {}).get("Code") not in {"404", "NoSuchBucket"}:
                await stack.aclose()
                raise BlobError(f"S3 bucket {bucket!r} at {endpoint} cannot be used: {error}") from error
            await client.create_bucket(Bucket=bucket)
        return store

    async def put(self, key: str, data: bytes | AsyncIterable[bytes], content_type: str = "") -> int:
        check_key(key)
        with _s3_failures("upload", key):
            return await self._put(key, data, content_type)

    async def _put(self, key: str, data: bytes | AsyncIterable[bytes], content_type: str) -> int:
        extra = {"ContentType": content_type} if content_type else {}
        buffer = bytearray()
        size = 0
        upload_id = None
        parts: list[dict] = []
        try:
            async for chunk in _chunks(data):
                buffer.extend(chunk)
                size += len(chunk)
                if len(buffer) >= S3_PART:
                    if upload_id is None:
                        started = await self.client.create_multipart_upload(Bucket=self.bucket, Key=key, **extra)
                        upload_id = started["UploadId"]
                    answer = await self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                           PartNumber=len(parts) + 1, Body=bytes(buffer))
                    parts.append({"PartNumber": len(parts) + 1, "ETag": answer["ETag"]})
                    buffer.clear()
            if upload_id is None:
                await self.client.put_object(Bucket=self.bucket, Key=key, Body=bytes(buffer), **extra)
                return size
            if buffer:
                answer = await self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                       PartNumber=len(parts) + 1, Body=bytes(buffer))
                parts.append({"PartNumber": len(parts) + 1, "ETag": answer["ETag"]})
            await self.client.complete_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                        MultipartUpload={"Parts": parts})
            return size
        except BaseException:
            if upload_id is not None:
                with contextlib.suppress(Exception):
                    await self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            raise

    async def size(self, key: str) -> int | None:
        check_key(key)
        with _s3_failures("size", key):
            try:
                head = await self.client.head_object(Bucket=self.bucket, Key=key)
            except self.client.exceptions.ClientError as error:
                if error.response.get("Error", {}).get("Code") in {"404", "NoSuchKey", "NotFound"}:
                    return None
                raise
            return int(head["ContentLength"])

    async def read(self, key: str, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        check_key(key)
        extra = {}
        if start or end is not None:
            if end is not None and end <= start:
                return
            extra["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        with _s3_failures("read", key):
            try:
                answer = await self.client.get_object(Bucket=self.bucket, Key=key, **extra)
            except self.client.exceptions.NoSuchKey:
                raise BlobNotFound(key) from None
        async with answer["Body"] as body:
            while True:
                with _s3_failures("read", key):
                    chunk = await body.read(CHUNK)
                if not chunk:
                    break
                yield chunk

    async def delete(self, key: str) -> None:
        check_key(key)
        with _s3_failures("delete", key):
            await self.client.delete_object(Bucket=self.bucket, Key=key)

    async def keys(self) -> AsyncIterator[str]:
        with _s3_failures("listing", self.bucket):
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
            async for page in pages:
                for entry in page.get("Contents", []):
                    yield entry["Key"]

    async def close(self) -> None:
        await self._exit_stack.aclose()


async def create_blob_store(config: Config) -> BlobStore:
    settings = config.settings.blobs
    if not settings.s3_endpoint:
        return LocalBlobStore(config.data_dir / "blobs")
    return await S3BlobStore.connect(settings.s3_endpoint, settings.s3_bucket, settings.s3_access_key,
                                     settings.s3_secret_key, settings.s3_region)
