"""Live sessions and known clients (`/api/v1/admin/sessions*`, `/clients*`, `/stats`): from the
chat plugin's `presence` service and the sessions plugin's stored conversations."""
from __future__ import annotations

from aiohttp import web

from gateway.context import get_context
from gateway.errors import NotFound, ServiceUnavailable
from gateway.identity import require_admin
from gateway.openapi import api_doc
from gateway.validation import parse_body, parse_query
from plugins.chat.contract import PRESENCE, Presence
from plugins.sessions.contract import CONVERSATIONS, Conversations

from .common import PREFIX, ClientsQuery, MessagesQuery, NoteBody
from .schemas import (KnownClients, LiveSessions, LiveSessionsByUser, NoteSaved, SessionState,
                      StoredMessagePage, StoredTotals)

routes = web.RouteTableDef()


def presence_of(request: web.Request) -> Presence | None:
    """The chat plugin's presence service; None when chat is not loaded in this service."""
    return get_context(request).contracts.get(PRESENCE)


# ---------------------------------------------------------------- live sessions and clients

async def live_sessions(presence: Presence | None) -> list[dict]:
    if presence is None:
        return []
    sessions = list(await presence.live_sessions())
    sessions.sort(key=lambda state: state.get("last_activity") or 0, reverse=True)
    return sessions


@routes.get(PREFIX + "/sessions", name="admin.sessions")
@api_doc("Live sessions: connected devices, running and queued turns", responses={200: LiveSessions},
         errors=(503,), auth="admin")
async def sessions(request: web.Request) -> web.Response:
    await require_admin(request)
    live = await live_sessions(presence_of(request))
    return web.json_response({"sessions": live, "total": len(live)})


@routes.get(PREFIX + "/sessions/active", name="admin.sessions_active")
@api_doc("Live sessions grouped by user", responses={200: LiveSessionsByUser}, errors=(503,), auth="admin")
async def sessions_active(request: web.Request) -> web.Response:
    await require_admin(request)
    users: dict[str, list[dict]] = {}
    for state in await live_sessions(presence_of(request)):
        users.setdefault(state["user_id"], []).append(state)
    return web.json_response({"users": users, "total_users": len(users),
                              "total_sessions": sum(len(v) for v in users.values())})


@routes.get(PREFIX + "/sessions/{id}", name="admin.session")
@api_doc("One live session", responses={200: SessionState}, errors=(404, 503), auth="admin")
async def session(request: web.Request) -> web.Response:
    await require_admin(request)
    session_id = request.match_info["id"]
    presence = presence_of(request)
    state = await presence.session_state(session_id) if presence is not None else None
    if state is None:
        raise NotFound(f"No live session {session_id!r}.", error_type="session_not_found",
                       hint="GET /api/v1/admin/sessions lists the live sessions.")
    return web.json_response(state)


@routes.get(PREFIX + "/sessions/{id}/messages", name="admin.session_messages")
@api_doc("A page of any user's stored session messages, oldest first (the console's Sessions panel)",
         query=MessagesQuery, responses={200: StoredMessagePage}, errors=(404, 503), auth="admin")
async def session_messages(request: web.Request) -> web.Response:
    await require_admin(request)
    query = parse_query(request, MessagesQuery())
    conversations = conversations_of(request)
    session_id = request.match_info["id"]
    if query["user_id"]:
        session = await conversations.get_session(query["user_id"], session_id)
    else:
        session = next(iter(await conversations.find_sessions(session_id)), None)
    if session is None:
        raise NotFound(f"No stored session {session_id!r}" + (f" of {query['user_id']!r}." if query["user_id"] else "."),
                       error_type="session_not_found", hint="GET /api/v1/admin/sessions lists the live sessions.")
    messages = await conversations.list_messages(session["user_id"], session_id, query["limit"], query["offset"])
    return web.json_response({"session_id": session_id, "user_id": session["user_id"], "messages": messages,
                              "limit": query["limit"], "offset": query["offset"]})


def conversations_of(request: web.Request) -> Conversations:
    conversations = get_context(request).contracts.get(CONVERSATIONS)
    if conversations is None:
        raise ServiceUnavailable("This service keeps no sessions.", error_type="sessions_unavailable",
                                 hint="The sessions plugin is not loaded in this service.")
    return conversations


@routes.get(PREFIX + "/stats", name="admin.stats")
@api_doc("How many users, sessions and messages are stored (the console's dashboard)", responses={200: StoredTotals},
         errors=(503,), auth="admin")
async def stats(request: web.Request) -> web.Response:
    await require_admin(request)
    return web.json_response(await conversations_of(request).totals())


@routes.get(PREFIX + "/clients", name="admin.clients")
@api_doc("Devices that have connected to the chat channel", query=ClientsQuery, responses={200: KnownClients},
         errors=(503,), auth="admin")
async def clients(request: web.Request) -> web.Response:
    await require_admin(request)
    query = parse_query(request, ClientsQuery())
    presence = presence_of(request)
    known = list(await presence.known_clients(query["user_id"])) if presence is not None else []
    return web.json_response({"clients": known, "total": len(known)})


@routes.put(PREFIX + "/clients/{id}/note", name="admin.client_note")
@api_doc("Set the administrator's note on a known client", body=NoteBody, responses={200: NoteSaved},
         errors=(404, 503), auth="admin")
async def client_note(request: web.Request) -> web.Response:
    await require_admin(request)
    client_id = request.match_info["id"]
    body = await parse_body(request, NoteBody())
    presence = presence_of(request)
    saved = await presence.set_client_note(client_id, body["note"]) if presence is not None else None
    if saved is None:
        raise NotFound(f"No known client {client_id!r}.", error_type="client_not_found",
                       hint="GET /api/v1/admin/clients lists the known clients.")
    return web.json_response({"status": "ok", "client_id": client_id, "note": body["note"]})
