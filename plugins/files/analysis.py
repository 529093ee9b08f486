"""Image analysis: measurements by Pillow (format, size, dominant colours, EXIF) and a
description from the AI core's vision model when one is routed, else one written locally
from the measurements.

The AI core is reached through its client (the `AI_CORE` contract: `POST /api/v1/vision/describe`
with the service credential); any failure there (no model routed, model failed, core down or
slow) falls back to the local description, so analysis always answers. The handlers reach the
file store under the files plugin's `FILE_STORE` and the AI core through the context's contracts."""
from __future__ import annotations

import base64
import io
import logging
from typing import IO

import marshmallow
from aiohttp import BodyPartReader, web

from gateway.context import get_context
from gateway.errors import BadRequest
from gateway.identity import Identity, require_user
from gateway.openapi import api_doc
from gateway.validation import load, read_json, read_part, with_multipart_field
from plugins.ai_core.contract import AI_CORE, AiCore, AiCoreError

from . import imaging
from .api import FILE_STORE
from .schemas import ImageAnalysis, ImageForm
from .store import image_rejected, unsupported_type
from .sniffing import RASTER_IMAGE_TYPES, UnsupportedType, sniff

log = logging.getLogger("plugins.images")

MAX_ANALYSIS_UPLOAD_BYTES = 10 * 1024 * 1024
ANALYSIS_UPLOAD_TYPES = frozenset({"image/jpeg", "image/png", "image/gif"})
VISION_PROMPT = ("Describe this image in two or three sentences: what it shows, the setting, "
                 "and anything notable.")

routes = web.RouteTableDef()


class AnalyzeBody(marshmallow.Schema):
    file_id = marshmallow.fields.String(required=True, validate=marshmallow.validate.Length(min=1, max=64))


async def describe(ai_core: AiCore, jpeg: bytes, user_id: str) -> tuple[str, str] | None:
    """(description, model) from the AI core's vision model, or None when it cannot help."""
    try:
        described = await ai_core.describe_image(
            "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii"), prompt=VISION_PROMPT,
            user_id=user_id)
    except AiCoreError as error:
        log.info("vision description unavailable (%s): %s", error.error_type, error.error)
        return None
    description = described["description"].strip()
    return (description, described["model"]) if description else None


async def analyze(request: web.Request, source: IO[bytes], file_size: int, user_id: str) -> dict:
    files = request.config_dict[FILE_STORE]
    try:
        result, preview = await files.run_image_work(imaging.analyze_image, source, file_size, True)
    except imaging.ImageRejected as error:
        raise image_rejected(error) from None
    ai_core = get_context(request).contracts.require(AI_CORE)
    described = await describe(ai_core, preview, user_id) if preview else None
    if described:
        result["description"], result["model"] = described
        result["analyzed_by"] = "openai_vision"
    else:
        result["analyzed_by"] = "local"
    return result


async def analyze_stored(request: web.Request, identity: Identity, file_id: str) -> dict:
    files = request.config_dict[FILE_STORE]
    record = await files.reachable(identity, file_id)
    if record["mime_type"] not in RASTER_IMAGE_TYPES:
        raise unsupported_type(f"file {file_id} is {record['mime_type']}, not a raster image")
    size = await files.ensure_stored(record)
    source = await files.spool(record["storage_key"], file_id)
    try:
        return await analyze(request, source, size, record["user_id"])
    finally:
        source.close()


@routes.post("/api/v1/images/analyze", name="files.analyze_image")
@api_doc("Analyse an image: a stored file by id (JSON), or an uploaded one (multipart `file` or `image`)",
         body={"application/json": AnalyzeBody, "multipart/form-data": ImageForm}, responses={200: ImageAnalysis},
         errors=(404, 502, 503))
async def handle_analyze(request: web.Request) -> web.Response:
    identity = await require_user(request)
    if not request.content_type.startswith("multipart/"):
        body = load(AnalyzeBody(), await read_json(request), "body")
        return web.json_response(await analyze_stored(request, identity, body["file_id"]))

    async def analyze_part(part: BodyPartReader) -> dict:
        data = await read_limited(part)
        return await analyze(request, io.BytesIO(data), len(data), identity.user_id)

    result = await with_multipart_field(
        request, ("file", "image"), analyze_part,
        hint="Send the image in the field `file` (or `image`), or JSON {\"file_id\": ...}.")
    return web.json_response(result)


@routes.get("/api/v1/images/analyze/{file_id}", name="files.analyze_stored_image")
@api_doc("Analyse a stored image", responses={200: ImageAnalysis}, errors=(404, 502, 503))
async def handle_analyze_file(request: web.Request) -> web.Response:
    identity = await require_user(request)
    return web.json_response(await analyze_stored(request, identity, request.match_info["file_id"]))


async def read_limited(part: BodyPartReader) -> bytes:
    """The whole part (Pillow needs it all anyway), refused as soon as it passes 10 MB."""
    data = await read_part(part, MAX_ANALYSIS_UPLOAD_BYTES, lambda: BadRequest(
        "The image is larger than 10 MB.", error_type="file_too_large",
        hint=f"Send at most {MAX_ANALYSIS_UPLOAD_BYTES} bytes."))
    try:
        mime_type = sniff(data[:4096], part.headers.get("Content-Type", ""), part.filename or "")
    except UnsupportedType as error:
        raise unsupported_type(str(error)) from None
    if mime_type not in ANALYSIS_UPLOAD_TYPES:
        raise unsupported_type(f"{mime_type} cannot be analysed; send JPEG, PNG or GIF")
    return data
