"""The Sessions and Message-search endpoints. Session ids are per owner: a caller reaches only
their own sessions, and another user's id is simply free for them (a GET answers 404
`session_not_found`, a POST creates the caller's own session), so ids cannot be probed. The
administrator reaches any user's session, picked with `user_id` (docs/sessions.md)."""
from __future__ import annotations

import logging
from typing import Any

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.context import get_context
from gateway.identity import Identity, owner_for, require_user
from gateway.openapi import api_doc
from gateway.validation import MAX_OFFSET, parse_body, parse_query

from . import exports
from .contract import CONVERSATIONS, Conversations
from .schemas import (EXPORT_ANSWERS, MessagePage, MessagesCleared, SearchPage, Session, SessionDeleted,
                      SessionList, SessionsDeleted)
from .store import session_not_found

log = logging.getLogger("plugins.sessions.api")

MAX_PAGE = 500
SESSION_UPDATED = "session_updated"  # the frame a rename sends to the owner's devices
# chat_messages.id is a bigserial: every stored id is below this, so "older than it" is the newest.
NEWER_THAN_EVERY_MESSAGE = 2**63 - 1

routes = web.RouteTableDef()


class CreateSessionBody(marshmallow.Schema):
    session_id = fields.String(load_default=None, allow_none=True,
                               validate=[validate.Length(min=1, max=128),
                                         validate.Regexp(r"^[A-Za-z0-9_.:\-]+\Z",
                                                         error="use letters, digits and _ . : - only")])
    title = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=200))
    is_main = fields.Boolean(load_default=False)


class RenameSessionBody(marshmallow.Schema):
    title = fields.String(required=True, validate=[validate.Length(min=1, max=200),
                                                   validate.Regexp(r"\s*\S", error="must not be blank")])
    if_title = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=200), metadata={
        "description": "Rename only while the session's title is exactly this (409 `title_changed` otherwise): "
                       "a title made for the person does not overwrite one they gave meanwhile."})


class OwnerQuery(marshmallow.Schema):
    user_id = fields.String(load_default=None)


class SessionOwnerQuery(OwnerQuery):
    """Whose session the path names (the administrator's choice); the route's own query
    fields are read by its own schema."""
    class Meta:
        unknown = marshmallow.EXCLUDE


class PageQuery(OwnerQuery):
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=MAX_PAGE))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=MAX_OFFSET))


class MessagePageQuery(PageQuery):
    """The spec's offset paging, plus the web client's way back through a long conversation:
    `latest` (the newest `limit` messages) or `before_id` (the `limit` messages just older than
    that one), either answered with `has_more` so the client knows when it reached the first."""
    before_id = fields.Integer(load_default=None, validate=validate.Range(min=1, max=NEWER_THAN_EVERY_MESSAGE))
    latest = fields.Boolean(load_default=False)

    @marshmallow.validates_schema
    def one_way_of_paging(self, data: dict, **_: Any) -> None:
        if (data["before_id"] is not None or data["latest"]) and data["offset"]:
            raise marshmallow.ValidationError("offset pages from the oldest; leave it out with before_id or latest",
                                              "offset")
        if data["before_id"] is not None and data["latest"]:
            raise marshmallow.ValidationError("give before_id or latest, not both", "latest")


class ExportQuery(OwnerQuery):
    format = fields.String(load_default="json", validate=validate.OneOf(list(exports.FORMATS)))


class SearchQuery(PageQuery):
    q = fields.String(required=True, validate=validate.Length(min=1, max=200))
    user_id = fields.String(load_default=None)


def conversations_of(request: web.Request) -> Conversations:
    return get_context(request).contracts.require(CONVERSATIONS)


async def visible_session(request: web.Request, user: Identity) -> dict:
    """The session in the path: the caller's own, or for the administrator the one of the user
    named by `user_id` — without it, the administrator's own, else the most recently updated of
    any user's sessions with that id."""
    session_id = request.match_info["session_id"]
    conversations = conversations_of(request)
    requested = parse_query(request, SessionOwnerQuery())["user_id"]
    session = await conversations.get_session(owner_for(user, requested), session_id)
    if session is None and user.is_admin and not requested:
        session = next(iter(await conversations.find_sessions(session_id)), None)
    if session is None:
        raise session_not_found(session_id)
    return session


@routes.post("/api/v1/sessions", name="sessions.create")
@api_doc("Create a session (its id generated when not given)", body=CreateSessionBody, body_required=False,
         responses={201: Session}, errors=(409, 503),
         headers={"Accept-Language": "Without `title`, the session is titled in the first of these languages "
                                     "there is a title for (\"New chat\" in English), else 新对话"})
async def create_session(request: web.Request) -> web.Response:
    user = await require_user(request)
    body = await parse_body(request, CreateSessionBody(), allow_empty=True)
    session = await conversations_of(request).create_session(
        user.user_id, body["session_id"], (body["title"] or "").strip() or None, body["is_main"],
        language=request.headers.get("Accept-Language"))
    return web.json_response(session, status=201)


@routes.get("/api/v1/sessions", name="sessions.list")
@api_doc("The caller's sessions (the administrator: any user's)", query=OwnerQuery, responses={200: SessionList},
         errors=(403, 503))
async def list_sessions(request: web.Request) -> web.Response:
    user = await require_user(request)
    owner = owner_for(user, parse_query(request, OwnerQuery())["user_id"])
    return web.json_response({"sessions": await conversations_of(request).list_sessions(owner)})


