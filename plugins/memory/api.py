"""The memory service's HTTP API (docs/memory.md). Every endpoint needs a credential: a person's
access token acts for that person; the service credential (SERVICE_TOKEN, how the gateway and the
AI core call) and the administrator name the person with `user_id` (query, or the body of a
write), as on the AI core."""
from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.embeddings import EmbeddingError
from gateway.errors import BadRequest, ServiceUnavailable
from gateway.identity import Identity, owner_for, require_user
from gateway.openapi import api_doc
from gateway.validation import parse_body, parse_query
from gateway.vector_store import VectorStoreUnavailable

from .schemas import (IDEMPOTENCY_HEADERS, REPLAYED, REPLAYED_HEADERS, Memory, MemoryCreate, MemoryDeleted,
                      MemoryListQuery, MemoryOwnerQuery, MemoryPage, MemorySearchQuery, MemorySearchResults,
                      MemoryUpdate, MemoryWritten, idempotency_key)
from .store import MemoryStore

routes = web.RouteTableDef()
STORE = web.AppKey("memory.store", MemoryStore)
MEMORY_ID = {"memory_id": {"type": "string", "format": "uuid"}}
# 503: the database, the vector store or the embedding model is unavailable.
UNAVAILABLE = (503,)


def owner(identity: Identity, requested: str | None, *, anyone: bool = False) -> str | None:
    """Whose memories a call acts on. A person: their own (403 naming someone else). A service
    or the administrator: the `user_id` named; without one, everyone's where `anyone` (list,
    get, update, delete), else the administrator's own, and a service must name someone."""
    if identity.kind == "service" or identity.is_admin:
        if requested:
            return requested
        if anyone:
            return None
        if identity.kind == "service":
            raise BadRequest("A service must name the user it acts for.", error_type="validation_error",
                             hint="Add user_id to the query (reads) or the body (writes).")
        return identity.user_id
    return owner_for(identity, requested)


def required_owner(identity: Identity, requested: str | None) -> str:
    who = owner(identity, requested)
    assert who is not None  # owner() without `anyone` always names someone
    return who


@web.middleware
async def outage_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The vector store or the embedding model down: a 503 with the spec's error body."""
    try:
        return await handler(request)
    except VectorStoreUnavailable as error:
        raise ServiceUnavailable(f"The vector store is unavailable: {error}",
                                 error_type="vector_store_unavailable",
                                 hint="Try again later. Operators: check QDRANT_URL or DATA_DIR/vectors "
                                      "(docs/embeddings-and-vectors.md).", headers={"Retry-After": "5"}) from None
    except EmbeddingError as error:
        raise ServiceUnavailable(f"The embedding model is unavailable: {error}",
                                 error_type="embeddings_unavailable",
                                 hint="Try again later. Operators: check EMBEDDINGS_BASE_URL "
                                      "(docs/embeddings-and-vectors.md).", headers={"Retry-After": "5"}) from None


@routes.get("/api/v1/memories", name="memory.list")
@api_doc("A page of memories, latest updated (or highest priority) first; filter by person and category", query=MemoryListQuery,
         responses={200: MemoryPage}, errors=(403,) + UNAVAILABLE,
         description="Without `user_id`, the service credential and the administrator list everyone's.")
async def list_memories(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, MemoryListQuery())
    who = owner(identity, query["user_id"], anyone=True)
    page = await request.config_dict[STORE].page(who, query["category"], query["limit"], query["offset"],
                                                 order=query["order"])
    return web.json_response(page)


@routes.post("/api/v1/memories", name="memory.create")
@api_doc("Remember something: stored, merged into a near-duplicate, or superseding what it contradicts",
         body=MemoryCreate, responses={201: MemoryWritten, 200: MemoryWritten}, errors=(403, 409) + UNAVAILABLE,
         headers=IDEMPOTENCY_HEADERS, response_headers=REPLAYED_HEADERS,
         description="201 with action `created`; 200 with `merged` or `superseded` (docs/memory.md). A retry "
                     "with the same Idempotency-Key gets the first write's answer (409 `idempotency_key_reused` "
                     "when the key was used for another memory).")
async def create_memory(request: web.Request) -> web.Response:
    identity = await require_user(request)
    client_key = idempotency_key(request.headers)
    body = await parse_body(request, MemoryCreate())
    who = required_owner(identity, body["user_id"])
    written = await request.config_dict[STORE].create(
        who, body["content"], category=body["category"], priority=body["priority"], source=body["source"],
        source_session_id=body["source_session_id"], source_message_id=body["source_message_id"],
        client_key=client_key)
    return web.json_response({"action": written.action, "memory": written.memory, "replaced": written.replaced},
                             status=201 if written.action == "created" else 200,
                             headers={REPLAYED: "true"} if written.replayed else None)


@routes.get("/api/v1/memories/search", name="memory.search")
@api_doc("A person's memories best matching a text by meaning and words (English, Chinese...)",
         query=MemorySearchQuery, responses={200: MemorySearchResults}, errors=(403,) + UNAVAILABLE)
async def search_memories(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, MemorySearchQuery())
    who = required_owner(identity, query["user_id"])
    hits = await request.config_dict[STORE].search(who, query["q"], query["limit"], query["category"],
                                                   query["mode"], min_relevance=query["min_relevance"])
    return web.json_response({"memories": hits, "query": query["q"]})


@routes.get("/api/v1/memories/{memory_id:[0-9a-fA-F-]+}", name="memory.get")
@api_doc("One memory", query=MemoryOwnerQuery, responses={200: Memory}, errors=(403, 404) + UNAVAILABLE,
         path=MEMORY_ID)
async def get_memory(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, MemoryOwnerQuery())
    who = owner(identity, query["user_id"], anyone=True)
    return web.json_response(await request.config_dict[STORE].get(request.match_info["memory_id"], who))


@routes.put("/api/v1/memories/{memory_id:[0-9a-fA-F-]+}", name="memory.update")
@api_doc("Change a memory's content, category or priority (as given: no merging)", body=MemoryUpdate,
         responses={200: Memory}, errors=(403, 404) + UNAVAILABLE, path=MEMORY_ID)
async def update_memory(request: web.Request) -> web.Response:
    identity = await require_user(request)
    body = await parse_body(request, MemoryUpdate())
    who = owner(identity, body.pop("user_id", None), anyone=True)
    memory = await request.config_dict[STORE].update(request.match_info["memory_id"], who, body)
    return web.json_response(memory)


@routes.delete("/api/v1/memories/{memory_id:[0-9a-fA-F-]+}", name="memory.delete")
@api_doc("Forget a memory (its record and its vector)", query=MemoryOwnerQuery, responses={200: MemoryDeleted},
         errors=(403, 404) + UNAVAILABLE, path=MEMORY_ID)
async def delete_memory(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, MemoryOwnerQuery())
    who = owner(identity, query["user_id"], anyone=True)
    memory_id = request.match_info["memory_id"]
    await request.config_dict[STORE].delete(memory_id, who)
    return web.json_response({"status": "deleted", "id": memory_id})
