"""The gateway's memory endpoints (spec: "Memory (bearer; proxied to the memory service)"): each
asks the memory service (`peers.memory_service_url`, MEMORY_SERVICE_URL) with the service
credential, for the caller, and passes its answer on. A person is always scoped to their own
memories, whatever `user_id` they send; the administrator may name anyone. A memory service that
cannot be reached, or does not answer within `[plugins.memory_proxy] timeout`, is a 502
`memory_service_unreachable`, never a 500. The calls go through the memory client's transport
(client.py), the one way this code base reaches the memory service."""
from __future__ import annotations

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.errors import ApiError, BadRequest
from gateway.identity import Identity, require_user
from gateway.openapi import api_doc
from gateway.validation import parse_body, parse_query
from gateway.vector_store import SEARCH_MODES

from .client import MemoryTransport
from .schemas import (DEFAULT_CATEGORY, DEFAULT_PRIORITY, IDEMPOTENCY_HEADERS, MAX_LIST_LIMIT, MAX_QUERY_CHARS,
                      MAX_SEARCH_LIMIT, REPLAYED, REPLAYED_HEADERS, Category, Memory, MemoryDeleted, MemoryPage,
                      MemorySearchResults, MemoryWritten, Priority, idempotency_key)

routes = web.RouteTableDef()
TRANSPORT = web.AppKey("memory_proxy.transport", MemoryTransport)
ERRORS = (502, 503)

OWNER = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
    "description": "The administrator's choice of person; anyone else is always answered for themself."})


class SearchQuery(marshmallow.Schema):
    q = fields.String(required=True, validate=validate.Length(min=1, max=MAX_QUERY_CHARS))
    user_id = OWNER
    category = Category(load_default=None)
    limit = fields.Integer(load_default=10, validate=validate.Range(min=1, max=MAX_SEARCH_LIMIT))
    mode = fields.String(load_default="hybrid", validate=validate.OneOf(SEARCH_MODES), metadata={
        "description": "`hybrid` (default), `dense` or `lexical` (docs/memory.md)."})


class ListQuery(marshmallow.Schema):
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
        "description": "The administrator's filter (without it: everyone's memories); anyone else is always "
                       "answered with their own."})
    category = Category(load_default=None)
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=MAX_LIST_LIMIT))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=10**12))


class CreateBody(marshmallow.Schema):
    content = fields.String(required=True, validate=validate.Length(min=1))
    category = Category(load_default=DEFAULT_CATEGORY)
    priority = Priority(load_default=DEFAULT_PRIORITY)
    user_id = OWNER


class DeleteQuery(marshmallow.Schema):
    id = fields.UUID(required=True, metadata={"description": "The memory's id."})
    user_id = OWNER


def scope(identity: Identity, requested: str | None) -> str:
    """A person: themself, whatever they asked for. The administrator: whom they name, else themself."""
    return (requested or identity.user_id) if identity.is_admin else identity.user_id


async def ask(request: web.Request, method: str, path: str, *, params: dict | None = None,
              body: dict | None = None, client_key: str | None = None) -> web.Response:
    """The memory service's answer to `method path`, passed on with its status."""
    # MemoryUnavailable (not reached, credential refused) is already the spec's 502 body.
    answer = await request.config_dict[TRANSPORT].ask(method, path, params=params, body=body, client_key=client_key)
    if answer.status >= 400:
        raise ApiError(str(answer.body["error"]),
                       error_type=str(answer.body.get("errorType") or "memory_service_failed"),
                       hint=answer.body.get("hint"), status=answer.status,
                       headers={"Retry-After": answer.retry_after} if answer.retry_after else None)
    return web.json_response(answer.body, status=answer.status, headers={REPLAYED: "true"} if answer.replayed else None)


@routes.get("/api/v1/memory/search", name="memory_proxy.search")
@api_doc("Search your memories by meaning and words (the memory service's search)", query=SearchQuery,
         responses={200: MemorySearchResults}, errors=ERRORS)
async def search(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, SearchQuery())
    return await ask(request, "GET", "/api/v1/memories/search", params={
        "q": query["q"], "user_id": scope(identity, query["user_id"]), "category": query["category"],
        "limit": query["limit"], "mode": query["mode"]})


@routes.get("/api/v1/memory", name="memory_proxy.list")
@api_doc("Your memories, latest updated first (the administrator: anyone's, or everyone's)", query=ListQuery,
         responses={200: MemoryPage}, errors=ERRORS)
async def list_memories(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, ListQuery())
    owner = query["user_id"] if identity.is_admin else identity.user_id
    return await ask(request, "GET", "/api/v1/memories", params={
        "user_id": owner, "category": query["category"], "limit": query["limit"], "offset": query["offset"]})


@routes.post("/api/v1/memory", name="memory_proxy.create")
@api_doc("Remember something (merged into a near-duplicate, or superseding what it contradicts)",
         body=CreateBody, responses={201: MemoryWritten, 200: MemoryWritten}, errors=(409,) + ERRORS,
         headers=IDEMPOTENCY_HEADERS, response_headers=REPLAYED_HEADERS,
         description="A retry with the same Idempotency-Key (after a 502, say) gets the first write's answer "
                     "instead of storing the memory twice.")
async def create(request: web.Request) -> web.Response:
    identity = await require_user(request)
    client_key = idempotency_key(request.headers)
    body = await parse_body(request, CreateBody())
    return await ask(request, "POST", "/api/v1/memories", body={
        "user_id": scope(identity, body["user_id"]), "content": body["content"], "category": body["category"],
        "priority": body["priority"], "source": "api"}, client_key=client_key)


@routes.delete("/api/v1/memory", name="memory_proxy.delete")
@api_doc("Forget one of your memories", query=DeleteQuery, responses={200: MemoryDeleted},
         errors=(404,) + ERRORS)
async def delete(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, DeleteQuery())
    # A person deletes only their own; the administrator any memory, or only one person's if named.
    owner = query["user_id"] if identity.is_admin else identity.user_id
    return await ask(request, "DELETE", f"/api/v1/memories/{query['id']}", params={"user_id": owner})


class UpdateBody(marshmallow.Schema):
    content = fields.String(validate=validate.Length(min=1))
    category = Category()
    priority = Priority()


@routes.put("/api/v1/memory", name="memory_proxy.update")
@api_doc("Change one of your memories: its content (embedded again), category or priority, as given",
         query=DeleteQuery, body=UpdateBody, responses={200: Memory}, errors=(404,) + ERRORS,
         description="The fields sent change, the others stay; an edit says exactly what the memory should be "
                     "(no merging with near-duplicates, unlike POST).")
async def update(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, DeleteQuery())
    body = await parse_body(request, UpdateBody())
    if not body:
        raise BadRequest("Nothing to change: send content, category or priority.", error_type="validation_error",
                         hint='For example {"content": "I am allergic to peanuts and cashews"}.')
    # As for DELETE: a person edits only their own; the administrator any memory, or one person's if named.
    owner = query["user_id"] if identity.is_admin else identity.user_id
    named = {"user_id": owner} if owner else {}
    return await ask(request, "PUT", f"/api/v1/memories/{query['id']}", body={**body, **named})