@routes.delete("/api/v1/sessions", name="sessions.delete_all")
@api_doc("Delete every session of the caller (the administrator: of any user)", query=OwnerQuery,
         responses={200: SessionsDeleted}, errors=(403, 503))
async def delete_all_sessions(request: web.Request) -> web.Response:
    user = await require_user(request)
    owner = owner_for(user, parse_query(request, OwnerQuery())["user_id"])
    deleted = await conversations_of(request).delete_user_sessions(owner)
    return web.json_response({"status": "deleted", "user_id": owner, "count": deleted})


@routes.get("/api/v1/sessions/{session_id}", name="sessions.get")
@api_doc("One session", responses={200: Session}, errors=(404, 503))
async def get_session(request: web.Request) -> web.Response:
    user = await require_user(request)
    return web.json_response(await visible_session(request, user))


@routes.patch("/api/v1/sessions/{session_id}", name="sessions.rename")
@api_doc("Rename a session (the web client's rename; not in the spec); the owner's devices are sent "
         "`session_updated`", body=RenameSessionBody, responses={200: Session}, errors=(404, 409, 503))
async def rename_session(request: web.Request) -> web.Response:
    user = await require_user(request)
    body = await parse_body(request, RenameSessionBody())
    title = body["title"].strip()
    session = await visible_session(request, user)
    renamed = await conversations_of(request).rename_session(session["user_id"], session["id"], title,
                                                             if_title=body["if_title"])
    if renamed is None:
        raise session_not_found(session["id"])
    try:
        await get_context(request).hub.send_to_user(renamed["user_id"], {
            "type": SESSION_UPDATED, "session_id": renamed["id"], "title": renamed["title"]})
    except Exception as error:  # the rename is stored; devices see it at their next list
        log.warning("session_updated for %s not pushed: %s: %s", renamed["id"], type(error).__name__, error)
    return web.json_response(renamed)


@routes.delete("/api/v1/sessions/{session_id}", name="sessions.delete")
@api_doc("Delete a session and its messages", responses={200: SessionDeleted}, errors=(404, 503))
async def delete_session(request: web.Request) -> web.Response:
    user = await require_user(request)
    session = await visible_session(request, user)
    await conversations_of(request).delete_session(session["user_id"], session["id"])
    return web.json_response({"status": "deleted", "session_id": session["id"]})


@routes.get("/api/v1/sessions/{session_id}/messages", name="sessions.messages")
@api_doc("A page of a session's stored messages, oldest first: counted from the oldest (`offset`), or "
         "the newest (`latest=true`), or the ones just older than a message (`before_id`)",
         query=MessagePageQuery, responses={200: MessagePage}, errors=(404, 503))
async def list_messages(request: web.Request) -> web.Response:
    user = await require_user(request)
    session = await visible_session(request, user)
    page = parse_query(request, MessagePageQuery())
    limit, conversations = page["limit"], conversations_of(request)
    # One more than asked tells whether more lie beyond the page, without a count.
    if page["latest"] or page["before_id"] is not None:
        before_id = page["before_id"] or NEWER_THAN_EVERY_MESSAGE
        found = await conversations.list_messages(session["user_id"], session["id"], limit + 1, before_id=before_id)
        messages, has_more = found[-limit:], len(found) > limit
    else:
        found = await conversations.list_messages(session["user_id"], session["id"], limit + 1, page["offset"])
        messages, has_more = found[:limit], len(found) > limit
    return web.json_response({"messages": messages, "limit": limit, "offset": page["offset"],
                              "before_id": page["before_id"], "has_more": has_more})


@routes.delete("/api/v1/sessions/{session_id}/messages", name="sessions.clear")
@api_doc("Delete a session's messages, keeping the session", responses={200: MessagesCleared}, errors=(404, 503))
async def clear_messages(request: web.Request) -> web.Response:
    user = await require_user(request)
    session = await visible_session(request, user)
    deleted = await conversations_of(request).clear_messages(session["user_id"], session["id"])
    return web.json_response({"status": "cleared", "session_id": session["id"], "count": deleted})


@routes.get("/api/v1/sessions/{session_id}/export", name="sessions.export")
@api_doc("A session written out as a file: JSON, Markdown or plain text", query=ExportQuery,
         responses={200: EXPORT_ANSWERS}, errors=(404, 503),
         response_headers={"Content-Disposition": "attachment, with the session's id and title as file names"})
async def export_session(request: web.Request) -> web.Response:
    user = await require_user(request)
    session = await visible_session(request, user)
    export_format = parse_query(request, ExportQuery())["format"]
    messages = await conversations_of(request).all_messages(session["user_id"], session["id"])
    content_type = exports.FORMATS[export_format][0]
    return web.Response(
        text=exports.render(session, messages, export_format), content_type=content_type, charset="utf-8",
        headers={"Content-Disposition": exports.attachment_disposition(session, export_format),
                 "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"})


@routes.get("/api/v1/messages/search", name="sessions.search_messages")
@api_doc("Search the caller's messages (the administrator: any user's) for a keyword", query=SearchQuery,
         responses={200: SearchPage}, errors=(403, 503))
async def search_messages(request: web.Request) -> web.Response:
    user = await require_user(request)
    query = parse_query(request, SearchQuery())
    owner = owner_for(user, query["user_id"])
    results, total = await conversations_of(request).search_messages(
        owner, query["q"], query["limit"], query["offset"])
    return web.json_response({"results": results, "total": total, "query": query["q"],
                              "limit": query["limit"], "offset": query["offset"]})
