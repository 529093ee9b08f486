"""The memory service's thinking log and timeline (docs/memory.md, "Thinking and timeline").

The thinking log holds what the gateway's scheduled thinking job (plugin `thinking`,
plugins/memory/thinking.py) noticed about a person's recent conversations and memories, and what
it might suggest; the job writes an entry through `POST /api/v1/thinking` with the service
credential. The timeline merges a person's memories (at their latest change) with their thinking
entries, newest first, paged: the console's Timeline panel reads it.

Who may do what follows the memory API (api.py): a person's token reads and deletes their own
entries; the service credential and the administrator name the person with `user_id`, or read
everyone's without it. Only the service credential and the administrator write entries: the log
is the assistant's, not a person's notes."""
from __future__ import annotations

import uuid

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.context import get_context
from gateway.errors import Forbidden, NotFound
from gateway.identity import Identity, require_user
from gateway.openapi import api_doc
from gateway.validation import parse_body, parse_query

from .api import UNAVAILABLE, owner, required_owner
from .schemas import USER_ID, Memory
from .thinking_store import ThinkingLog

routes = web.RouteTableDef()
ENTRY_ID = {"entry_id": {"type": "string", "format": "uuid"}}
MAX_PAGE = 200
MAX_CONTENT_CHARS = 4000
MAX_SOURCES = 50
KINDS = ("reflection", "suggestion", "observation")
TIMELINE_TYPES = ("memory", "thinking")


# ---------------------------------------------------------------- requests and answers

class ThinkingListQuery(marshmallow.Schema):
    user_id = USER_ID
    since = fields.Integer(load_default=None, validate=validate.Range(min=0), metadata={
        "description": "Only entries created at or after this time (epoch milliseconds)."})
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=MAX_PAGE))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=10**12))


class ThinkingOwnerQuery(marshmallow.Schema):
    user_id = USER_ID


class ThinkingCreate(marshmallow.Schema):
    user_id = USER_ID
    id = fields.UUID(load_default=None, metadata={
        "description": "The entry's id, chosen by the writer so a retried write stores it once."})
    kind = fields.String(load_default="reflection", validate=validate.OneOf(KINDS), metadata={
        "description": f"One of {', '.join(KINDS)}; default `reflection`."})
    content = fields.String(required=True, validate=validate.Length(min=1, max=MAX_CONTENT_CHARS), metadata={
        "description": "What the assistant noticed."})
    suggestion = fields.String(load_default="", validate=validate.Length(max=MAX_CONTENT_CHARS), metadata={
        "description": "What it might suggest to the person; empty for none."})
    model = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=200), metadata={
        "description": "The model that thought it."})
    source_session_ids = fields.List(fields.String(validate=validate.Length(min=1, max=128)), load_default=list,
                                     validate=validate.Length(max=MAX_SOURCES))
    source_memory_ids = fields.List(fields.String(validate=validate.Length(min=1, max=128)), load_default=list,
                                    validate=validate.Length(max=MAX_SOURCES))


class ThinkingEntry(marshmallow.Schema):
    id = fields.String(required=True, metadata={"description": "UUID."})
    user_id = fields.String(required=True)
    kind = fields.String(required=True, metadata={"description": f"One of {', '.join(KINDS)}."})
    content = fields.String(required=True, metadata={"description": "What the assistant noticed."})
    suggestion = fields.String(required=True, metadata={"description": "What it might suggest; may be empty."})
    model = fields.String(required=True, allow_none=True)
    source_session_ids = fields.List(fields.String(), required=True, metadata={
        "description": "The sessions it reflected on."})
    source_memory_ids = fields.List(fields.String(), required=True, metadata={
        "description": "The memories it reflected on."})
    created_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})


class ThinkingPage(marshmallow.Schema):
    entries = fields.List(fields.Nested(ThinkingEntry), required=True, metadata={"description": "Newest first."})
    total = fields.Integer(required=True, metadata={"description": "Entries matching the filter."})
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)


class ThinkingDeleted(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.Equal("deleted"))
    id = fields.String(required=True)


class TimelineQuery(marshmallow.Schema):
    user_id = USER_ID
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=MAX_PAGE))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=10**12))


class TimelineItem(marshmallow.Schema):
    type = fields.String(required=True, validate=validate.OneOf(TIMELINE_TYPES), metadata={
        "description": "`memory` (then `memory` is set) or `thinking` (then `thinking` is set)."})
    id = fields.String(required=True, metadata={"description": "The memory's or the entry's id."})
    user_id = fields.String(required=True)
    timestamp = fields.Integer(required=True, metadata={
        "description": "Epoch milliseconds: a memory's latest change (learned, merged, superseded, edited), "
                       "an entry's creation. The timeline's order, newest first."})
    content = fields.String(required=True)
    memory = fields.Nested(Memory, required=True, allow_none=True)
    thinking = fields.Nested(ThinkingEntry, required=True, allow_none=True)


