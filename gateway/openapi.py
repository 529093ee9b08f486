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
    431: "The request line or its headers are too large (answered before any route is chosen).",
    502: "A peer or upstream answered badly.",
    503: "A component this request needs is unavailable; try again later.",
    504: "A peer or upstream did not answer in time.",
}
# Statuses any route may answer, whatever it declares (the core's middleware, and the service's
# runner for a request line or headers over aiohttp's limits: gateway.serving.ServiceRunner).
ALWAYS = (431, 500)


class ErrorBody(marshmallow.Schema):
    """Every error of every service (spec: "Errors"). Some carry more (a validation error its
    `fields`, the console the services' states), so other members are allowed."""

    class Meta:
        unknown = marshmallow.INCLUDE

    error = marshmallow.fields.String(required=True, metadata={"description": "What went wrong, for a person."})
    errorType = marshmallow.fields.String(required=True, metadata={"description": "What went wrong, for a program."})
    hint = marshmallow.fields.String(allow_none=True, metadata={"description": "What to do about it."})
    field_errors = marshmallow.fields.Dict(data_key="fields",
                                           metadata={"description": "Validation errors: each field's messages."})


@dataclass(frozen=True, eq=False)
class Credential:
    """A way of calling that a plugin defines and the core does not know (a platform's signed
    request, a shared key): the security requirements an operation lists (any one of them), the
    schemes they name, and the statuses a bad one is answered with. Passed as `api_doc(auth=...)`."""
    requirements: tuple[tuple[str, ...], ...]
    schemes: Mapping[str, Mapping[str, Any]]
    errors: tuple[int, ...] = (401,)

    def security(self) -> list[dict[str, list[str]]]:
        return [{name: [] for name in requirement} for requirement in self.requirements]


@dataclass
class ApiDoc:
    summary: str
    body: Any = None
    query: Any = None
    responses: Mapping[int | str, Any] = field(default_factory=dict)  # a status, or "default"
    errors: tuple[int, ...] = ()
    auth: "str | Credential" = "user"      # a key of SECURITY, or a plugin's own credential
    content_type: str = "application/json"  # of the request body
    produces: str = "application/json"      # of the successful response
    description: str = ""
    tags: tuple[str, ...] = ()
    body_required: bool = True
    headers: Mapping[str, str] = field(default_factory=dict)
    response_headers: Mapping[str, str] = field(default_factory=dict)
    path: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


Handler = TypeVar("Handler", bound=Callable[..., Any])


def api_doc(summary: str, *, body: Any = None, query: Any = None, responses: Mapping[int | str, Any] | None = None,
            errors: tuple[int, ...] = (), auth: "str | Credential" = "user", content_type: str = "application/json",
            produces: str = "application/json", description: str = "", tags: tuple[str, ...] = (),
            body_required: bool = True, headers: Mapping[str, str] | None = None,
            response_headers: Mapping[str, str] | None = None,
            path: Mapping[str, Mapping[str, Any]] | None = None) -> Callable[[Handler], Handler]:
    """Declare a handler's request and answers for the OpenAPI document.

    `body` and each value of `responses` (keyed by status; `"default"`: any status not listed,
    as a proxy passes on whatever its service answered) is a marshmallow schema, a JSON
    schema dict, None (no body; for a media type other than JSON, a string or binary body), or
    a mapping {media type: one of those} when there are several. `content_type` and `produces`
    are the media types of a plain `body` and plain responses. `errors` lists the error statuses
    it may answer (401/403/400/413 are added from `auth` and the parameters). `headers`: request
    headers it reads, `response_headers`: headers of its successful answers (name: meaning);
    `path`: a JSON schema (pattern, format, length) per path parameter. `auth` is one of
    SECURITY's keys, or a `Credential` the plugin defines."""
    if not isinstance(auth, Credential) and auth not in SECURITY:
        raise ValueError(f"api_doc: auth {auth!r} is not one of {', '.join(SECURITY)}")
    doc = ApiDoc(summary, body, query, dict(responses or {200: None}), tuple(errors), auth, content_type,
                 produces, description, tuple(tags), body_required, dict(headers or {}),
                 dict(response_headers or {}), dict(path or {}))

    def decorate(handler: Handler) -> Handler:
        handler.__api_doc__ = doc  # type: ignore[attr-defined]
        return handler

    return decorate


