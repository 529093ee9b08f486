"""WebSocket frames to plugin handlers: a frame's `type` picks the handler a plugin registered
with `registrar.ws_message(type, schema)`; the schema validates it first. A malformed frame
gets an `error` frame naming what was wrong, and the connection stays open; a handler that
raises an ApiError gets it as an `error` frame too.

The plugin that owns a WebSocket endpoint (chat's `/ws/chat`) authenticates the handshake,
registers the connection with the hub with its identity, and feeds each text frame to
`dispatch_frame`. Handlers learn who is connected from `connection.identity`
(`require_admin(connection)` for administrator-only frames)."""
from __future__ import annotations

import json
import logging
from typing import Mapping

import marshmallow
from aiohttp import web

from .errors import ApiError, Unauthorized, unavailable_error
from .hub import Connection
from .identity import Identity, ensure_admin
from .text import loads_utf8_safe
from .typedefs import REGISTRY

log = logging.getLogger("gateway.ws")


def error_frame(error: str, **extra) -> dict:
    return {"type": "error", "error": error, **extra}


def require_identity(connection: Connection) -> Identity:
    if connection.identity is None:
        raise Unauthorized("This connection was not authenticated.", error_type="unauthorized",
                           hint="The endpoint that accepted it registers no identity with the hub.")
    return connection.identity


def require_admin(connection: Connection) -> Identity:
    """The WebSocket counterpart of `gateway.identity.require_admin`."""
    return ensure_admin(require_identity(connection))


async def dispatch_frame(app: web.Application, connection: Connection, raw: str, *,
                         error_fields: Mapping[str, object] | None = None) -> None:
    """Hand one text frame to its handler. `error_fields` are added to every error frame this
    sends (an endpoint's protocol may require fields of its own on every frame)."""
    extra = error_fields or {}
    try:
        message = loads_utf8_safe(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        connection.send(error_frame(f"frame is not valid JSON: {error}", **extra))
        return
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        connection.send(error_frame("frame must be a JSON object with a string field 'type'", **extra))
        return
    registered = app[REGISTRY].ws_types.get(message["type"])
    if registered is None:
        known = ", ".join(sorted(app[REGISTRY].ws_types))
        connection.send(error_frame(f"unknown message type {message['type']!r}; known: {known}", **extra))
        return
    if registered.schema is not None:
        try:
            message = registered.schema.load(message, unknown=marshmallow.EXCLUDE) | {"type": message["type"]}
        except marshmallow.ValidationError as error:
            details = "; ".join(f"{field}: {' '.join(map(str, texts)) if isinstance(texts, list) else texts}"
                                for field, texts in error.normalized_messages().items())
            connection.send(error_frame(f"invalid {message['type']!r} frame: {details}", **extra))
            return
    try:
        await registered.handler(connection, message)
    except ApiError as error:
        connection.send(error_frame(error.error, **extra, errorType=error.error_type))
    except Exception as error:
        if (unavailable := unavailable_error(error)) is not None:  # a store is down: say which
            log.warning("WebSocket handler for %r: %s (%s)", message["type"], unavailable.error, error)
            connection.send(error_frame(unavailable.error, **extra, errorType=unavailable.error_type))
            return
        log.exception("WebSocket handler for %r failed", message["type"])
        connection.send(error_frame(f"the server failed to handle a {message['type']!r} frame", **extra))
