"""The AI core's HTTP endpoints: the SSE chat call (the OpenAI-compatible door: door.py), image
descriptions, tool records and statistics, and the model tables for the administrator.
Every endpoint requires a credential (a user's access token or the service credential); the
endpoints that talk to the models ask the one rule of who may chat (the chat plugin's
`require_chat_user`, a pure function of the configuration: this service runs no chat plugin)."""
from __future__ import annotations

import json
import logging
import time

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.context import get_context
from gateway.contracts import ContractKey
from gateway.errors import BadGateway, BadRequest, NotFound
from gateway.identity import Identity, owner_for, require_admin, require_user
from gateway.openapi import api_doc
from gateway.validation import MAX_OFFSET, parse_body, parse_query
from plugins.chat.contract import require_chat_user

from . import store
from .contract import ChatEvent, DoneEvent, message_too_long
from .engine import Engine

log = logging.getLogger("plugins.ai_core.api")


class CallerLeft(Exception):
    """The caller closed a chat stream while it was written (the gateway does when a person
    stops the reply): the turn ends there, and the model's stream with it."""
from .images import ImageError, bad_image, origin
from .providers import ProviderError
from .schemas import (CHAT_EVENTS, Description, IdChanged, NameChanged, PurposeChanged, StoredModels,
                      StoredProviders, StoredRoute, ToolCalls, ToolCallStats, ToolList)
from .turn_types import Turn, TurnFailed

routes = web.RouteTableDef()

MODES = ("text", "voice_msg", "voice_assistant")
ROUTING_ALIAS = "assistant"


# Internal to this plugin (other plugins use contract.py): the handlers find the engine here.
ENGINE: ContractKey[Engine] = ContractKey("ai_core.engine")


def engine_of(request: web.Request) -> Engine:
    return get_context(request).contracts.require(ENGINE)


def acting_user(identity: Identity, requested: str | None) -> str:
    """Whose turn this is: a service names the user it acts for; a person acts for themself."""
    if identity.kind == "service":
        if not requested:
            raise BadRequest("A service must name the user it acts for.", error_type="validation_error",
                             hint="Add user_id to the request body.")
        return requested
    return owner_for(identity, requested)


# ---------------------------------------------------------------- the SSE chat call

class HistoryItem(marshmallow.Schema):
    role = fields.String(required=True, validate=validate.OneOf(["user", "assistant", "system"]))
    content = fields.String(required=True)


class Attachment(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.EXCLUDE

    type = fields.String(load_default="image", validate=validate.Equal("image"))
    url = fields.String(required=True, validate=validate.Length(min=1))


class ChatStreamBody(marshmallow.Schema):
    user_id = fields.String(load_default=None)
    session_id = fields.String(load_default=None, allow_none=True)
    text = fields.String(load_default="")
    history = fields.List(fields.Nested(HistoryItem), load_default=list)
    mode = fields.String(load_default="text", validate=validate.OneOf(MODES))
    attachments = fields.List(fields.Nested(Attachment), load_default=list)
    purpose = fields.String(load_default="chat", validate=validate.Length(min=1, max=64))
    message_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=128), metadata={
        "description": "The person's message this turn answers (the chat's client_msg_id), recorded by "
                       "turn-finished listeners as the source of what they learn."})
    use_tools = fields.Boolean(load_default=True, metadata={
        "description": "False: the models are offered no tools (background work such as thinking)."})


def sse_frame(event: ChatEvent) -> bytes:
    # "replace": a model may send an escaped half of a surrogate pair, which UTF-8 cannot carry.
    return f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n".encode("utf-8", "replace")


@routes.post("/api/v1/chat/stream", name="ai_core.chat_stream")
@api_doc("One chat turn, answered as a stream of server-sent events", body=ChatStreamBody,
         responses={200: {"text/event-stream": CHAT_EVENTS}}, errors=(403,),
         description="With the peer credential, `user_id` names the user the turn is for.")