class TimelinePage(marshmallow.Schema):
    items = fields.List(fields.Nested(TimelineItem), required=True, metadata={"description": "Newest first."})
    total = fields.Integer(required=True, metadata={"description": "Memories and entries in all."})
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)


# ---------------------------------------------------------------- helpers

def parse_entry_id(entry_id: str) -> str:
    try:
        return str(uuid.UUID(entry_id))
    except ValueError:
        raise entry_not_found() from None


def entry_not_found() -> NotFound:
    return NotFound("No such thinking entry.", error_type="thinking_not_found",
                    hint="Entry ids are UUIDs from GET /api/v1/thinking; it may have been deleted.")


def require_writer(identity: Identity) -> None:
    if identity.kind != "service" and not identity.is_admin:
        raise Forbidden("Only the assistant's services and the administrator write the thinking log.",
                        error_type="forbidden", hint="The thinking job writes entries with the service credential.")


# ---------------------------------------------------------------- the thinking log

@routes.get("/api/v1/thinking", name="memory.thinking_list")
@api_doc("A page of thinking entries, newest first (filter by person and time)", query=ThinkingListQuery,
         responses={200: ThinkingPage}, errors=(403,) + UNAVAILABLE,
         description="Without `user_id`, the service credential and the administrator list everyone's.")
async def list_entries(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, ThinkingListQuery())
    who = owner(identity, query["user_id"], anyone=True)
    rows, total = await _log(request).page(who, query["since"], query["limit"], query["offset"])
    return web.json_response({"entries": rows, "total": total, "limit": query["limit"],
                              "offset": query["offset"]})


@routes.post("/api/v1/thinking", name="memory.thinking_create")
@api_doc("Write a thinking entry (the thinking job, with the service credential)", body=ThinkingCreate,
         responses={201: ThinkingEntry, 200: ThinkingEntry}, errors=(403,) + UNAVAILABLE,
         description="201 when stored; 200 with the stored entry when an entry with this `id` exists already "
                     "(a retried write).")
async def create_entry(request: web.Request) -> web.Response:
    identity = await require_user(request)
    require_writer(identity)
    body = await parse_body(request, ThinkingCreate())
    who = required_owner(identity, body["user_id"])
    entry_id = str(body["id"] or uuid.uuid4())
    entry, created = await _log(request).add(entry_id, who, body)
    if entry is None:  # the id is another person's entry
        raise Forbidden("That entry id is taken.", error_type="forbidden", hint="Leave out id to have one made.")
    return web.json_response(entry, status=201 if created else 200)


@routes.get("/api/v1/thinking/{entry_id:[0-9a-fA-F-]+}", name="memory.thinking_get")
@api_doc("One thinking entry", query=ThinkingOwnerQuery, responses={200: ThinkingEntry},
         errors=(403, 404) + UNAVAILABLE, path=ENTRY_ID)
async def get_entry(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, ThinkingOwnerQuery())
    who = owner(identity, query["user_id"], anyone=True)
    row = await _log(request).get(parse_entry_id(request.match_info["entry_id"]), who)
    if row is None:
        raise entry_not_found()
    return web.json_response(row)


@routes.delete("/api/v1/thinking/{entry_id:[0-9a-fA-F-]+}", name="memory.thinking_delete")
@api_doc("Delete a thinking entry", query=ThinkingOwnerQuery, responses={200: ThinkingDeleted},
         errors=(403, 404) + UNAVAILABLE, path=ENTRY_ID)
async def delete_entry(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, ThinkingOwnerQuery())
    who = owner(identity, query["user_id"], anyone=True)
    entry_id = parse_entry_id(request.match_info["entry_id"])
    if not await _log(request).delete(entry_id, who):
        raise entry_not_found()
    return web.json_response({"status": "deleted", "id": entry_id})


# ---------------------------------------------------------------- the timeline

@routes.get("/api/v1/timeline", name="memory.timeline")
@api_doc("Memories and thinking entries merged, newest first, paged", query=TimelineQuery,
         responses={200: TimelinePage}, errors=(403,) + UNAVAILABLE,
         description="A memory is placed at its latest change, an entry at its creation. Without `user_id`, "
                     "the service credential and the administrator see everyone's.")
async def timeline(request: web.Request) -> web.Response:
    identity = await require_user(request)
    query = parse_query(request, TimelineQuery())
    who = owner(identity, query["user_id"], anyone=True)
    items, total = await _log(request).timeline(who, query["limit"], query["offset"])
    return web.json_response({"items": items, "total": total, "limit": query["limit"],
                              "offset": query["offset"]})


def _log(request: web.Request) -> ThinkingLog:
    return ThinkingLog(get_context(request).db)
