"""WebSocket frames to plugin handlers: a frame's `type` picks the handler a plugin registered
with `registrar.ws_message(type, schema)`; the schema validates it first. A malformed frame
gets an `error` frame naming what was wrong, and the connection stays open."""
from __future__ import annotations

import json
import logging

import marshmallow
from aiohttp import web

from .hub import Connection
from .text import loads_utf8_safe
from .typedefs import REGISTRY

log = logging.getLogger("gateway.ws")


def error_frame(error: str, **extra) -> dict:
    return {"type": "error", "error": error, "msg_type": "system_info", **extra}


async def dispatch_frame(app: web.Application, connection: Connection, raw: str) -> None:
    try:
        message = loads_utf8_safe(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        connection.send(error_frame(f"frame is not valid JSON: {error}"))
        return
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        connection.send(error_frame("frame must be a JSON object with a string field 'type'"))
        return
    registered = app[REGISTRY].ws_types.get(message["type"])
    if registered is None:
        known = ", ".join(sorted(app[REGISTRY].ws_types))
        connection.send(error_frame(f"unknown message type {message['type']!r}; known: {known}"))
        return
    if registered.schema is not None:
        try:
            message = registered.schema.load(message, unknown=marshmallow.EXCLUDE) | {"type": message["type"]}
        except marshmallow.ValidationError as error:
            details = "; ".join(f"{field}: {' '.join(map(str, texts)) if isinstance(texts, list) else texts}"
                                for field, texts in error.normalized_messages().items())
            connection.send(error_frame(f"invalid {message['type']!r} frame: {details}"))
            return
    try:
        await registered.handler(connection, message)
    except Exception:
        log.exception("WebSocket handler for %r failed", message["type"])
        connection.send(error_frame(f"the server failed to handle a {message['type']!r} frame"))