def doc_of(handler: Any) -> ApiDoc | None:
    while isinstance(handler, functools.partial):
        handler = handler.func
    return getattr(handler, "__api_doc__", None)


_PARAMETER = re.compile(r"\{([^}:]+)(?::[^}]*)?\}")
# Who may call: the credentials an operation accepts (any one of the list; `{}` is none).
SECURITY: dict[str, list[dict[str, list[str]]]] = {
    "none": [],
    "user": [{"bearer": []}],                     # a person's access token or the peer credential
    "optional": [{}, {"bearer": []}],             # anonymous, or a token that is checked when sent
    "admin": [{"bearer": []}],                    # the administrator's token or the peer credential
    "peer": [{"bearer": []}],                     # the peer credential (SERVICE_TOKEN) only
    "console": [{}, {"bearer": []}, {"basic": []}],  # the console: none on loopback
}
# Statuses an `auth` adds: a bad credential, a credential that may not do this (also where a
# person's may: a key without the scope, a token the authenticator limits to fewer routes).
AUTH_ERRORS = {"user": (401, 403), "optional": (401, 403), "admin": (401, 403), "peer": (401, 403),
               "console": (401, 403), "none": ()}
# Media types whose body is text rather than bytes, when a response names no schema.
_TEXT = ("text/", "application/json", "application/x-ndjson")


def _security(auth: "str | Credential") -> list[dict[str, list[str]]]:
    return auth.security() if isinstance(auth, Credential) else SECURITY[auth]


def _schema_instance(schema: Any) -> Any:
    if schema is None or isinstance(schema, (dict, str)):
        return schema
    return schema() if isinstance(schema, type) else schema


def _media(value: Any, default_type: str) -> dict[str, Any]:
    """{media type: schema} of a body or an answer as `api_doc` takes it."""
    if isinstance(value, Mapping) and value and all("/" in key for key in value):
        return {media: _schema_instance(schema) for media, schema in value.items()}
    return {default_type: _schema_instance(value)}


def _content(media: Mapping[str, Any]) -> dict[str, dict]:
    content = {}
    for media_type, schema in media.items():
        if schema is None:
            schema = {"type": "string"} if media_type.startswith(_TEXT) else {"type": "string", "format": "binary"}
        content[media_type] = {"schema": schema}
    return content


def _name_resolver() -> Callable[[Any], str]:
    """Component names: the class name; when two plugins of one service declare schemas of the
    same name, the later one is prefixed with its package (apispec would rename it and warn)."""
    names: dict[type, str] = {}

    def resolve(schema: Any) -> str:
        cls = schema if isinstance(schema, type) else type(schema)
        if cls in names:
            return names[cls]
        base = cls.__name__.removesuffix("Schema") or cls.__name__
        package = next((part for part in cls.__module__.split(".") if part != "plugins"), "")
        name, number = base, 1
        while name in names.values():
            number += 1
            name = package.title().replace("_", "") + base + (str(number) if number > 2 else "")
        names[cls] = name
        return name

    return resolve


def build_document(app: web.Application, title: str, version: str) -> dict:
    """The OpenAPI document of every route `app` answers."""
    spec = APISpec(title=title, version=version, openapi_version="3.1.0",
                   plugins=[MarshmallowPlugin(schema_name_resolver=_name_resolver())],
                   info={"description": "Generated from the routes and their marshmallow schemas."})
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer",
                                               "description": "An access token, or the peer credential "
                                                              "(SERVICE_TOKEN) between services."})
    spec.components.security_scheme("basic", {"type": "http", "scheme": "basic",
                                              "description": "The administrator's name and password."})
    spec.components.schema("ErrorBody", schema=ErrorBody)
    paths: dict[str, dict[str, dict]] = {}
    for route in app.router.routes():
        method = route.method.upper()
        resource = route.resource
        if method in ("HEAD", "*") or resource is None:
            continue
        path = _PARAMETER.sub(r"{\1}", resource.canonical)
        doc = doc_of(route.handler)
        if doc is not None and isinstance(doc.auth, Credential):
            for name, scheme in doc.auth.schemes.items():
                if name not in spec.components.security_schemes:
                    spec.components.security_scheme(name, dict(scheme))
        paths.setdefault(path, {})[method.lower()] = _operation(path, route, doc)
    for path in sorted(paths):
        spec.path(path=path, operations=paths[path])
    return spec.to_dict()


