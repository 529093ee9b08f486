"""Uploaded files: the table, the blobs, who may reach which file, thumbnails.

One `FileStore` exists per application (made in the plugin's setup), so its thumbnail
executor and in-flight map belong to that app alone. The handlers (api.py) find it under
`FILE_STORE`; other plugins reach it through the `FILES` contract (contract.py)."""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, AsyncIterator, Callable, TypeVar

from aiohttp import BodyPartReader, web

from gateway.blobs import BlobError, BlobNotFound
from gateway.context import Context
from gateway.database import execute, fetch_all, fetch_one, fetch_required, fetch_value
from gateway.downloads import LinkSigner
from gateway.errors import BadGateway, BadRequest, NotFound
from gateway.identity import Identity

from . import imaging
from .naming import client_filename, sanitize_filename
from .sniffing import RASTER_IMAGE_TYPES, SNIFF_BYTES, UnsupportedType, sniff

T = TypeVar("T")

log = logging.getLogger("plugins.files")

MAX_UPLOAD_BYTES = 20 * 1024 * 1024
CHUNK_BYTES = 256 * 1024
# A blob handed to Pillow is spooled: in memory up to this size, on disk beyond it.
SPOOL_IN_MEMORY = 4 * 1024 * 1024

FILE_COLUMNS = ("id, user_id, filename, mime_type, size, hash, is_public, storage_key, thumbnail_key, "
                "width, height, created_at")


class FileTooLarge(BadRequest):
    error_type = "file_too_large"


def unsupported_type(reason: str) -> BadRequest:
    return BadRequest(f"This type of file is not accepted: {reason}.", error_type="unsupported_type",
                      hint="Allowed: JPEG, PNG, GIF, WebP and SVG images; PDF and Word documents; plain "
                           "text and Markdown; MP3, WAV, OGG and WebM audio; MP4 and WebM video.")


def image_rejected(error: imaging.ImageRejected) -> BadRequest:
    if error.reason == "too_many_pixels":
        return BadRequest(str(error), error_type="image_too_large",
                          hint=f"Images may have at most {imaging.max_pixels()} pixels.")
    return BadRequest(str(error), error_type="invalid_image",
                      hint="The file is truncated or corrupt; upload it again from the original.")


def file_missing(file_id: str) -> NotFound:
    return NotFound(f"The stored content of file {file_id} is gone.", error_type="file_missing",
                    hint="Upload the file again.")


