"""WebSocket frames to plugin handlers: a frame's `type` picks the handler a plugin registered
with `registrar.ws_message(type, schema)`; the schema validates it first. A malformed frame
gets an `error` frame naming what was wrong, and the connection stays open; a handler that
raises an ApiError gets it as an `error` frame too: this is the one place a WebSocket error is
rendered, so handlers raise and do not catch an ApiError only to answer it.

The plugin that owns a WebSocket endpoint (chat's `/ws/chat`) authenticates the handshake,
registers the connection with the hub with its identity, and feeds each text frame to
`dispatch_frame`. Handlers learn who is connected from `connection.identity`
(`require_admin(connection)` for administrator-only frames)."""
from __future__ import annotations

import json
import logging
from typing import Callable, Mapping

import marshmallow
from aiohttp import web

from .connection import Connection
from .errors import ApiError, Unauthorized, unavailable_error
from .identity import Identity, ensure_admin
from .plugins import REGISTRY
from .text import loads_utf8_safe

log = logging.getLogger("gateway.ws")


# The fields of a frame that an error about it echoes, so that the client can tell what failed.
ECHOED_FIELDS = ("session_id", "client_msg_id")


def error_frame(error: str, **extra: object) -> dict:
    return {"type": "error", "error": error, **extra}


def echoed_fields(message: Mapping[str, object]) -> dict:
    """`session_id` and `client_msg_id` of a handled frame as its handler left them: the
    strings, and a client_msg_id of None where the frame type has the field ("this answers no
    message of yours"). Anything else a frame without a schema may hold is not sent back."""
    return {name: value for name in ECHOED_FIELDS if name in message
            and (isinstance(value := message[name], str) or (value is None and name == "client_msg_id"))}


def require_identity(connection: Connection) -> Identity:
    if connection.identity is None:
        raise Unauthorized("This connection was not authenticated.", error_type="unauthorized",
                           hint="The endpoint that accepted it registers no identity with the hub.")
    return connection.identity


def require_admin(connection: Connection) -> Identity:
    """The WebSocket counterpart of `gateway.identity.require_admin`."""
    return ensure_admin(require_identity(connection))


ErrorFields = Mapping[str, object] | Callable[[], Mapping[str, object]]


async def dispatch_frame(app: web.Application, connection: Connection, raw: str, *,
                         error_fields: ErrorFields | None = None) -> None:
    """Hand one text frame to its handler. `error_fields` are added to every error frame this
    sends (an endpoint's protocol may require fields of its own on every frame); a function
    gives them when an error is sent (a timestamp).

    An error the handler raises is answered here, once, for every handler: an ApiError with its
    `error`, `errorType` and `hint` (when it has one), a store that is down with its 503 error,
    anything else with a fixed sentence (the rest goes to the log). Each such frame echoes the
    frame's `session_id` and `client_msg_id` as the handler left them: a handler that resolves
    one (the connection's session for a frame that named none, an id it made for the message)
    stores it in the frame it was given (`frame["session_id"] = session_id`) before what may
    fail, and then lets ApiErrors through. A handler catches one only to do more than answer
    (close a stream), or where no frame is being handled (a task of its own)."""
    def extra() -> Mapping[str, object]:
        return error_fields() if callable(error_fields) else error_fields or {}

    try:
        message = loads_utf8_safe(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        connection.send(error_frame(f"frame is not valid JSON: {error}", **extra()))
        return
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        connection.send(error_frame("frame must be a JSON object with a string field 'type'", **extra()))
        return
    registered = app[REGISTRY].ws_types.get(message["type"])
    if registered is None:
        known = ", ".join(sorted(app[REGISTRY].ws_types))
        connection.send(error_frame(f"unknown message type {message['type']!r}; known: {known}", **extra()))
        return
    if registered.schema is not None:
        try:
            message = registered.schema.load(message, unknown=marshmallow.EXCLUDE) | {"type": message["type"]}
        except marshmallow.ValidationError as error:
            details = "; ".join(f"{field}: {' '.join(map(str, texts)) if isinstance(texts, list) else texts}"
                                for field, texts in error.normalized_messages().items())
            connection.send(error_frame(f"invalid {message['type']!r} frame: {details}", **extra()))
            return
    try:
        await registered.handler(connection, message)
    except ApiError as error:
        connection.send(api_error_frame(error, message, extra()))
    except Exception as error:
        if (unavailable := unavailable_error(error)) is not None:  # a store is down: say which
            log.warning("WebSocket handler for %r: %s (%s)", message["type"], unavailable.error, error)
            connection.send(api_error_frame(unavailable, message, extra()))
            return
        log.exception("WebSocket handler for %r failed", message["type"])
        connection.send(error_frame(f"the server failed to handle a {message['type']!r} frame",
                                    **extra(), **echoed_fields(message)))


def api_error_frame(error: ApiError, message: Mapping[str, object], extra: Mapping[str, object]) -> dict:
    """The `error` frame of an ApiError raised while handling `message`."""
    described: dict[str, object] = {}
    if error.error_type:
        described["errorType"] = error.error_type
    if error.hint:
        described["hint"] = error.hint
    return error_frame(error.error, **extra, **echoed_fields(message), **described)
