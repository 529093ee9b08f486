"""The AsyncAPI 3.0 document of a service's WebSocket endpoints, generated from the marshmallow
schemas the frames are validated with (client to server: `registrar.ws_message(type, schema)`)
and declared with (server to client: `registrar.ws_server_message(type, schema, description)`),
so the published contract cannot drift from the code.

The plugin that owns a WebSocket endpoint marks its handler with `@websocket_endpoint(...)`:
each marked route is a channel carrying every registered frame type (the core's dispatch is
the same on every endpoint). `GET /api/v1/asyncapi.json` serves the document in every service
that has WebSocket frame types. The schemas are converted by apispec's marshmallow plugin, as
for the OpenAPI document (gateway/openapi.py)."""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import marshmallow
from aiohttp import web
from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from apispec.ext.marshmallow.openapi import OpenAPIConverter

from .openapi import ASYNCAPI_PATH, api_doc
from .plugins import REGISTRY

ASYNCAPI_VERSION = "3.0.0"

# What a client presents on the handshake (spec: "token" in the query, or the bearer header).
SECURITY_SCHEMES: dict[str, dict[str, str]] = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "An access token in the Authorization header."},
    "tokenQuery": {"type": "httpApiKey", "in": "query", "name": "token",
                   "description": "An access token in the query: browsers cannot set headers on a WebSocket."},
    "basic": {"type": "http", "scheme": "basic", "description": "The administrator's name and password."},
}
AUTH_SCHEMES = {"user": ("bearer", "tokenQuery"), "admin": ("bearer", "tokenQuery"), "none": ()}


class ErrorFrame(marshmallow.Schema):
    """What `gateway.ws.dispatch_frame` answers a frame it cannot take (not JSON, an unknown
    type, a field that does not fit) or a handler's ApiError with. An endpoint whose protocol
    adds fields to it (`error_fields`) declares `error` itself with a subclass of this."""

    error = marshmallow.fields.String(required=True, metadata={"description": "What went wrong, for a person."})
    errorType = marshmallow.fields.String(metadata={"description": "What went wrong, for a program."})
    hint = marshmallow.fields.String(metadata={"description": "What to do about it, when there is something."})
    session_id = marshmallow.fields.String(metadata={"description": "The session of the frame it answers, "
                                                                    "when that frame has one."})
    client_msg_id = marshmallow.fields.String(allow_none=True, metadata={
        "description": "The message it answers, when one (null: the frame named none)."})


@dataclass
class Frame:
    """One frame type of a channel."""
    type: str
    schema: marshmallow.Schema | None
    description: str = ""


@dataclass
class Channel:
    """One WebSocket endpoint: what clients send it (`receives`) and what it sends (`sends`)."""
    address: str
    summary: str
    receives: list[Frame] = field(default_factory=list)
    sends: list[Frame] = field(default_factory=list)
    query: marshmallow.Schema | None = None
    security: tuple[str, ...] = ()
    description: str = ""


@dataclass
class EndpointDoc:
    summary: str
    query: Any = None
    auth: str = "user"
    description: str = ""


Handler = TypeVar("Handler", bound=Callable[..., Any])


def websocket_endpoint(summary: str, *, query: Any = None, auth: str = "user",
                       description: str = "") -> Callable[[Handler], Handler]:
    """Mark a route's handler as a WebSocket endpoint fed to `gateway.ws.dispatch_frame`: it is
    a channel of the service's AsyncAPI document. `query`: the handshake's query schema."""
    doc = EndpointDoc(summary, query, auth, description)

    def decorate(handler: Handler) -> Handler:
        handler.__websocket_doc__ = doc  # type: ignore[attr-defined]
        return handler

    return decorate


def _instance(schema: type[marshmallow.Schema] | marshmallow.Schema | None) -> marshmallow.Schema | None:
    if schema is None:
        return None
    return schema() if isinstance(schema, type) else schema


def service_channels(app: web.Application) -> list[Channel]:
    """A channel per marked route, each carrying every frame type the service's plugins registered."""
    registry = app[REGISTRY]
    receives = [Frame(kind, registered.schema, f"Handled by the {registered.plugin} plugin.")
                for kind, registered in sorted(registry.ws_types.items())]
    declared = dict(registry.ws_server_types)
    sends = [Frame(kind, message.schema, message.description) for kind, message in sorted(declared.items())]
    if "error" not in declared:
        sends.append(Frame("error", ErrorFrame(), "A frame the service could not take, or a handler's error."))
    channels = []
    for route in app.router.routes():
        doc: EndpointDoc | None = getattr(route.handler, "__websocket_doc__", None)
        if doc is None or route.resource is None:
            continue
        channels.append(Channel(route.resource.canonical, doc.summary, receives, sends, _instance(doc.query),
                                AUTH_SCHEMES.get(doc.auth, AUTH_SCHEMES["user"]), doc.description))
    return channels


