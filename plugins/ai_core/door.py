"""The OpenAI-compatible door: `POST /v1/chat/completions` and `GET /v1/models` (embeddings and
audio: door_media.py). A request here is a relayed request, not the person's conversation: it
gets no turn context and tells no turn-finished listeners unless `door_remembers` says so.

What OpenAI's API takes is checked here and passed on: the client's `tools` (their calls come
back in OpenAI's shape, streamed as deltas), images in `content` parts (data URLs and links, the
person's own files among them, fetched by the guarded image fetcher), `response_format`,
`stop`, `seed`, `user`, `n = 1`, `stream_options.include_usage`."""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, Mapping

import marshmallow
import orjson
from aiohttp import web
from marshmallow import fields, validate

from gateway.errors import BadGateway, BadRequest, NotFound
from gateway.identity import Identity
from gateway.openapi import api_doc
from gateway.validation import parse_body
from plugins.chat.contract import require_chat_user

from .agent import AGENT_MODEL
from .api import ROUTING_ALIAS, engine_of
from .contract import ChatEvent, message_too_long
from .engine import Engine
from .images import ImageError, bad_image
from .routing import CHAT_PURPOSE, VISION_PURPOSE, supports_tools
from .schemas import OPENAI_CHUNKS, ChatCompletion, OpenAiModels
from .turn_types import Outcome, Turn, TurnFailed

routes = web.RouteTableDef()

EMBEDDINGS_MODEL = "embeddings"  # always the configured embeddings provider (door_media.py)
FINISH_REASONS = ("stop", "length", "content_filter", "tool_calls")
# Passed to the model as the client sent them.
PASSED_ON = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "response_format", "stop", "seed",
             "user", "presence_penalty", "frequency_penalty", "tool_choice", "parallel_tool_calls")
ROLES = ("system", "user", "assistant", "tool", "developer")


class FunctionSpec(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.INCLUDE  # `strict` and what OpenAI adds next go to the model as sent

    name = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}\Z"))
    description = fields.String()
    parameters = fields.Dict()


class ToolSpec(marshmallow.Schema):
    type = fields.String(required=True, validate=validate.Equal("function"))
    function = fields.Nested(FunctionSpec, required=True)


class ResponseFormat(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.INCLUDE

    type = fields.String(required=True, validate=validate.OneOf(("text", "json_object", "json_schema")))
    json_schema = fields.Dict()


class StreamOptions(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.EXCLUDE

    include_usage = fields.Boolean(load_default=False)


class Stop(fields.Field):
    """OpenAI's `stop`: a string or up to four."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None,
                     **kwargs: Any) -> str | list[str]:
        if isinstance(value, str):
            return value
        if isinstance(value, list) and len(value) <= 4 and all(isinstance(item, str) for item in value):
            return value
        raise marshmallow.ValidationError("must be a string or a list of at most 4 strings")


class OpenAiBody(marshmallow.Schema):
    class Meta:
        unknown = marshmallow.EXCLUDE  # OpenAI clients send many optional fields

    model = fields.String(load_default=ROUTING_ALIAS)
    messages = fields.List(fields.Dict(), required=True, validate=validate.Length(min=1))
    stream = fields.Boolean(load_default=False)
    temperature = fields.Float(load_default=None, allow_none=True, validate=validate.Range(min=0, max=2))
    top_p = fields.Float(load_default=None, allow_none=True, validate=validate.Range(min=0, max=1))
    max_tokens = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=1))
    max_completion_tokens = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=1))
    presence_penalty = fields.Float(load_default=None, allow_none=True, validate=validate.Range(min=-2, max=2))
    frequency_penalty = fields.Float(load_default=None, allow_none=True, validate=validate.Range(min=-2, max=2))
    user = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=256))
    seed = fields.Integer(load_default=None, allow_none=True, validate=validate.Range(min=-(2**63), max=2**63 - 1))
    stop = Stop(load_default=None, allow_none=True, metadata={"description": "A string or up to 4."})
    n = fields.Integer(load_default=1, allow_none=True, validate=validate.Equal(1, error="only n = 1 is supported"))
    response_format = fields.Nested(ResponseFormat, load_default=None, allow_none=True)
    stream_options = fields.Nested(StreamOptions, load_default=None, allow_none=True)
    tools = fields.List(fields.Nested(ToolSpec), load_default=None, allow_none=True,
                        validate=validate.Length(max=128))
    tool_choice = fields.Raw(load_default=None, allow_none=True, metadata={
        "description": "`none`, `auto`, `required`, or {type: function, function: {name}}."})
    parallel_tool_calls = fields.Boolean(load_default=None, allow_none=True)


# One instance for every request: building a schema with nested ones cost more than loading a body.
OPENAI_BODY = OpenAiBody()


def check_messages(messages: list[dict], max_message_chars: int, max_chars: int) -> None:
    """Known roles; each person's message within the bound of the chat call's `text`, and all
    of them together within `max_conversation_chars`."""
    total = 0
    for index, message in enumerate(messages):
        if message.get("role") not in ROLES:
            raise BadRequest(f"messages[{index}].role is missing or unknown.", error_type="validation_error")
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise BadRequest(f"messages[{index}].content must be a string or a list of parts.",
                             error_type="validation_error")
        length = content_chars(content)
        if message["role"] == "user" and length > max_message_chars:
            raise message_too_long(length, max_message_chars, "[plugins.ai_core] max_message_chars",
                                   f"messages[{index}]")
        total += length
    if total > max_chars:
        raise message_too_long(total, max_chars, "[plugins.ai_core] max_conversation_chars",
                               "The messages' content")


def content_chars(content: Any) -> int:
    """Characters of a message's content: a string, or the text of its parts."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(part["text"]) for part in content
                   if isinstance(part, dict) and isinstance(part.get("text"), str))
    return 0


def check_tool_choice(body: dict) -> None:
    choice = body["tool_choice"]
    if choice is None:
        return
    if not body["tools"]:
        raise BadRequest("tool_choice is only allowed when tools are specified.", error_type="validation_error")
    names = {tool["function"]["name"] for tool in body["tools"]}
    if isinstance(choice, str) and choice in ("none", "auto", "required"):
        return
    function = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    if not isinstance(function, dict) or function.get("name") not in names:
        raise BadRequest("tool_choice must be none, auto, required, or a function of `tools`.",
                         error_type="validation_error")


async def with_images(engine: Engine, messages: list[dict]) -> tuple[list[dict], bool]:
    """The messages with every image part's URL as a data URI (a link fetched by the guarded
    image fetcher), and whether there was one. 400 `invalid_image` for one that cannot be used."""
    fetcher = None
    changed: list[dict] = []
    found = False
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not any(isinstance(p, dict) and p.get("type") == "image_url"
                                                    for p in content):
            changed.append(message)
            continue
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, dict) else image
                if not isinstance(url, str) or not url:
                    raise BadRequest("An image_url part has no url.", error_type="invalid_image")
                fetcher = fetcher or engine.fetcher()
                try:
                    uri = await fetcher.as_data_uri(url)
                except ImageError as error:
                    raise bad_image(error) from None
                extra = {key: value for key, value in image.items() if key != "url"} if isinstance(image, dict) else {}
                part = {"type": "image_url", "image_url": {**extra, "url": uri}}
                found = True
            parts.append(part)
        changed.append({**message, "content": parts})
    return changed, found