def _operation(path: str, route: web.AbstractRoute, doc: ApiDoc | None) -> dict:
    names = _PARAMETER.findall(path)
    if doc is None:
        return {"summary": route.name or path, "x-undocumented": True,
                "parameters": [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                               for name in names],
                "responses": {"default": {"description": "Not documented."}}}
    unknown = set(doc.path) - set(names)
    if unknown:
        raise ValueError(f"api_doc of {path}: no path parameter {', '.join(sorted(unknown))}")
    parameters: list[dict] = [{"name": name, "in": "path", "required": True,
                               "schema": {"type": "string", **doc.path.get(name, {})}} for name in names]
    operation: dict[str, Any] = {"summary": doc.summary, "operationId": route.name or None,
                                 "security": _security(doc.auth)}
    if doc.description:
        operation["description"] = doc.description
    if doc.tags:
        operation["tags"] = list(doc.tags)
    query = _schema_instance(doc.query)
    if query is not None:
        parameters.append({"in": "query", "schema": query})
    parameters += [{"name": name, "in": "header", "required": False, "description": meaning,
                    "schema": {"type": "string"}} for name, meaning in doc.headers.items()]
    if parameters:
        operation["parameters"] = parameters
    body = _media(doc.body, doc.content_type) if doc.body is not None else None
    if body is None and doc.content_type.startswith("multipart/"):
        body = {doc.content_type: {"type": "object"}}
    if body is not None:
        operation["requestBody"] = {"required": doc.body_required, "content": _content(body)}
    responses: dict[str, dict] = {}
    for status, answer in doc.responses.items():
        success = isinstance(status, int) and 200 <= status < 300
        entry: dict[str, Any] = {"description": "Success." if success else
                                 "Any other answer." if status == "default" else "Answer."}
        media = _media(answer, doc.produces)
        if status not in (101, 204, 304) and not (set(media) == {"application/json"} and answer is None):
            entry["content"] = _content(media)
        if doc.response_headers and success:
            entry["headers"] = {name: {"description": meaning, "schema": {"type": "string"}}
                                for name, meaning in doc.response_headers.items()}
        responses[str(status)] = entry
    auth_errors = doc.auth.errors if isinstance(doc.auth, Credential) else AUTH_ERRORS[doc.auth]
    statuses = set(doc.errors) | set(ALWAYS) | set(auth_errors)
    if body is not None or query is not None or names or doc.headers:
        statuses.add(400)  # a body or parameter that does not fit, or a NUL in the address
    if body is not None and any(media == "application/json" for media in body):
        statuses.add(413)
    for status in sorted(statuses):
        responses[str(status)] = {"description": ERROR_MEANINGS.get(status, "The server failed."),
                                  "content": {"application/json": {"schema": "ErrorBody"}}}
    operation["responses"] = responses
    return {key: value for key, value in operation.items() if value is not None}


def undocumented(document: dict) -> list[str]:
    """`METHOD /path` of every operation declared without `api_doc`."""
    return [f"{method.upper()} {path}" for path, operations in document.get("paths", {}).items()
            for method, operation in operations.items() if operation.get("x-undocumented")]


def add_document_routes(app: web.Application, title: str, version: str, auth: str = "none") -> None:
    """`GET /api/v1/openapi.json` and `GET /api/v1/docs`; the document is built once, on first use
    (every route is added by then)."""
    cache: list[dict] = []

    def document() -> dict:
        if not cache:
            cache.append(build_document(app, title, version))
        return cache[0]

    @api_doc("This service's OpenAPI document", auth=auth,
             responses={200: {"type": "object", "description": "An OpenAPI 3.1 document."}})
    async def openapi(request: web.Request) -> web.Response:
        return web.json_response(document())

    @api_doc("A page listing this service's endpoints", auth=auth, produces="text/html")
    async def docs(request: web.Request) -> web.Response:
        return web.Response(text=render_page(document()), content_type="text/html",
                            headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"})

    app.router.add_get(OPENAPI_PATH, openapi, name="core.openapi")
    app.router.add_get(DOCS_PATH, docs, name="core.api_docs")


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