async def chat_stream(request: web.Request) -> web.StreamResponse:
    identity = await require_chat_user(request)
    body = await parse_body(request, ChatStreamBody())
    user_id = acting_user(identity, body["user_id"])
    limit = engine_of(request).settings.max_message_chars
    if len(body["text"]) > limit:
        raise message_too_long(len(body["text"]), limit, "[plugins.ai_core] max_message_chars", "The text")
    if not body["text"].strip() and not body["attachments"]:
        raise BadRequest("Send text, an image, or both.", error_type="validation_error")
    turn = Turn(user_id=user_id, session_id=body["session_id"], text=body["text"],
                history=body["history"], mode=body["mode"],
                images=[a["url"] for a in body["attachments"]], purpose=body["purpose"],
                use_tools=body["use_tools"], message_id=body["message_id"])
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    await response.prepare(request)
    engine = engine_of(request)
    started = time.monotonic()

    async def emit(event: ChatEvent) -> None:
        try:
            await response.write(sse_frame(event))
        except ConnectionResetError:
            raise CallerLeft() from None

    try:
        try:
            outcome = await engine.run(turn, emit)
        except TurnFailed:
            await response.write_eof()
            return response
        done: DoneEvent = {"type": "done", "text": outcome.text, "model": outcome.model,
                           "finish_reason": outcome.finish_reason, "fallbacks": outcome.fallbacks,
                           "usage": outcome.usage, "duration_ms": round((time.monotonic() - started) * 1000, 1)}
        await emit(done)
        await response.write_eof()
    except (CallerLeft, ConnectionResetError):  # not an error: nobody reads the rest (a person stopped the reply)
        log.info("the caller closed the stream of a turn of session %s; the model was stopped", body["session_id"])
    return response


# ---------------------------------------------------------------- vision

class VisionBody(marshmallow.Schema):
    image = fields.String(required=True, validate=validate.Length(min=1))
    prompt = fields.String(load_default="Describe this image in detail.")
    user_id = fields.String(load_default=None, allow_none=True)


@routes.post("/api/v1/vision/describe", name="ai_core.vision_describe")
@api_doc("Describe an image (a data URI or an http(s) URL) with the vision route's models", body=VisionBody,
         responses={200: Description}, errors=(404, 502, 503))
async def vision_describe(request: web.Request) -> web.Response:
    await require_chat_user(request)
    body = await parse_body(request, VisionBody())
    engine = engine_of(request)
    chain, _ = await engine.candidates("vision")
    if not chain:
        raise NotFound("No model is routed for images.", error_type="no_vision_model",
                       hint="Add a model tagged `vision`, or a `vision` routing rule, in the model settings.")
    try:
        image = await engine.fetcher().as_data_uri(body["image"])
    except ImageError as error:
        raise bad_image(error) from None
    messages = [{"role": "user", "content": [{"type": "text", "text": body["prompt"]},
                                             {"type": "image_url", "image_url": {"url": image}}]}]
    failures = []
    for candidate in chain:
        try:
            description = await engine.complete_once(candidate, messages)
        except ProviderError as error:
            failures.append(f"{candidate.model.id} ({error.kind})")
            continue
        return web.json_response({"description": description, "model": candidate.model.id})
    raise BadGateway("Every vision model failed: " + "; ".join(failures), error_type="vision_failed",
                     hint="Check the providers of the vision route.")


# ---------------------------------------------------------------- tools