async def door_turn(request: web.Request, identity: Identity, body: dict) -> Turn:
    """The turn a request asks for, every refusal before any model is asked."""
    engine = engine_of(request)
    check_messages(body["messages"], engine.settings.max_message_chars, engine.settings.max_conversation_chars)
    check_tool_choice(body)
    client_tools = [{"type": "function", "function": tool["function"]} for tool in body["tools"] or ()]
    door_tools = engine.settings.door_tools
    own_tools = door_tools == "mixed" or (door_tools == "own" and not client_tools)
    messages, has_images = await with_images(engine, body["messages"])
    purpose = VISION_PURPOSE if has_images else CHAT_PURPOSE
    preferred = None if body["model"] in (ROUTING_ALIAS, AGENT_MODEL, "") else body["model"]
    chain, _ = await engine.candidates(purpose, preferred)
    if preferred and (not chain or chain[0].model.id != preferred):
        raise NotFound(f"The model {preferred!r} does not exist or is disabled.", error_type="model_not_found",
                       hint=f"GET /v1/models lists the models; {ROUTING_ALIAS!r} uses the chat route.")
    if has_images and not chain:
        raise BadRequest("No model is routed for images.", error_type="no_vision_model",
                         hint="Add a model tagged `vision`, or a `vision` routing rule, in the model settings.")
    if client_tools and not (chain and (supports_tools(chain[0].model) if preferred
                                        else any(supports_tools(c.model) for c in chain))):
        raise BadRequest(f"{'The model ' + repr(preferred) if preferred else 'No model of the route'} takes no tools, "
                         "and the offline agent cannot call the client's functions.", error_type="tools_unsupported",
                         hint="Name a model that supports tools (not tagged `no_tools`), or connect one.")
    user_id = identity.user_id if identity.kind != "service" else (body["user"] or identity.user_id)
    overrides = {key: body[key] for key in PASSED_ON if body[key] is not None}
    if not client_tools:
        overrides.pop("tool_choice", None), overrides.pop("parallel_tool_calls", None)
    if (body["stream_options"] or {}).get("include_usage"):
        overrides["stream_options"] = {"include_usage": True}
    return Turn(user_id=user_id, messages=messages, preferred_model=preferred, overrides=overrides,
                purpose=purpose, remembers=engine.settings.door_remembers, client_tools=client_tools,
                use_tools=own_tools)


@routes.post("/v1/chat/completions", name="ai_core.openai_chat")
@api_doc("OpenAI-compatible chat completion (`model` `assistant`: the chat route)", body=OpenAiBody,
         responses={200: {"application/json": ChatCompletion, "text/event-stream": OPENAI_CHUNKS}},
         errors=(400, 403, 404, 413, 502, 503),
         description="400 `tools_unsupported` (the client's `tools` and no model that takes them), "
                     "`no_vision_model` (an image and no vision model), `invalid_image`, `validation_error`.")
