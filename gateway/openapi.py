"""The OpenAPI 3.1 document of a service, generated from its routes and the marshmallow schemas
they are declared with, so the published contract cannot drift from the code.

A handler declares what it takes and answers with `@api_doc(...)`, next to its route:

    @routes.post("/api/v1/bookmarks", name="add_bookmark")
    @api_doc("Save a bookmark", body=BookmarkSchema, responses={201: SavedSchema}, errors=(400, 401))
    async def add_bookmark(request): ...

`GET /api/v1/openapi.json` serves the document and `GET /api/v1/docs` a page that lists it
(no script, nothing fetched from elsewhere: it works offline). A route without `api_doc` is
listed with `x-undocumented: true`, and the test suite fails on it."""
from __future__ import annotations

import functools
import html
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, TypeVar

import marshmallow
from aiohttp import web
from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin

OPENAPI_PATH = "/api/v1/openapi.json"
DOCS_PATH = "/api/v1/docs"
ASYNCAPI_PATH = "/api/v1/asyncapi.json"  # gateway/asyncapi.py: the frames of the WebSocket endpoints

# What each error status means in every service (the body is always ErrorBody).
ERROR_MEANINGS = {
    400: "The request does not fit: a field, the body or the query is wrong.",
    401: "No valid credential.",
    403: "The credential may not do this.",
    404: "No such resource.",
    405: "The method is not allowed here.",
    409: "The request conflicts with what is stored.",
    413: "The body is too large.",
    415: "The media type is not accepted.",
    416: "The requested range cannot be served.",
    422: "The request is well formed but cannot be processed.",
    429: "Too many requests; see Retry-After.",
    502: "A peer or upstream answered badly.",
    503: "A component this request needs is unavailable; try again later.",
    504: "A peer or upstream did not answer in time.",
}
# Statuses any route may answer, whatever it declares (the core's middleware).
ALWAYS = (500,)


class ErrorBody(marshmallow.Schema):
    """Every error of every service (spec: "Errors")."""

    error = marshmallow.fields.String(required=True, metadata={"description": "What went wrong, for a person."})
    errorType = marshmallow.fields.String(required=True, metadata={"description": "What went wrong, for a program."})
    hint = marshmallow.fields.String(allow_none=True, metadata={"description": "What to do about it."})


@dataclass
class ApiDoc:
    summary: str
    body: Any = None
    query: Any = None
    responses: Mapping[int, Any] = field(default_factory=dict)
    errors: tuple[int, ...] = ()
    auth: str = "user"                     # "none", "user", "admin", "peer", "webhook"
    content_type: str = "application/json"  # of the request body
    produces: str = "application/json"      # of the successful response
    description: str = ""
    tags: tuple[str, ...] = ()


Handler = TypeVar("Handler", bound=Callable[..., Any])


def api_doc(summary: str, *, body: Any = None, query: Any = None, responses: Mapping[int, Any] | None = None,
            errors: tuple[int, ...] = (), auth: str = "user", content_type: str = "application/json",
            produces: str = "application/json", description: str = "",
            tags: tuple[str, ...] = ()) -> Callable[[Handler], Handler]:
    """Declare a handler's request and answers for the OpenAPI document. `responses` maps a
    status to a schema (None: no body); `errors` lists the error statuses it may answer."""
    doc = ApiDoc(summary, body, query, dict(responses or {200: None}), tuple(errors), auth, content_type,
                 produces, description, tuple(tags))

    def decorate(handler: Handler) -> Handler:
        handler.__api_doc__ = doc  # type: ignore[attr-defined]
        return handler

    return decorate


def doc_of(handler: Any) -> ApiDoc | None:
    while isinstance(handler, functools.partial):
        handler = handler.func
    return getattr(handler, "__api_doc__", None)


_PARAMETER = re.compile(r"\{([^}:]+)(?::[^}]*)?\}")
SECURITY: dict[str, list[dict[str, list[str]]]] = {
    "user": [{"bearer": []}],
    "admin": [{"bearer": []}],
    "peer": [{"bearer": []}],
    "webhook": [{"webhookKey": []}],
    "none": [],
}


def _schema_instance(schema: Any) -> marshmallow.Schema | None:
    if schema is None:
        return None
    return schema() if isinstance(schema, type) else schema


def build_document(app: web.Application, title: str, version: str) -> dict:
    """The OpenAPI document of every route `app` answers."""
    spec = APISpec(title=title, version=version, openapi_version="3.1.0", plugins=[MarshmallowPlugin()],
                   info={"description": "Generated from the routes and their marshmallow schemas."})
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer",
                                               "description": "An access token, or the peer credential "
                                                              "(SERVICE_TOKEN) between services."})
    spec.components.security_scheme("webhookKey", {"type": "apiKey", "in": "header", "name": "X-Webhook-Key"})
    spec.components.schema("ErrorBody", schema=ErrorBody)
    paths: dict[str, dict[str, dict]] = {}
    for route in app.router.routes():
        method = route.method.upper()
        resource = route.resource
        if method in ("HEAD", "*") or resource is None:
            continue
        path = _PARAMETER.sub(r"{\1}", resource.canonical)
        doc = doc_of(route.handler)
        paths.setdefault(path, {})[method.lower()] = _operation(spec, path, route, doc)
    for path in sorted(paths):
        spec.path(path=path, operations=paths[path])
    return spec.to_dict()


