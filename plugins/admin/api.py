"""The administrator's endpoints (`/api/v1/admin/*`): live sessions and known clients from the
chat plugin's `presence` service; model providers, models and routing rules kept by the AI core,
validated here field by field; a real reachability check of a provider and its model list.
The handlers reach the AI core and presence through the context's contracts and their timeouts
under `TIMEOUTS`."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.context import get_context
from gateway.errors import BadGateway, BadRequest, Conflict, NotFound, ServiceUnavailable
from gateway.identity import require_admin
from gateway.openapi import api_doc
from gateway.validation import MAX_OFFSET, finite_number, parse_body, parse_query
from plugins.ai_core.contract import AI_CORE, AiCore
from plugins.chat.contract import PRESENCE, Presence
from plugins.sessions.contract import CONVERSATIONS, Conversations

from .schemas import (HealthCheck, KnownClients, LiveSessions, LiveSessionsByUser, ModelChanged, Models,
                      NoteSaved, ProviderChanged, ProviderModels, Providers, RouteChanged, RoutingRule,
                      SessionState, StoredMessagePage, StoredTotals)

PREFIX = "/api/v1/admin"
KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,99}\Z")
KEY_RULE = "1-100 characters: letters, digits and . _ : @ + - (starting with a letter or digit)"
KNOWN_PARAMS = {  # name -> (lowest, highest, whole numbers only)
    "temperature": (0.0, 2.0, False),
    "top_p": (0.0, 1.0, False),
    "max_tokens": (1, 1_000_000, True),
    "presence_penalty": (-2.0, 2.0, False),
    "frequency_penalty": (-2.0, 2.0, False),
}

routes = web.RouteTableDef()
KEY_PARAMETER = {"pattern": KEY_PATTERN.pattern, "maxLength": 100}  # what path_key accepts, for the document


def mask_key(api_key: str | None) -> str:
    """Enough of a key to recognise it, never enough to use it (the AI core masks already;
    this holds even if a future AI core forgot)."""
    if not api_key:
        return ""
    if api_key.startswith("****"):
        return api_key
    return "****" + api_key[-4:] if len(api_key) > 8 else "****"


def path_key(request: web.Request, name: str, what: str) -> str:
    value = request.match_info[name]
    if not KEY_PATTERN.match(value):
        raise BadRequest(f"Invalid {what} {value!r}.", error_type="validation_error", hint=f"Use {KEY_RULE}.")
    return value


def same_as_path(in_path: str, in_body: str | None, field_name: str) -> None:
    if in_body is not None and in_body != in_path:
        raise BadRequest(f"The {field_name} in the body ({in_body!r}) differs from the one in the path "
                         f"({in_path!r}).", error_type="validation_error",
                         hint=f"Leave {field_name} out of the body or make the two equal.")


# ---------------------------------------------------------------- schemas

def _http_url(value: str) -> None:
    try:
        parts = urlsplit(value)
    except ValueError as error:  # an unclosed `[` of an IPv6 host: `http://[::1/`
        raise marshmallow.ValidationError(f"is not a URL: {error}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise marshmallow.ValidationError("must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise marshmallow.ValidationError("must not carry credentials; put the key in api_key")
    try:
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        raise marshmallow.ValidationError("has an invalid port") from None


def _no_control_characters(value: str) -> None:
    if any(ch.isspace() or ord(ch) < 32 for ch in value):
        raise marshmallow.ValidationError("must not contain spaces or control characters")


class StrictSchema(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.RAISE


class ProviderBody(StrictSchema):
    name = fields.String(load_default=None)
    base_url = fields.String(required=True, validate=[validate.Length(min=1, max=2000), _http_url])
    api_key = fields.String(load_default=None, allow_none=True,
                            validate=[validate.Length(max=1000), _no_control_characters])


def _params(value: dict) -> None:
    for name, (lowest, highest, whole) in KNOWN_PARAMS.items():
        if name not in value or value[name] is None:
            continue
        number = value[name]
        if not finite_number(number):
            raise marshmallow.ValidationError(f"{name} must be a number")
        if whole and not isinstance(number, int):
            raise marshmallow.ValidationError(f"{name} must be a whole number")
        if not lowest <= number <= highest:
            raise marshmallow.ValidationError(f"{name} must be between {lowest:g} and {highest:g}")


class ModelBody(StrictSchema):
    id = fields.String(load_default=None)
    name = fields.String(required=True, validate=validate.Length(min=1, max=200))
    provider = fields.String(required=True, validate=validate.Regexp(KEY_PATTERN, error=f"must be {KEY_RULE}"))
    description = fields.String(load_default="", validate=validate.Length(max=2000))
    priority = fields.Integer(load_default=0, strict=True,
                              validate=validate.Range(min=0, max=1_000_000, error="must be 0 or more"))
    tags = fields.List(fields.String(validate=validate.Length(min=1, max=50)), load_default=list,
                       validate=validate.Length(max=32))
    params = fields.Dict(keys=fields.String(validate=validate.Length(min=1, max=64)), load_default=dict,
                         validate=_params)
    enabled = fields.Boolean(load_default=True)
    updated_at = fields.Raw(load_default=None, load_only=True)  # read-only; a listed model may come back as is


class RouteBody(StrictSchema):
    purpose = fields.String(load_default=None)
    fallback_chain = fields.List(fields.String(validate=validate.Length(min=1, max=100)), required=True,
                                 validate=validate.Length(min=1, max=20, error="must name 1 to 20 models"))
    required = fields.Boolean(load_default=False)


class NoteBody(StrictSchema):
    note = fields.String(required=True, validate=validate.Length(max=1000))


class ClientsQuery(StrictSchema):
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=200))


class MessagesQuery(StrictSchema):
    user_id = fields.String(load_default=None, validate=validate.Length(min=1, max=200), metadata={
        "description": "Whose session (ids are per user); without it, the most recently updated session of that id."})
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=500))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=MAX_OFFSET))


class HealthCheckBody(StrictSchema):
    provider = fields.String(required=True, validate=validate.Regexp(KEY_PATTERN, error=f"must be {KEY_RULE}"))


class FetchModelsQuery(StrictSchema):
    url = fields.String(load_default=None, validate=[validate.Length(min=1, max=2000), _http_url])


# ---------------------------------------------------------------- helpers for provider answers

def provider_error_text(body: Any) -> str | None:
    """The message an OpenAI-compatible provider put in its error body."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error.get("type") or "") or None
        if error:
            return str(error)
        if body.get("message"):
            return str(body["message"])
    if isinstance(body, str) and body.strip():
        return body.strip()[:300]
    return None