class FileStore:
    def __init__(self, context: Context, executor_workers: int = 0):
        self.context = context
        self.links = LinkSigner(context.config, "files-download")  # a key of its own: a link is never a token
        self._workers = executor_workers or max(1, min(4, os.cpu_count() or 1))
        self._executor: ThreadPoolExecutor | None = None
        self._thumbnails_in_flight: dict[str, asyncio.Future] = {}

    # ----------------------------------------------------------- lifecycle

    async def lifespan(self, context: Context) -> AsyncIterator[None]:
        # Image work has its own small pool, so a burst of thumbnails cannot starve the default
        # executor that blob and file I/O use.
        self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="images")
        try:
            yield
        finally:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    async def run_image_work(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    # ----------------------------------------------------------- records and access

    async def find(self, file_id: str) -> dict | None:
        try:
            uuid.UUID(str(file_id))
        except ValueError:
            return None
        return await fetch_one(self.context.db, f"SELECT {FILE_COLUMNS} FROM files WHERE id = %s",
                               (str(file_id),))

    async def read_content(self, file_id: str) -> bytes | None:
        record = await self.find(file_id)
        if record is None:
            return None
        try:
            return await self.context.blobs.read_all(record["storage_key"])
        except BlobNotFound:
            return None

    async def reachable(self, identity: Identity, file_id: str) -> dict:
        """The record when `identity` may reach it; 404 otherwise, so others' ids stay secret."""
        record = await self.find(file_id)
        if record is None or (record["user_id"] != identity.user_id and not identity.is_admin):
            raise NotFound(f"No file {file_id}.", error_type="file_not_found",
                           hint="List your files with GET /api/v1/files.")
        return record

    async def ensure_stored(self, record: dict) -> int:
        """The stored size; 404 `file_missing` when the blob has vanished."""
        size = await self.context.blobs.size(record["storage_key"])
        if size is None:
            raise file_missing(str(record["id"]))
        return size

    # ----------------------------------------------------------- signed download URLs

    def signed_download_url(self, file_id: str, ttl: int = 300, base_url: str = "") -> str:
        """A download URL that works without a bearer token for `ttl` seconds, for a peer (the
        AI core) that fetches a user's attachment; `base_url` makes it absolute."""
        return f"{base_url.rstrip('/')}/api/v1/files/{file_id}/download?{self.links.query(file_id, ttl)}"

    def signed_request_valid(self, request: web.Request, file_id: str) -> bool:
        return self.links.valid(file_id, request.query)

    async def spool(self, key: str, file_id: str) -> IO[bytes]:
        """The blob as a seekable file for Pillow, without holding a large one in memory."""
        loop = asyncio.get_running_loop()
        spooled = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
        try:
            async for chunk in self.context.blobs.read(key):
                await loop.run_in_executor(None, spooled.write, chunk)
            spooled.seek(0)
        except BlobNotFound:
            spooled.close()
            raise file_missing(file_id) from None
        except BaseException:
            spooled.close()
            raise
        return spooled

    # ----------------------------------------------------------- upload

    async def store_upload(self, part: BodyPartReader, owner: str) -> dict:
        """Stream one multipart part into blob storage: sniffed, size-limited and hashed on the
        way, never held whole in memory."""
        loop = asyncio.get_running_loop()
        filename = sanitize_filename(client_filename(part.filename))
        head = bytearray()
        while len(head) < SNIFF_BYTES:
            chunk = await part.read_chunk(CHUNK_BYTES)
            if not chunk:
                break
            head.extend(chunk)
        if len(head) > MAX_UPLOAD_BYTES:
            raise self._too_large()
        complete = part.at_eof()
        try:
            mime_type = sniff(bytes(head), part.headers.get("Content-Type", ""), filename)
        except UnsupportedType as error:
            raise unsupported_type(str(error)) from None
        width = height = None
        if mime_type in RASTER_IMAGE_TYPES:
            try:
                dimensions = await self.run_image_work(imaging.probe_header, bytes(head), complete)
            except imaging.ImageRejected as error:
                raise image_rejected(error) from None
            if dimensions:
                width, height = dimensions

        digest = hashlib.sha256()
        received = 0

        async def content() -> AsyncIterator[bytes]:
            nonlocal received
            chunk = bytes(head)
            while chunk:
                received += len(chunk)
                if received > MAX_UPLOAD_BYTES:
                    raise self._too_large()
                # hashlib releases the GIL on large buffers, so this runs beside the loop.
                await loop.run_in_executor(None, digest.update, chunk)
                yield chunk
                chunk = await part.read_chunk(CHUNK_BYTES)

        file_id = str(uuid.uuid4())
        storage_key = f"files/{file_id}"
        try:
            size = await self.context.blobs.put(storage_key, content(), mime_type)
        except BlobError as error:
            raise BadGateway(f"The file could not be stored: {error}", error_type="storage_failed") from error
        created_at = int(time.time() * 1000)
        try:
            record = await fetch_required(
                self.context.db,
                "INSERT INTO files (id, user_id, filename, mime_type, size, hash, storage_key, width,"
                f" height, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {FILE_COLUMNS}",
                (file_id, owner, filename, mime_type, size, digest.hexdigest(), storage_key, width, height,
                 created_at))
        except BaseException:
            with contextlib.suppress(Exception):
                await self.context.blobs.delete(storage_key)
            raise
        log.info("stored file %s (%s, %d bytes) for %s", file_id, mime_type, size, owner)
        return record

    @staticmethod
    def _too_large() -> FileTooLarge:
        return FileTooLarge(f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB.",
                            hint=f"Upload at most {MAX_UPLOAD_BYTES} bytes.")

    # ----------------------------------------------------------- thumbnails

    async def thumbnail(self, record: dict) -> bytes:
        """The cached JPEG thumbnail, generated once; concurrent requests share one generation."""
        file_id = str(record["id"])
        if record["thumbnail_key"]:
            try:
                return await self.context.blobs.read_all(record["thumbnail_key"])
            except BlobNotFound:
                pass  # the cache was cleaned up: make it again
        pending = self._thumbnails_in_flight.get(file_id)
        if pending is None:
            pending = asyncio.ensure_future(self._generate_thumbnail(record))
            self._thumbnails_in_flight[file_id] = pending
            pending.add_done_callback(lambda _: self._thumbnails_in_flight.pop(file_id, None))
        return await asyncio.shield(pending)

    async def _generate_thumbnail(self, record: dict) -> bytes:
        file_id = str(record["id"])
        source = await self.spool(record["storage_key"], file_id)
        try:
            data = await self.run_image_work(imaging.make_thumbnail, source)
        finally:
            source.close()
        key = f"thumbnails/{file_id}.jpg"
        await self.context.blobs.put(key, data, "image/jpeg")
        await execute(self.context.db, "UPDATE files SET thumbnail_key = %s WHERE id = %s", (key, file_id))
        return data

    # ----------------------------------------------------------- listing and deleting

    async def list_files(self, owner: str | None, limit: int, offset: int) -> tuple[list[dict], int]:
        """A page of files, newest first, and how many there are: `owner`'s, or everyone's for None."""
        where, params = ("", ()) if owner is None else ("WHERE user_id = %s", (owner,))
        total = await fetch_value(self.context.db, f"SELECT count(*) FROM files {where}", params)
        rows = await fetch_all(
            self.context.db,
            f"SELECT {FILE_COLUMNS} FROM files {where} ORDER BY created_at DESC, id LIMIT %s OFFSET %s",
            (*params, limit, offset))
        return rows, total

    async def delete(self, record: dict) -> None:
        try:
            await self.context.blobs.delete(record["storage_key"])
            if record["thumbnail_key"]:
                await self.context.blobs.delete(record["thumbnail_key"])
        except BlobError as error:
            raise BadGateway(f"The stored file could not be removed: {error}",
                             error_type="storage_failed") from error
        await execute(self.context.db, "DELETE FROM files WHERE id = %s", (str(record["id"]),))