def _operation(spec: APISpec, path: str, route: web.AbstractRoute, doc: ApiDoc | None) -> dict:
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                  for name in _PARAMETER.findall(path)]
    if doc is None:
        return {"summary": route.name or path, "parameters": parameters, "x-undocumented": True,
                "responses": {"default": {"description": "Not documented."}}}
    operation: dict[str, Any] = {"summary": doc.summary, "operationId": route.name or None,
                                 "security": SECURITY.get(doc.auth, SECURITY["user"])}
    if doc.description:
        operation["description"] = doc.description
    if doc.tags:
        operation["tags"] = list(doc.tags)
    query = _schema_instance(doc.query)
    if query is not None:
        parameters.append({"in": "query", "schema": query})
    if parameters:
        operation["parameters"] = parameters
    body = _schema_instance(doc.body)
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {doc.content_type: {"schema": body}}}
    elif doc.content_type.startswith("multipart/"):
        operation["requestBody"] = {"required": True, "content": {doc.content_type: {"schema": {"type": "object"}}}}
    responses: dict[str, dict] = {}
    for status, schema in doc.responses.items():
        instance = _schema_instance(schema)
        entry: dict[str, Any] = {"description": "Success." if status < 300 else "Answer."}
        if instance is not None:
            entry["content"] = {doc.produces: {"schema": instance}}
        elif status != 204 and doc.produces != "application/json":
            entry["content"] = {doc.produces: {"schema": {"type": "string", "format": "binary"}}}
        responses[str(status)] = entry
    statuses = set(doc.errors) | set(ALWAYS)
    if doc.auth in ("user", "admin", "peer", "webhook"):
        statuses.add(401)
    if doc.auth == "admin":
        statuses.add(403)
    if body is not None or query is not None:
        statuses.add(400)
    for status in sorted(statuses):
        responses[str(status)] = {"description": ERROR_MEANINGS.get(status, "The server failed."),
                                  "content": {"application/json": {"schema": "ErrorBody"}}}
    operation["responses"] = responses
    return {key: value for key, value in operation.items() if value is not None}


def undocumented(document: dict) -> list[str]:
    """`METHOD /path` of every operation declared without `api_doc`."""
    return [f"{method.upper()} {path}" for path, operations in document.get("paths", {}).items()
            for method, operation in operations.items() if operation.get("x-undocumented")]


def add_document_routes(app: web.Application, title: str, version: str) -> None:
    """`GET /api/v1/openapi.json` and `GET /api/v1/docs`; the document is built once, on first use
    (every route is added by then)."""
    cache: list[dict] = []

    def document() -> dict:
        if not cache:
            cache.append(build_document(app, title, version))
        return cache[0]

    @api_doc("This service's OpenAPI document", auth="none")
    async def openapi(request: web.Request) -> web.Response:
        return web.json_response(document())

    @api_doc("A page listing this service's endpoints", auth="none", produces="text/html")
    async def docs(request: web.Request) -> web.Response:
        return web.Response(text=render_page(document()), content_type="text/html",
                            headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"})

    app.router.add_get(OPENAPI_PATH, openapi, name="openapi")
    app.router.add_get(DOCS_PATH, docs, name="api_docs")


def render_page(document: dict) -> str:
    """Each operation with its parameters, body and answers, schemas spelled out below."""
    esc = html.escape
    info = document.get("info", {})
    rows = []
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            answers = ", ".join(operation.get("responses", {}))
            rows.append(f"<tr><td class=m>{esc(method.upper())}</td><td><code>{esc(path)}</code></td>"
                        f"<td>{esc(operation.get('summary', ''))}</td><td>{esc(answers)}</td>"
                        f"<td><details><summary>details</summary><pre>{esc(_json(operation))}</pre>"
                        f"</details></td></tr>")
    schemas = document.get("components", {}).get("schemas", {})
    schema_rows = "".join(f"<h3 id='schema-{esc(name)}'>{esc(name)}</h3><pre>{esc(_json(schema))}</pre>"
                          for name, schema in sorted(schemas.items()))
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(info.get('title', 'API'))}"
            f"</title><style>body{{font:14px system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse}}"
            f"td,th{{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}}"
            f".m{{font-weight:bold}}pre{{background:#f6f6f6;padding:6px;overflow:auto}}</style></head><body>"
            f"<h1>{esc(info.get('title', 'API'))} <small>{esc(str(info.get('version', '')))}</small></h1>"
            f"<p>OpenAPI {esc(str(document.get('openapi', '')))} document: "
            f"<a href='{OPENAPI_PATH}'>{OPENAPI_PATH}</a></p>"
            + (f"<p>AsyncAPI 3.0 document of its WebSocket frames: <a href='{ASYNCAPI_PATH}'>{ASYNCAPI_PATH}</a></p>"
               if ASYNCAPI_PATH in document.get("paths", {}) else "")
            + f"<table><tr><th>method</th><th>path</th><th>summary</th><th>answers</th><th></th></tr>"
            f"{''.join(rows)}</table><h2>Schemas</h2>{schema_rows}</body></html>")


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