def model_items(body: Any) -> list[dict] | None:
    """A provider's model list in one shape, from the OpenAI form (`data`), the Ollama form
    (`models`) or a bare list; None when the answer is none of these."""
    if isinstance(body, dict):
        entries = body.get("data") if isinstance(body.get("data"), list) else body.get("models")
    else:
        entries = body
    if not isinstance(entries, list):
        return None
    items = []
    for entry in entries:
        if isinstance(entry, str):
            entry = {"id": entry}
        if not isinstance(entry, dict):
            continue
        model_id = entry.get("id") or entry.get("name") or entry.get("model")
        if not model_id:
            continue
        created = entry.get("created")
        items.append({"id": str(model_id), "owned_by": entry.get("owned_by"),
                      "created": created if isinstance(created, int) else None})
    return items


@dataclass(frozen=True)
class ProviderTimeouts:
    """Seconds a request to a provider may take (`[plugins.admin]`)."""
    health_check: float
    fetch_models: float


TIMEOUTS = web.AppKey("admin.timeouts", ProviderTimeouts)


def ai_core_of(request: web.Request) -> AiCore:
    return get_context(request).contracts.require(AI_CORE)


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


# ---------------------------------------------------------------- providers

@routes.get(PREFIX + "/models/providers", name="admin.providers")
@api_doc("Model providers (keys masked)", responses={200: Providers}, errors=(502, 503), auth="admin")
async def providers(request: web.Request) -> web.Response:
    await require_admin(request)
    items = [{"name": p["name"], "base_url": p["base_url"], "api_key": mask_key(p.get("api_key")),
              "has_api_key": bool(p.get("api_key"))} for p in await ai_core_of(request).providers()]
    return web.json_response({"providers": items, "total": len(items)})


@routes.post(PREFIX + "/models/providers/{name}", name="admin.provider_save")
@api_doc("Add or change a provider (api_key left out: the stored key stays)", body=ProviderBody,
         responses={200: ProviderChanged}, errors=(502, 503), auth="admin", path={"name": KEY_PARAMETER})
async def provider_save(request: web.Request) -> web.Response:
    await require_admin(request)
    name = path_key(request, "name", "provider name")
    body = await parse_body(request, ProviderBody())
    same_as_path(name, body["name"], "name")
    # api_key left out (None): the stored key stays
    await ai_core_of(request).save_provider(name, body["base_url"].rstrip("/"), body["api_key"])
    return web.json_response({"status": "saved", "name": name})


@routes.delete(PREFIX + "/models/providers/{name}", name="admin.provider_delete")
@api_doc("Delete a provider no model uses", responses={200: ProviderChanged}, errors=(404, 409, 502, 503),
         auth="admin", path={"name": KEY_PARAMETER})