class CallsQuery(marshmallow.Schema):
    tool_name = fields.String(load_default=None)
    user_id = fields.String(load_default=None)
    page = fields.Integer(load_default=1, validate=validate.Range(min=1, max=MAX_OFFSET // 500))
    page_size = fields.Integer(load_default=50, validate=validate.Range(min=1, max=500))


@routes.get("/api/v1/tools", name="ai_core.tools")
@api_doc("The tools the models may call", responses={200: ToolList})
async def list_tools(request: web.Request) -> web.Response:
    await require_user(request)
    tools = engine_of(request).registry.describe()
    return web.json_response({"tools": tools, "total": len(tools)})


@routes.get("/api/v1/tools/calls", name="ai_core.tool_calls")
@api_doc("A page of recorded tool calls", query=CallsQuery, responses={200: ToolCalls}, errors=(503,), auth="admin")
async def tool_calls(request: web.Request) -> web.Response:
    await require_admin(request)
    query = parse_query(request, CallsQuery())
    calls, total = await store.list_tool_calls(get_context(request).db, query["tool_name"], query["user_id"],
                                               query["page"], query["page_size"])
    return web.json_response({"calls": calls, "total": total, "page": query["page"],
                              "page_size": query["page_size"]})


@routes.get("/api/v1/tools/calls/stats", name="ai_core.tool_call_stats")
@api_doc("Tool-call counts, failures and durations per tool", responses={200: ToolCallStats}, errors=(503,),
         auth="admin")
async def tool_call_stats(request: web.Request) -> web.Response:
    await require_admin(request)
    tools = await store.tool_call_statistics(get_context(request).db)
    return web.json_response({"tools": tools, "total_calls": sum(t["count"] for t in tools),
                              "total_failures": sum(t["failures"] for t in tools)})


# ---------------------------------------------------------------- model tables (administrator)

class ProviderBody(marshmallow.Schema):
    name = fields.String(load_default=None)
    base_url = fields.Url(required=True, schemes={"http", "https"}, require_tld=False)
    # Sent as `Authorization: Bearer <key>`: a line break or a control character cannot be.
    api_key = fields.String(load_default=None, allow_none=True, validate=[
        validate.Length(max=1000),
        validate.Regexp(r"^[^\s\x00-\x1f\x7f]*\Z", error="must not contain spaces or control characters")])


class ModelBody(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.EXCLUDE  # updated_at and other read-only fields echo back

    id = fields.String(load_default=None)
    name = fields.String(required=True, validate=validate.Length(min=1, max=200))
    provider = fields.String(required=True, validate=validate.Length(min=1, max=100))
    description = fields.String(load_default="")
    # ai_models.priority is an INTEGER column.
    priority = fields.Integer(load_default=0, validate=validate.Range(min=-(2**31), max=2**31 - 1))
    tags = fields.List(fields.String(), load_default=list)
    params = fields.Dict(keys=fields.String(), load_default=dict)
    enabled = fields.Boolean(load_default=True)


class RouteBody(marshmallow.Schema):
    purpose = fields.String(load_default=None)
    fallback_chain = fields.List(fields.String(validate=validate.Length(min=1)), required=True)
    required = fields.Boolean(load_default=False)


def _same_name(in_path: str, in_body: str | None, field_name: str) -> None:
    if in_body and in_body != in_path:
        raise BadRequest(f"The {field_name} in the body ({in_body!r}) differs from the one in the path "
                         f"({in_path!r}).", error_type="validation_error")


def _valid_key(value: str, what: str) -> str:
    if not value or len(value) > 100 or "/" in value:
        raise BadRequest(f"Invalid {what}.", error_type="validation_error")
    return value


@routes.get("/api/v1/models/providers", name="ai_core.providers")
@api_doc("Model providers (keys masked)", responses={200: StoredProviders}, errors=(503,), auth="admin")
async def providers_list(request: web.Request) -> web.Response:
    await require_admin(request)
    providers = await store.list_providers(get_context(request).db)
    items = [{"name": p.name, "base_url": p.base_url, "api_key": store.mask_key(p.api_key)} for p in providers]
    return web.json_response({"providers": items, "total": len(items)})


@routes.post("/api/v1/models/providers/{name}", name="ai_core.provider_save")
@api_doc("Add or change a provider", body=ProviderBody, responses={200: NameChanged}, errors=(503,), auth="admin")
async def provider_save(request: web.Request) -> web.Response:
    await require_admin(request)
    name = _valid_key(request.match_info["name"], "provider name")
    body = await parse_body(request, ProviderBody())
    _same_name(name, body["name"], "name")
    db = get_context(request).db
    api_key = body["api_key"]
    stored = next((p for p in await store.list_providers(db) if p.name == name), None)
    if api_key is not None and api_key == store.mask_key(stored.api_key if stored else ""):
        api_key = None  # the masked key shown by the list came back unchanged
    if api_key is None and stored is not None and stored.api_key and \
            origin(stored.base_url) != origin(body["base_url"]):
        # A kept key would follow the provider to its new address: whoever can change the
        # address must also know the key.
        raise BadRequest("Moving a provider to another address requires its API key again.",
                         error_type="api_key_required",
                         hint="Send the provider's api_key along with the new base_url.")
    await store.save_provider(db, name, body["base_url"], api_key)
    await engine_of(request).routing.changed()
    return web.json_response({"status": "saved", "name": name})


@routes.delete("/api/v1/models/providers/{name}", name="ai_core.provider_delete")
@api_doc("Delete a provider", responses={200: NameChanged}, errors=(404, 503), auth="admin")
async def provider_delete(request: web.Request) -> web.Response:
    await require_admin(request)
    name = request.match_info["name"]
    if not await store.delete_provider(get_context(request).db, name):
        raise NotFound(f"No provider named {name!r}.", error_type="provider_not_found")
    await engine_of(request).routing.changed()
    return web.json_response({"status": "deleted", "name": name})


@routes.get("/api/v1/models/models", name="ai_core.models")
@api_doc("Models", responses={200: StoredModels}, errors=(503,), auth="admin")
async def models_list(request: web.Request) -> web.Response:
    await require_admin(request)
    models = await store.list_models(get_context(request).db)
    items = [{"id": m.id, "name": m.name, "provider": m.provider, "description": m.description,
              "priority": m.priority, "tags": list(m.tags), "params": m.params, "enabled": m.enabled,
              "updated_at": m.updated_at} for m in models]
    return web.json_response({"models": items, "total": len(items)})


@routes.post("/api/v1/models/models/{id}", name="ai_core.model_save")
@api_doc("Add or change a model", body=ModelBody, responses={200: IdChanged}, errors=(503,), auth="admin")
async def model_save(request: web.Request) -> web.Response:
    await require_admin(request)
    model_id = _valid_key(request.match_info["id"], "model id")
    body = await parse_body(request, ModelBody())
    _same_name(model_id, body["id"], "id")
    await store.save_model(get_context(request).db, {**body, "id": model_id})
    await engine_of(request).routing.changed()
    return web.json_response({"status": "saved", "id": model_id})


@routes.delete("/api/v1/models/models/{id}", name="ai_core.model_delete")
@api_doc("Delete a model", responses={200: IdChanged}, errors=(404, 503), auth="admin")
async def model_delete(request: web.Request) -> web.Response:
    await require_admin(request)
    model_id = request.match_info["id"]
    if not await store.delete_model(get_context(request).db, model_id):
        raise NotFound(f"No model with id {model_id!r}.", error_type="model_not_found")
    await engine_of(request).routing.changed()
    return web.json_response({"status": "deleted", "id": model_id})


@routes.get("/api/v1/models/routing", name="ai_core.routing")
@api_doc("Routing rules", responses={200: StoredRoute(many=True)}, errors=(503,), auth="admin")
async def routing_list(request: web.Request) -> web.Response:
    await require_admin(request)
    rules = await store.list_routes(get_context(request).db)
    return web.json_response([{"purpose": r.purpose, "fallback_chain": list(r.fallback_chain),
                               "required": r.required} for r in rules])


@routes.post("/api/v1/models/routing/{purpose}", name="ai_core.routing_save")
@api_doc("Set a purpose's fallback chain", body=RouteBody, responses={200: PurposeChanged}, errors=(503,),
         auth="admin")
async def routing_save(request: web.Request) -> web.Response:
    await require_admin(request)
    purpose = _valid_key(request.match_info["purpose"], "purpose")
    body = await parse_body(request, RouteBody())
    _same_name(purpose, body["purpose"], "purpose")
    await store.save_route(get_context(request).db, purpose, body["fallback_chain"], body["required"])
    await engine_of(request).routing.changed()
    return web.json_response({"status": "saved", "purpose": purpose})


@routes.delete("/api/v1/models/routing/{purpose}", name="ai_core.routing_delete")
@api_doc("Delete a routing rule", responses={200: PurposeChanged}, errors=(404, 503), auth="admin")
async def routing_delete(request: web.Request) -> web.Response:
    await require_admin(request)
    purpose = request.match_info["purpose"]
    if not await store.delete_route(get_context(request).db, purpose):
        raise NotFound(f"No routing rule for {purpose!r}.", error_type="route_not_found")
    await engine_of(request).routing.changed()
    return web.json_response({"status": "deleted", "purpose": purpose})