async def openai_chat(request: web.Request) -> web.StreamResponse:
    identity = await require_chat_user(request)
    body = await parse_body(request, OPENAI_BODY)
    turn = await door_turn(request, identity, body)
    completion = Completion(body["model"], include_usage=bool((body["stream_options"] or {}).get("include_usage")))
    engine = engine_of(request)
    if not body["stream"]:
        return await whole_answer(engine, turn, completion)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    await response.prepare(request)
    await response.write(completion.chunk({"role": "assistant", "content": ""}))

    async def emit(event: ChatEvent) -> None:
        if event["type"] == "delta":
            await response.write(completion.chunk({"content": event["content"]}))
        elif event["type"] == "tool_call":
            await response.write(completion.chunk({"tool_calls": [completion.tool_call_delta(event)]}))
        elif event["type"] == "error":
            await response.write(b"data: " + json.dumps({"error": {
                "message": event["error"], "type": event["errorType"], "code": None}}).encode() + b"\n\n")

    try:
        outcome = await engine.run(turn, emit)
    except TurnFailed:
        await response.write_eof()
        return response
    await response.write(completion.chunk({}, finish_reason(outcome), outcome.model))
    if completion.include_usage:
        await response.write(completion.usage_chunk(outcome))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def whole_answer(engine: Engine, turn: Turn, completion: "Completion") -> web.Response:
    async def raise_errors(event: ChatEvent) -> None:
        if event["type"] == "error":
            raise BadGateway(event["error"], error_type=event["errorType"])

    try:
        outcome = await engine.run(turn, raise_errors)
    except TurnFailed as failure:
        raise BadGateway(str(failure), error_type="model_failed") from None
    message: dict[str, Any] = {"role": "assistant", "content": outcome.text or (None if outcome.tool_calls else "")}
    if outcome.tool_calls:
        message["tool_calls"] = outcome.tool_calls
    return web.json_response({
        "id": completion.id, "object": "chat.completion", "created": completion.created, "model": outcome.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(outcome)}],
        "usage": usage_of(outcome)})


def finish_reason(outcome: Outcome) -> str:
    if outcome.tool_calls:
        return "tool_calls"
    return outcome.finish_reason if outcome.finish_reason in FINISH_REASONS else "stop"


def usage_of(outcome: Outcome) -> dict:
    return outcome.usage or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


class Completion:
    """One answer's `chat.completion.chunk` events. The part of each event before the delta and
    the part after it are written once: a delta costs one small encode (dozens a second per reply)."""

    def __init__(self, model_named: str, *, include_usage: bool):
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())
        self.model_named = model_named
        self.include_usage = include_usage
        self._head = self.head(model_named)
        self._middle = b'}],"usage":null}\n\n' if include_usage else b'}]}\n\n'

    def head(self, model: str) -> bytes:
        return (b'data: {"id":"' + self.id.encode() + b'","object":"chat.completion.chunk","created":'
                + str(self.created).encode() + b',"model":' + encode(model) + b',"choices":[{"index":0,"delta":')

    def chunk(self, delta: dict, finish: str | None = None, model: str | None = None) -> bytes:
        head = self._head if model is None else self.head(model)
        return head + encode(delta) + b',"finish_reason":' + encode(finish) + self._middle

    @staticmethod
    def tool_call_delta(event: ChatEvent) -> dict:
        if event.get("id"):
            return {"index": event["index"], "id": event["id"], "type": "function",  # type: ignore[typeddict-item]
                    "function": {"name": event["name"], "arguments": event["arguments"]}}  # type: ignore[typeddict-item]
        return {"index": event["index"], "function": {"arguments": event["arguments"]}}  # type: ignore[typeddict-item]

    def usage_chunk(self, outcome: Outcome) -> bytes:
        return b"data: " + encode({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                                   "model": outcome.model, "choices": [], "usage": usage_of(outcome)}) + b"\n\n"


def encode(value: Any) -> bytes:
    """orjson for speed; json where orjson refuses (half a surrogate pair a model sent escaped)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "replace")


@routes.get("/v1/models", name="ai_core.openai_models")
@api_doc("OpenAI-compatible model list: `assistant`, `embeddings` and the enabled models",
         responses={200: OpenAiModels}, errors=(403, 503))
async def openai_models(request: web.Request) -> web.Response:
    await require_chat_user(request)
    models = await engine_of(request).routing.enabled_models()
    data = [{"id": ROUTING_ALIAS, "object": "model", "created": 0, "owned_by": "assistant"},
            {"id": EMBEDDINGS_MODEL, "object": "model", "created": 0, "owned_by": "assistant"}]
    data += [{"id": m.id, "object": "model", "created": 0, "owned_by": m.provider} for m in models
             if m.id not in (ROUTING_ALIAS, EMBEDDINGS_MODEL)]
    return web.json_response({"object": "list", "data": data})