async def provider_delete(request: web.Request) -> web.Response:
    await require_admin(request)
    ai_core = ai_core_of(request)
    name = path_key(request, "name", "provider name")
    users = [m["id"] for m in await ai_core.models() if m["provider"] == name]
    if users:
        raise Conflict(f"The provider {name!r} still serves the models {', '.join(users)}.",
                       error_type="provider_in_use", hint="Delete those models or move them to another provider.")
    await ai_core.delete_provider(name)
    return web.json_response({"status": "deleted", "name": name})


# ---------------------------------------------------------------- models

@routes.get(PREFIX + "/models/models", name="admin.models")
@api_doc("Models", responses={200: Models}, errors=(502, 503), auth="admin")
async def models(request: web.Request) -> web.Response:
    await require_admin(request)
    listed = await ai_core_of(request).models()
    return web.json_response({"models": listed, "total": len(listed)})


@routes.post(PREFIX + "/models/models/{id}", name="admin.model_save")
@api_doc("Add or change a model of a saved provider", body=ModelBody, responses={200: ModelChanged},
         errors=(502, 503), auth="admin", path={"id": KEY_PARAMETER})
async def model_save(request: web.Request) -> web.Response:
    await require_admin(request)
    ai_core = ai_core_of(request)
    model_id = path_key(request, "id", "model id")
    body = await parse_body(request, ModelBody())
    same_as_path(model_id, body.pop("id"), "id")
    body.pop("updated_at")
    if body["provider"] not in {p["name"] for p in await ai_core.providers()}:
        raise BadRequest(f"Invalid body: provider: no provider named {body['provider']!r}.",
                         error_type="validation_error",
                         hint="Save the provider first (POST /api/v1/admin/models/providers/<name>).",
                         extra={"fields": {"provider": ["unknown provider"]}})
    await ai_core.save_model(model_id, body)
    return web.json_response({"status": "saved", "id": model_id})


@routes.delete(PREFIX + "/models/models/{id}", name="admin.model_delete")
@api_doc("Delete a model no routing rule names", responses={200: ModelChanged}, errors=(404, 409, 502, 503),
         auth="admin", path={"id": KEY_PARAMETER})
async def model_delete(request: web.Request) -> web.Response:
    await require_admin(request)
    ai_core = ai_core_of(request)
    model_id = path_key(request, "id", "model id")
    purposes = [r["purpose"] for r in await ai_core.routes() if model_id in r["fallback_chain"]]
    if purposes:
        raise Conflict(f"The model {model_id!r} is in the fallback chain of {', '.join(purposes)}.",
                       error_type="model_in_use", hint="Take it out of those routing rules first.")
    await ai_core.delete_model(model_id)
    return web.json_response({"status": "deleted", "id": model_id})


# ---------------------------------------------------------------- routing

@routes.get(PREFIX + "/models/routing", name="admin.routing")
@api_doc("Routing rules: the fallback chain of models per purpose", responses={200: RoutingRule(many=True)},
         errors=(502, 503), auth="admin")
async def routing(request: web.Request) -> web.Response:
    await require_admin(request)
    return web.json_response(await ai_core_of(request).routes())


@routes.post(PREFIX + "/models/routing/{purpose}", name="admin.routing_save")
@api_doc("Set a purpose's fallback chain of saved models", body=RouteBody, responses={200: RouteChanged},
         errors=(502, 503), auth="admin", path={"purpose": KEY_PARAMETER})
async def routing_save(request: web.Request) -> web.Response:
    await require_admin(request)
    ai_core = ai_core_of(request)
    purpose = path_key(request, "purpose", "purpose")
    body = await parse_body(request, RouteBody())
    same_as_path(purpose, body["purpose"], "purpose")
    chain = body["fallback_chain"]
    repeated = sorted({m for m in chain if chain.count(m) > 1})
    if repeated:
        raise BadRequest(f"Invalid body: fallback_chain: {', '.join(repeated)} appears more than once.",
                         error_type="validation_error", hint="Name each model once.",
                         extra={"fields": {"fallback_chain": ["repeated model"]}})
    known = {m["id"] for m in await ai_core.models()}
    unknown = [m for m in chain if m not in known]
    if unknown:
        raise BadRequest(f"Invalid body: fallback_chain: no model with id {', '.join(map(repr, unknown))}.",
                         error_type="validation_error",
                         hint="GET /api/v1/admin/models/models lists the model ids.",
                         extra={"fields": {"fallback_chain": ["unknown model"]}})
    await ai_core.save_route(purpose, chain, body["required"])
    return web.json_response({"status": "saved", "purpose": purpose})


@routes.delete(PREFIX + "/models/routing/{purpose}", name="admin.routing_delete")
@api_doc("Delete a routing rule", responses={200: RouteChanged}, errors=(404, 502, 503), auth="admin",
         path={"purpose": KEY_PARAMETER})
