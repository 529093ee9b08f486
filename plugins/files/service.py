"""Uploaded files: the table, the blobs, who may reach which file, and the HTTP handlers.

One `FileService` exists per application (made in the plugin's setup), so its thumbnail
executor and in-flight map belong to that app alone. Other plugins reach it as the `files`
service (the `FILES` contract, plugins/files/contract.py)."""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import os
import re
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import IO, AsyncIterator, Callable

import marshmallow
from aiohttp import BodyPartReader, web

from gateway.blobs import BlobError, BlobNotFound
from gateway.context import Context
from gateway.database import execute, fetch_all, fetch_one, fetch_value
from gateway.errors import ApiError, BadGateway, BadRequest, NotFound, Unauthorized
from gateway.identity import Identity, owner_for, require_user
from gateway.validation import parse_query, with_multipart_field

from . import imaging
from .naming import client_filename, content_disposition, sanitize_filename
from .sniffing import RASTER_IMAGE_TYPES, SNIFF_BYTES, UnsupportedType, sniff

log = logging.getLogger("plugins.files")

MAX_UPLOAD_BYTES = 20 * 1024 * 1024
CHUNK_BYTES = 256 * 1024
# A blob handed to Pillow is spooled: in memory up to this size, on disk beyond it.
SPOOL_IN_MEMORY = 4 * 1024 * 1024
THUMBNAIL_CACHE_CONTROL = "public, max-age=86400"
# Uploaded content is the user's, not ours: never let a browser run or sniff it.
SAFE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
}
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")

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


class ListQuery(marshmallow.Schema):
    page = marshmallow.fields.Integer(load_default=1, validate=marshmallow.validate.Range(min=1))
    limit = marshmallow.fields.Integer(load_default=20, validate=marshmallow.validate.Range(min=1, max=100))
    user_id = marshmallow.fields.String(load_default=None)


def file_json(record: dict) -> dict:
    """The spec's File object."""
    file_id = str(record["id"])
    body = {
        "id": file_id, "user_id": record["user_id"], "filename": record["filename"],
        "mime_type": record["mime_type"], "size": record["size"], "hash": record["hash"],
        "is_public": record["is_public"], "created_at": record["created_at"],
        "url": f"/api/v1/files/{file_id}/download",
    }
    if record["mime_type"].startswith("image/"):
        body["thumbnail_url"] = f"/api/v1/files/{file_id}/thumbnail"
    return body


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """(start, end exclusive) of a single byte range; None to send everything (no header, or
    several ranges, which HTTP lets a server answer whole). Unsatisfiable ranges raise 416."""
    match = _RANGE.match(header.strip()) if header else None
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:
        length = int(last)
        start, end = max(0, size - length), size
        if length == 0:
            start = size
    else:
        start = int(first)
        end = min(size, int(last) + 1) if last else size
        if last and int(last) < start:
            return None
    if start >= size or start >= end:
        raise ApiError(f"The range {header!r} is outside the file's {size} bytes.",
                       error_type="range_not_satisfiable", status=416,
                       headers={"Content-Range": f"bytes */{size}"})
    return start, end