def build_document(title: str, version: str, channels: list[Channel], description: str = "") -> dict:
    """The AsyncAPI 3.0 document of `channels`. Each frame's payload is the JSON Schema of its
    marshmallow schema with `type` fixed to the frame's type; nested schemas are components."""
    plugin = MarshmallowPlugin()
    spec = APISpec(title=title, version=version, openapi_version="3.1.0", plugins=[plugin])
    converter = plugin.converter
    assert converter is not None  # set by APISpec when it registers the plugin
    messages: dict[str, dict] = {}
    document_channels: dict[str, dict] = {}
    operations: dict[str, dict] = {}
    used_schemes: set[str] = set()
    for channel in channels:
        key = _key(channel.address)
        entry: dict[str, Any] = {"address": channel.address, "title": channel.summary, "messages": {}}
        if channel.description:
            entry["description"] = channel.description
        binding: dict[str, Any] = {"method": "GET", "bindingVersion": "0.1.0"}
        if channel.query is not None:
            binding["query"] = converter.schema2jsonschema(channel.query)
        entry["bindings"] = {"ws": binding}
        for direction, action, frames in (("client", "receive", channel.receives), ("server", "send", channel.sends)):
            if not frames:
                continue
            for frame in frames:
                name = f"{direction}.{frame.type}"
                if name not in messages:
                    messages[name] = _message(converter, frame, inbound=direction == "client")
                entry["messages"][name] = {"$ref": f"#/components/messages/{name}"}
            operation: dict[str, Any] = {
                "action": action, "channel": {"$ref": f"#/channels/{key}"},
                "summary": ("Frames clients send on " if action == "receive" else "Frames sent to clients on ")
                           + channel.address,
                "messages": [{"$ref": f"#/channels/{key}/messages/{direction}.{frame.type}"} for frame in frames]}
            if channel.security:
                operation["security"] = [{"$ref": f"#/components/securitySchemes/{name}"}
                                         for name in channel.security]
                used_schemes.update(channel.security)
            operations[f"{key}.{action}"] = operation
        document_channels[key] = entry
    components: dict[str, Any] = {"messages": messages,
                                  "schemas": spec.to_dict().get("components", {}).get("schemas", {})}
    if used_schemes:
        components["securitySchemes"] = {name: SECURITY_SCHEMES[name] for name in sorted(used_schemes)}
    return {"asyncapi": ASYNCAPI_VERSION,
            "info": {"title": title, "version": version,
                     "description": description or "Generated from the marshmallow schemas the frames are "
                                                   "validated and declared with."},
            "defaultContentType": "application/json",
            "channels": document_channels, "operations": operations, "components": components}


def _message(converter: OpenAPIConverter, frame: Frame, inbound: bool) -> dict:
    """A frame's message object; its payload requires `type` to be the frame's type. Clients may
    send fields a schema does not name (the dispatch ignores them); the server sends none."""
    payload: dict[str, Any] = (copy.deepcopy(converter.schema2jsonschema(frame.schema)) if frame.schema is not None
                               else {"type": "object", "properties": {}})
    payload["properties"] = {"type": {"type": "string", "const": frame.type}, **payload.get("properties", {})}
    payload["required"] = sorted({"type", *payload.get("required", [])})
    if inbound:
        payload.pop("additionalProperties", None)
    else:
        payload["additionalProperties"] = False
    message: dict[str, Any] = {"name": frame.type, "title": frame.type, "payload": payload}
    if frame.description:
        message["summary"] = frame.description
    return message


def _key(address: str) -> str:
    """A component key (`^[a-zA-Z0-9._-]+$`) for a channel's address."""
    return re.sub(r"[^A-Za-z0-9._-]+", ".", address.strip("/")) or "root"


def add_document_route(app: web.Application, title: str, version: str,
                       channels: Callable[[web.Application], list[Channel]] = service_channels,
                       description: str = "", auth: str = "none") -> None:
    """`GET /api/v1/asyncapi.json`; the document is built once, on first use (every route and
    frame type is registered by then). `auth`: as the service's OpenAPI document routes."""
    cache: list[dict] = []

    @api_doc("This service's AsyncAPI document: the frames of its WebSocket endpoints", auth=auth,
             responses={200: {"type": "object", "description": "An AsyncAPI 3.0 document."}})
    async def asyncapi(request: web.Request) -> web.Response:
        if not cache:
            cache.append(build_document(title, version, channels(request.app), description))
        return web.json_response(cache[0])

    app.router.add_get(ASYNCAPI_PATH, asyncapi, name="core.asyncapi")