async def routing_delete(request: web.Request) -> web.Response:
    await require_admin(request)
    purpose = path_key(request, "purpose", "purpose")
    await ai_core_of(request).delete_route(purpose)
    return web.json_response({"status": "deleted", "purpose": purpose})


# ---------------------------------------------------------------- reaching a provider

@routes.post(PREFIX + "/models/health-check", name="admin.health_check")
@api_doc("Reach a provider for real: its model list, or a one-token completion", body=HealthCheckBody,
         responses={200: HealthCheck}, errors=(404, 502, 503), auth="admin")
async def health_check(request: web.Request) -> web.Response:
    """Reach the provider for real: its model list, or when it has none, a one-token
    completion with one of its models. Reports what happened; never fails the request
    because the provider did."""
    await require_admin(request)
    ai_core = ai_core_of(request)
    timeout = request.config_dict[TIMEOUTS].health_check
    body = await parse_body(request, HealthCheckBody())
    name = body["provider"]
    provider = next((p for p in await ai_core.providers() if p["name"] == name), None)
    if provider is None:
        raise NotFound(f"No provider named {name!r}.", error_type="provider_not_found",
                       hint="GET /api/v1/admin/models/providers lists the providers.")
    probe = await ai_core.probe(name, timeout=timeout)
    method, models_count = "models", None
    if probe["status"] in (404, 405):
        model = next((m for m in await ai_core.models() if m["provider"] == name and m["enabled"]), None)
        if model is not None:
            method = "completion"
            probe = await ai_core.probe(
                name, url=provider["base_url"].rstrip("/") + "/chat/completions", method="POST",
                payload={"model": model["name"], "max_tokens": 1, "stream": False,
                         "messages": [{"role": "user", "content": "ping"}]},
                timeout=timeout)
    status = probe["status"]
    reachable = status is not None
    ok = reachable and 200 <= status < 300
    error = probe["error"]
    if reachable and not ok:
        error = f"HTTP {status}: {provider_error_text(probe['body']) or 'no message'}"
    if ok and method == "models":
        items = model_items(probe["body"])
        models_count = len(items) if items is not None else None
    latency = probe["latency_ms"]
    if ok:
        what = "its model list" if method == "models" else "a one-token completion"
        count = f" ({models_count} models)" if models_count is not None else ""
        message = f"Provider {name!r} answered {what} in {latency:g} ms{count}."
    elif reachable:
        message = f"Provider {name!r} is reachable but answered with an error: {error}."
    else:
        message = f"Provider {name!r} cannot be reached: {error}."
    return web.json_response({"provider": name, "message": message, "reachable": reachable, "ok": ok,
                              "status": status, "latency_ms": latency, "method": method,
                              "models_count": models_count, "error": None if ok else error,
                              "error_kind": probe["error_kind"], "url": probe["url"]})


@routes.get(PREFIX + "/models/fetch-models/{name}", name="admin.fetch_models")
@api_doc("A provider's model list, from its saved address or `url`", query=FetchModelsQuery,
         responses={200: ProviderModels}, errors=(404, 502, 503), auth="admin", path={"name": KEY_PARAMETER})
async def fetch_models(request: web.Request) -> web.Response:
    """The provider's model list at `url` (default: the saved provider's `/models`). The URL
    is the caller's, so the AI core fetches it through the guarded fetcher and sends the
    saved key only to the provider's own origin."""
    await require_admin(request)
    name = path_key(request, "name", "provider name")
    query = parse_query(request, FetchModelsQuery())
    probe = await ai_core_of(request).probe(name, url=query["url"],
                                            timeout=request.config_dict[TIMEOUTS].fetch_models)
    if probe["error_kind"] == "refused":
        raise BadRequest(f"The URL is not allowed: {probe['error']}.", error_type="url_not_allowed",
                         hint="Use the provider's public address, or have the operator allow private "
                              "addresses ([fetch] allow_private / allow_hosts).")
    if probe["status"] is None:
        raise BadGateway(f"The provider cannot be reached: {probe['error']}.", error_type="provider_unreachable")
    if not 200 <= probe["status"] < 300:
        raise BadGateway(f"The provider answered HTTP {probe['status']}: "
                         f"{provider_error_text(probe['body']) or 'no message'}.", error_type="provider_error",
                         hint="Check the URL and the provider's API key.")
    items = model_items(probe["body"])
    if items is None:
        raise BadGateway("The provider's answer is not a model list.", error_type="provider_bad_answer",
                         hint="Point url at the provider's /models (OpenAI) or /api/tags (Ollama) address.")
    return web.json_response({"provider": name, "url": probe["url"], "models": items, "total": len(items)})