class FileService:
    def __init__(self, context: Context, executor_workers: int = 0):
        self.context = context
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

    async def run_image_work(self, function: Callable, *args):
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    # ----------------------------------------------------------- records and access

    async def find(self, file_id: str) -> dict | None:
        try:
            uuid.UUID(str(file_id))
        except ValueError:
            return None
        return await fetch_one(self.context.db, f"SELECT {FILE_COLUMNS} FROM files WHERE id = %s",
                               (str(file_id),))

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

    def _url_signature(self, file_id: str, expires: int) -> str:
        # A key of its own, derived from the JWT secret, so a download signature is never a token.
        key = hashlib.sha256(b"files-download:" + str(self.context.config.get("auth.jwt_secret") or "").encode()).digest()
        return hmac.new(key, f"{file_id}:{expires}".encode(), hashlib.sha256).hexdigest()

    def signed_download_url(self, file_id: str, ttl: int = 300, base_url: str = "") -> str:
        """A download URL that works without a bearer token for `ttl` seconds, for a peer (the
        AI core) that fetches a user's attachment; `base_url` makes it absolute."""
        expires = int(time.time()) + int(ttl)
        return (f"{base_url.rstrip('/')}/api/v1/files/{file_id}/download"
                f"?expires={expires}&signature={self._url_signature(file_id, expires)}")

    def _signed_request_valid(self, request: web.Request, file_id: str) -> bool:
        try:
            expires = int(request.query.get("expires", ""))
        except ValueError:
            return False
        expected = self._url_signature(file_id, expires)
        return expires >= time.time() and hmac.compare_digest(expected, request.query.get("signature", ""))

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
            record = await fetch_one(
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

    # ----------------------------------------------------------- handlers

    def routes(self) -> web.RouteTableDef:
        routes = web.RouteTableDef()
        routes.post("/api/v1/files/upload", name="files_upload")(self.handle_upload)
        routes.get("/api/v1/files", name="files_list")(self.handle_list)
        routes.get("/api/v1/files/{file_id}", name="files_get")(self.handle_get)
        routes.get("/api/v1/files/{file_id}/download", name="files_download")(self.handle_download)
        routes.get("/api/v1/files/{file_id}/thumbnail", name="files_thumbnail")(self.handle_thumbnail)
        routes.delete("/api/v1/files/{file_id}", name="files_delete")(self.handle_delete)
        return routes

    async def handle_upload(self, request: web.Request) -> web.Response:
        identity = await require_user(request)
        owner = owner_for(identity, request.query.get("user_id"))
        if not request.content_type.startswith("multipart/"):
            raise BadRequest("Send the file as multipart/form-data in the field `file`.",
                             error_type="validation_error")
        record = await with_multipart_field(request, ("file",), lambda part: self.store_upload(part, owner),
                                            hint="Name the file field `file`.")
        return web.json_response(file_json(record), status=201)

    async def handle_list(self, request: web.Request) -> web.Response:
        identity = await require_user(request)
        query = parse_query(request, ListQuery())
        if identity.is_admin and not query["user_id"]:
            where, params = "", ()
        else:
            where, params = "WHERE user_id = %s", (owner_for(identity, query["user_id"]),)
        total = await fetch_value(self.context.db, f"SELECT count(*) FROM files {where}", params)
        rows = await fetch_all(
            self.context.db,
            f"SELECT {FILE_COLUMNS} FROM files {where} ORDER BY created_at DESC, id LIMIT %s OFFSET %s",
            (*params, query["limit"], (query["page"] - 1) * query["limit"]))
        return web.json_response({"files": [file_json(row) for row in rows], "total": total,
                                  "page": query["page"], "limit": query["limit"]})

    async def handle_get(self, request: web.Request) -> web.Response:
        identity = await require_user(request)
        record = await self.reachable(identity, request.match_info["file_id"])
        return web.json_response(file_json(record))

    async def handle_download(self, request: web.Request) -> web.StreamResponse:
        if "signature" in request.query:
            file_id = request.match_info["file_id"]
            if not self._signed_request_valid(request, file_id):
                raise Unauthorized("The download link is invalid or has expired.", error_type="invalid_signature")
            record = await self.find(file_id)
            if record is None:
                raise NotFound(f"No file {file_id}.", error_type="file_not_found")
        else:
            identity = await require_user(request)
            record = await self.reachable(identity, request.match_info["file_id"])
        size = await self.ensure_stored(record)
        byte_range = parse_range(request.headers.get("Range", ""), size)
        start, end = byte_range or (0, size)
        response = web.StreamResponse(status=206 if byte_range else 200, headers={
            **SAFE_HEADERS,
            "Content-Type": record["mime_type"],
            "Content-Disposition": content_disposition(record["filename"]),
            "Accept-Ranges": "bytes",
            "ETag": f"\"{record['hash']}\"",
            "Cache-Control": "private, max-age=0, must-revalidate",
        })
        if byte_range:
            response.headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        response.content_length = end - start
        if request.method == "HEAD":
            await response.prepare(request)
            return response
        chunks = self.context.blobs.read(record["storage_key"], start, end)
        try:
            first = await chunks.__anext__() if end > start else b""
        except StopAsyncIteration:
            first = b""
        except BlobNotFound:  # removed between the size check and the read
            raise file_missing(str(record["id"])) from None
        await response.prepare(request)
        await response.write(first)
        async for chunk in chunks:
            await response.write(chunk)
        await response.write_eof()
        return response

    async def handle_thumbnail(self, request: web.Request) -> web.Response:
        identity = await require_user(request)
        record = await self.reachable(identity, request.match_info["file_id"])
        headers = {**SAFE_HEADERS, "Cache-Control": THUMBNAIL_CACHE_CONTROL}
        if record["mime_type"] in RASTER_IMAGE_TYPES:
            await self.ensure_stored(record)
            try:
                data = await self.thumbnail(record)
            except imaging.ImageRejected as error:
                if error.reason == "too_many_pixels":
                    raise image_rejected(error) from None
                # A truncated or corrupt image still gets a picture a client can show.
                log.info("thumbnail of %s failed: %s", record["id"], error)
            else:
                return web.Response(body=data, content_type="image/jpeg", headers=headers)
        return web.Response(body=imaging.placeholder_svg(record["mime_type"]), content_type="image/svg+xml",
                            headers=headers)

    async def handle_delete(self, request: web.Request) -> web.Response:
        identity = await require_user(request)
        record = await self.reachable(identity, request.match_info["file_id"])
        try:
            await self.context.blobs.delete(record["storage_key"])
            if record["thumbnail_key"]:
                await self.context.blobs.delete(record["thumbnail_key"])
        except BlobError as error:
            raise BadGateway(f"The stored file could not be removed: {error}",
                             error_type="storage_failed") from error
        await execute(self.context.db, "DELETE FROM files WHERE id = %s", (str(record["id"]),))
        return web.json_response({"status": "deleted"})
