"""marshmallow at the edges: a request body or query string that does not fit its schema
becomes a 400 with the spec's error body, never a 500."""
from __future__ import annotations

import json
import math
import sys
from typing import Any, Awaitable, Callable, Mapping, TypeVar

import marshmallow
from aiohttp import BodyPartReader, web

from .errors import BadRequest
from .text import loads_utf8_safe

def finite_number(value: Any) -> bool:
    """A JSON number (not true/false) that a float holds, finite. JSON reads `1e309` as inf and a
    310-digit integer as an int past any float: `math.isfinite` of that int raises OverflowError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return -sys.float_info.max <= value <= sys.float_info.max  # exact: no conversion to float
    return math.isfinite(value)


def finite_numbers_only(value: Any) -> None:
    """A marshmallow validator of a `Raw` field or a dict's values: any number in it must be
    `finite_number`."""
    for item in (value.values() if isinstance(value, Mapping) else (value,)):
        if isinstance(item, (int, float)) and not isinstance(item, bool) and not finite_number(item):
            raise marshmallow.ValidationError("numbers must be finite and within the range of a "
                                              "64-bit float (about ±1.8e308)")


# The most rows a listing may skip (its offset, or the rows of the pages before the one asked
# for): more than any table here holds, and far inside PostgreSQL's bigint, OFFSET's type.
MAX_OFFSET = 10**12


def _describe(messages: Any, prefix: str = "") -> list[str]:
    if isinstance(messages, Mapping):
        parts = []
        for field, inner in messages.items():
            name = f"{prefix}.{field}" if prefix else str(field)
            parts.extend(_describe(inner, name))
        return parts
    if isinstance(messages, (list, tuple)):
        texts = [str(m) for m in messages if not isinstance(m, (Mapping, list))]
        nested = [m for m in messages if isinstance(m, (Mapping, list))]
        out = [f"{prefix}: {' '.join(texts)}" if prefix else " ".join(texts)] if texts else []
        for inner in nested:
            out.extend(_describe(inner, prefix))
        return out
    return [f"{prefix}: {messages}" if prefix else str(messages)]


def load(schema: marshmallow.Schema, data: Any, where: str = "body") -> dict:
    try:
        loaded: dict = schema.load(data)
        return loaded
    except marshmallow.ValidationError as error:
        details = "; ".join(_describe(error.messages))
        raise BadRequest(f"Invalid {where}: {details}", error_type="validation_error",
                         hint="Fix the named fields and send the request again.",
                         extra={"fields": error.messages if isinstance(error.messages, dict) else {}})


async def read_json(request: web.Request, *, allow_empty: bool = False) -> Any:
    """The request's JSON body; an empty body is `{}` when allowed."""
    raw = await request.read()
    if not raw.strip():
        if allow_empty:
            return {}
        raise BadRequest("A JSON request body is required.", error_type="validation_error",
                         hint="Send a JSON object with Content-Type: application/json.")
    try:
        return loads_utf8_safe(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequest(f"The request body is not valid JSON: {error}", error_type="invalid_json",
                         hint="Send a JSON object with Content-Type: application/json.") from None


async def parse_body(request: web.Request, schema: marshmallow.Schema, *,
                     allow_empty: bool = False) -> dict:
    data = await read_json(request, allow_empty=allow_empty)
    if not isinstance(data, dict):
        raise BadRequest("The request body must be a JSON object.", error_type="validation_error")
    return load(schema, data, "body")


def parse_query(request: web.Request, schema: marshmallow.Schema) -> dict:
    return load(schema, dict(request.query), "query")


Result = TypeVar("Result")


async def read_part(part: BodyPartReader, limit: int, too_large: Callable[[], Exception]) -> bytes:
    """A multipart part's bytes, refused with `too_large()` as soon as they pass `limit` (a large
    upload is never read whole first)."""
    data = bytearray()
    while chunk := await part.read_chunk(256 * 1024):
        data.extend(chunk)
        if len(data) > limit:
            raise too_large()
    return bytes(data)


async def each_multipart_part(request: web.Request, consume: Callable[[BodyPartReader], Awaitable[None]],
                              unreadable: Callable[[str], Exception]) -> None:
    """Hand each named part of a multipart body to `consume`, in order (a nested multipart or an
    unnamed part is released unread); a body that cannot be read raises `unreadable(reason)`."""
    try:
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader) or part.name is None:
                await part.release()
                continue
            await consume(part)
    except (ValueError, AssertionError) as error:
        raise unreadable(str(error)) from None


async def with_multipart_field(request: web.Request, names: tuple[str, ...],
                               consume: Callable[[BodyPartReader], Awaitable[Result]], *, hint: str) -> Result:
    """Stream the first multipart part named one of `names` into `consume` (other parts are
    skipped unread). A body that cannot be read, or has no such part, is a 400."""
    try:
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if isinstance(part, BodyPartReader) and part.name in names:
                return await consume(part)
            await part.release()
    except (ValueError, AssertionError) as error:
        raise BadRequest(f"The multipart body cannot be read: {error}", error_type="validation_error",
                         hint=hint) from None
    wanted = " or ".join(f"`{name}`" for name in names)
    raise BadRequest(f"The multipart body has no field {wanted}.", error_type="validation_error", hint=hint)
