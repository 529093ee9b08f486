"""The files endpoints (spec: "Files"). The handlers reach the app's `FileStore` under
`FILE_STORE`."""
from __future__ import annotations

import logging

import marshmallow
from aiohttp import web

from gateway.downloads import send_blob
from gateway.errors import BadRequest, NotFound, Unauthorized
from gateway.identity import owner_for, require_user
from gateway.openapi import api_doc
from gateway.validation import MAX_OFFSET, parse_query, with_multipart_field

from . import imaging
from .naming import content_disposition
from .schemas import FileDeleted, FilePage, FileRecord, SignedDownloadQuery, UploadForm, UploadQuery
from .sniffing import RASTER_IMAGE_TYPES
from .store import FileStore, file_missing, image_rejected

log = logging.getLogger("plugins.files")

THUMBNAIL_CACHE_CONTROL = "public, max-age=86400"
# Uploaded content is the user's, not ours: never let a browser run or sniff it.
SAFE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
}

FILE_STORE = web.AppKey("files.store", FileStore)

routes = web.RouteTableDef()


class ListQuery(marshmallow.Schema):
    page = marshmallow.fields.Integer(load_default=1,
                                      validate=marshmallow.validate.Range(min=1, max=MAX_OFFSET // 100))
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


@routes.post("/api/v1/files/upload", name="files.upload")
@api_doc("Upload a file (multipart field `file`, up to 20 MB)", body=UploadForm, content_type="multipart/form-data",
         query=UploadQuery, responses={201: FileRecord}, errors=(403, 502, 503))
async def upload(request: web.Request) -> web.Response:
    files = request.config_dict[FILE_STORE]
    identity = await require_user(request)
    owner = owner_for(identity, request.query.get("user_id"))
    if not request.content_type.startswith("multipart/"):
        raise BadRequest("Send the file as multipart/form-data in the field `file`.",
                         error_type="validation_error")
    record = await with_multipart_field(request, ("file",), lambda part: files.store_upload(part, owner),
                                        hint="Name the file field `file`.")
    return web.json_response(file_json(record), status=201)


@routes.get("/api/v1/files", name="files.list")
@api_doc("A page of the caller's files (the administrator: everyone's, or one user's)", query=ListQuery,
         responses={200: FilePage}, errors=(403, 503))
async def list_files(request: web.Request) -> web.Response:
    files = request.config_dict[FILE_STORE]
    identity = await require_user(request)
    query = parse_query(request, ListQuery())
    owner = None if identity.is_admin and not query["user_id"] else owner_for(identity, query["user_id"])
    rows, total = await files.list_files(owner, query["limit"], (query["page"] - 1) * query["limit"])
    return web.json_response({"files": [file_json(row) for row in rows], "total": total,
                              "page": query["page"], "limit": query["limit"]})


@routes.get("/api/v1/files/{file_id}", name="files.get")
@api_doc("One file's record", responses={200: FileRecord}, errors=(404, 503))
async def get_file(request: web.Request) -> web.Response:
    files = request.config_dict[FILE_STORE]
    identity = await require_user(request)
    record = await files.reachable(identity, request.match_info["file_id"])
    return web.json_response(file_json(record))


@routes.get("/api/v1/files/{file_id}/download", name="files.download")
@api_doc("The file's bytes, whole or one byte range", query=SignedDownloadQuery, auth="optional",
         responses={200: {"*/*": None}, 206: {"*/*": None}}, errors=(404, 416, 502, 503),
         headers={"Range": "One byte range, `bytes=<first>-<last>`"},
         response_headers={"Content-Disposition": "attachment, with the file's name",
                           "ETag": "The SHA-256 of the content", "Accept-Ranges": "`bytes`",
                           "Content-Range": "206 only: the range sent"})
async def download(request: web.Request) -> web.StreamResponse:
    files = request.config_dict[FILE_STORE]
    if "signature" in request.query:
        file_id = request.match_info["file_id"]
        if not files.signed_request_valid(request, file_id):
            raise Unauthorized("The download link is invalid or has expired.", error_type="invalid_signature")
        record = await files.find(file_id)
        if record is None:
            raise NotFound(f"No file {file_id}.", error_type="file_not_found")
    else:
        identity = await require_user(request)
        record = await files.reachable(identity, request.match_info["file_id"])
    size = await files.ensure_stored(record)
    return await send_blob(request, files.context.blobs, record["storage_key"], size, {
        **SAFE_HEADERS,
        "Content-Type": record["mime_type"],
        "Content-Disposition": content_disposition(record["filename"]),
        "ETag": f"\"{record['hash']}\"",
        "Cache-Control": "private, max-age=0, must-revalidate",
    }, missing=lambda: file_missing(str(record["id"])))  # removed between the size check and the read


@routes.get("/api/v1/files/{file_id}/thumbnail", name="files.thumbnail")
@api_doc("A JPEG thumbnail of an image (at most 300x300), or an SVG icon for other files",
         responses={200: {"image/jpeg": None, "image/svg+xml": None}}, errors=(404, 502, 503),
         response_headers={"Cache-Control": "`public, max-age=86400`"})
async def thumbnail(request: web.Request) -> web.Response:
    files = request.config_dict[FILE_STORE]
    identity = await require_user(request)
    record = await files.reachable(identity, request.match_info["file_id"])
    headers = {**SAFE_HEADERS, "Cache-Control": THUMBNAIL_CACHE_CONTROL}
    if record["mime_type"] in RASTER_IMAGE_TYPES:
        await files.ensure_stored(record)
        try:
            data = await files.thumbnail(record)
        except imaging.ImageRejected as error:
            if error.reason == "too_many_pixels":
                raise image_rejected(error) from None
            # A truncated or corrupt image still gets a picture a client can show.
            log.info("thumbnail of %s failed: %s", record["id"], error)
        else:
            return web.Response(body=data, content_type="image/jpeg", headers=headers)
    return web.Response(body=imaging.placeholder_svg(record["mime_type"]), content_type="image/svg+xml",
                        headers=headers)


@routes.delete("/api/v1/files/{file_id}", name="files.delete")
@api_doc("Delete a file and its thumbnail", responses={200: FileDeleted}, errors=(404, 502, 503))
async def delete_file(request: web.Request) -> web.Response:
    files = request.config_dict[FILE_STORE]
    identity = await require_user(request)
    record = await files.reachable(identity, request.match_info["file_id"])
    await files.delete(record)
    return web.json_response({"status": "deleted"})
