"""The Knowledge-bases endpoints (spec: "Knowledge bases (bearer)"). A caller reaches only their
own bases and documents; another user's answer 404 like ids that do not exist. The
administrator acts on a user's knowledge with `?user_id=` (and reaches any base or document by
its id)."""
from __future__ import annotations

from typing import cast

from aiohttp import web

from gateway.identity import owner_for, require_user
from gateway.openapi import api_doc
from gateway.validation import parse_body, parse_query

from .schemas import (BaseBody, BaseDetail, BaseList, BaseListQuery, Deleted, DocumentBody, DocumentDetail, DocumentList,
                      DocumentListQuery, KnowledgeBase, KnowledgeDocument, OwnerQuery, SearchAnswer, SearchBody,
                      Updated)
from .store import KnowledgeStore

KNOWLEDGE = web.AppKey("knowledge.store", KnowledgeStore)
UUID_PATH = {"type": "string", "maxLength": 64}

routes = web.RouteTableDef()


def store_of(request: web.Request) -> KnowledgeStore:
    return request.config_dict[KNOWLEDGE]


def requested_owner(request: web.Request, body: dict | None = None) -> str | None:
    """Whose knowledge the administrator names: `user_id` in the body, else in the query."""
    return cast("str | None", (body or {}).get("user_id") or parse_query(request, OwnerQuery())["user_id"])


@routes.post("/api/v1/knowledge/bases", name="knowledge.create_base")
@api_doc("Create a knowledge base", body=BaseBody, query=OwnerQuery,
         responses={201: KnowledgeBase, 200: KnowledgeBase}, errors=(409, 503),
         description="With `session_id`: that chat session's own base, created on first use; 200 with the "
                     "existing one afterwards (docs/knowledge.md, \"A conversation's own base\").")
async def create_base(request: web.Request) -> web.Response:
    user = await require_user(request)
    body = await parse_body(request, BaseBody())
    owner = owner_for(user, requested_owner(request, body))
    base, created = await store_of(request).create_base(owner, body["name"].strip(),
                                                        (body["description"] or "").strip(), body["session_id"])
    return web.json_response(base, status=201 if created else 200)


@routes.get("/api/v1/knowledge/bases", name="knowledge.list_bases")
@api_doc("The caller's knowledge bases, oldest first", query=BaseListQuery, responses={200: BaseList}, errors=(503,))
async def list_bases(request: web.Request) -> web.Response:
    user = await require_user(request)
    query = parse_query(request, BaseListQuery())
    owner = owner_for(user, query["user_id"])
    bases = await store_of(request).list_bases(owner, query["session_id"])
    return web.json_response({"knowledge_bases": bases, "total": len(bases)})


@routes.get("/api/v1/knowledge/bases/{kb_id}", name="knowledge.get_base")
@api_doc("One knowledge base and its documents (without their text)", query=OwnerQuery,
         responses={200: BaseDetail}, errors=(404, 503), path={"kb_id": UUID_PATH})
async def get_base(request: web.Request) -> web.Response:
    user = await require_user(request)
    store = store_of(request)
    base = await store.base_for(user, request.match_info["kb_id"], requested_owner(request))
    return web.json_response({"knowledge_base": base, "documents": await store.list_documents(base["id"])})


@routes.put("/api/v1/knowledge/bases/{kb_id}", name="knowledge.update_base")
@api_doc("Rename a knowledge base or change its description", body=BaseBody, query=OwnerQuery,
         responses={200: Updated}, errors=(404, 503), path={"kb_id": UUID_PATH})
async def update_base(request: web.Request) -> web.Response:
    user = await require_user(request)
    store = store_of(request)
    body = await parse_body(request, BaseBody())
    base = await store.base_for(user, request.match_info["kb_id"], requested_owner(request, body))
    await store.update_base(base, body["name"].strip(), (body["description"] or "").strip())
    return web.json_response({"status": "updated"})


@routes.delete("/api/v1/knowledge/bases/{kb_id}", name="knowledge.delete_base")
@api_doc("Delete a knowledge base with its documents; they leave search results at once", query=OwnerQuery,
         responses={200: Deleted}, errors=(404, 503), path={"kb_id": UUID_PATH})
async def delete_base(request: web.Request) -> web.Response:
    user = await require_user(request)
    store = store_of(request)
    base = await store.base_for(user, request.match_info["kb_id"], requested_owner(request))
    await store.delete_base(base)
    return web.json_response({"status": "deleted"})


@routes.post("/api/v1/knowledge/bases/{kb_id}/documents", name="knowledge.add_document")
@api_doc("Add a document from text, an uploaded file or a web address", body=DocumentBody, query=OwnerQuery,
         responses={201: KnowledgeDocument}, errors=(404, 409, 503), path={"kb_id": UUID_PATH},
         description="Short documents are indexed before the answer (`index_status` `ready`); longer ones "
                     "answer at once with `pending` and are indexed in the background (docs/knowledge.md).")
async def add_document(request: web.Request) -> web.Response:
    user = await require_user(request)
    store = store_of(request)
    body = await parse_body(request, DocumentBody())
    base = await store.base_for(user, request.match_info["kb_id"], requested_owner(request, body))
    document = await store.add_document(user, base, body)
    return web.json_response(document, status=201)


@routes.get("/api/v1/knowledge/bases/{kb_id}/documents", name="knowledge.list_documents")
@api_doc("A knowledge base's documents, oldest first", query=DocumentListQuery, responses={200: DocumentList},
         errors=(404, 503), path={"kb_id": UUID_PATH})
async def list_documents(request: web.Request) -> web.Response:
    user = await require_user(request)
    store = store_of(request)
    query = parse_query(request, DocumentListQuery())
    base = await store.base_for(user, request.match_info["kb_id"], query["user_id"])
    documents = await store.list_documents(base["id"], query["include_content"])
    return web.json_response({"documents": documents, "total": len(documents)})


@routes.get("/api/v1/knowledge/documents/{document_id}", name="knowledge.get_document")
@api_doc("One document with its text and its chunks", query=OwnerQuery, responses={200: DocumentDetail},
         errors=(404, 503), path={"document_id": UUID_PATH})
async def get_document(request: web.Request) -> web.Response:
    user = await require_user(request)
    store = store_of(request)
    document = await store.document_for(user, request.match_info["document_id"],
                                        requested_owner(request))
    return web.json_response({"document": document, "chunks": await store.chunks_of(document["id"])})


@routes.delete("/api/v1/knowledge/documents/{document_id}", name="knowledge.delete_document")
@api_doc("Delete a document; its chunks leave search results at once", query=OwnerQuery,
         responses={200: Deleted}, errors=(404, 503), path={"document_id": UUID_PATH})
async def delete_document(request: web.Request) -> web.Response:
    user = await require_user(request)
    store = store_of(request)
    document = await store.document_for(user, request.match_info["document_id"],
                                        requested_owner(request))
    await store.delete_document(document)
    return web.json_response({"status": "deleted"})


@routes.post("/api/v1/knowledge/search", name="knowledge.search")
@api_doc("Search the caller's knowledge bases (hybrid: lexical and semantic)", body=SearchBody, query=OwnerQuery,
         responses={200: SearchAnswer}, errors=(503,))
async def search(request: web.Request) -> web.Response:
    user = await require_user(request)
    body = await parse_body(request, SearchBody())
    owner = owner_for(user, requested_owner(request, body))
    query = body["query"].strip()
    chunks = await store_of(request).search(owner, query, body["kb_ids"] or [], body["limit"], body["mode"],
                                            body["session_id"])
    return web.json_response({"chunks": chunks, "total": len(chunks), "query": query})
