"""What the AI core's endpoints answer, for the OpenAPI document (docs/ai-core.md)."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

# A `text/event-stream` answer is described one event at a time, as OpenAPI 3.2 does and as
# clients and tools (schemathesis among them) read a 3.1 schema for that media type: an object
# with the event's `event` name and its `data` line.
CHAT_EVENTS = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string",
                  "enum": ["delta", "thinking", "tool_progress", "system_info", "done", "error"]},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "contentSchema": {"type": "object", "required": ["type"],
                                   "properties": {"type": {"type": "string"}}}},
    },
    "description": "Server-sent events, each `event: <type>` and `data: <JSON>`: `delta` {content}, `thinking` "
                   "{status, content}, `tool_progress` {tool_name, status, progress, message}, `system_info` "
                   "{level, message, action; with action `confirm` also effect, confirmation_id, expires_at}; the last is `done` {text, model, finish_reason, fallbacks, usage, "
                   "duration_ms} or `error` {error, errorType, model}.",
}
OPENAI_CHUNKS = {
    "type": "object",
    "required": ["data"],
    "properties": {"data": {"type": "string"}},
    "description": "With `stream: true`: `data: <chat.completion.chunk JSON>` events, a `data: {\"error\": ...}` "
                   "event when the turn fails, and `data: [DONE]` at the end (OpenAI's format).",
}


class CalledFunction(marshmallow.Schema):
    name = fields.String(required=True)
    arguments = fields.String(required=True, metadata={"description": "JSON text, as the model wrote it."})


class CompletionToolCall(marshmallow.Schema):
    id = fields.String(required=True)
    type = fields.String(required=True, validate=validate.Equal("function"))
    function = fields.Nested(CalledFunction, required=True)


class CompletionMessage(marshmallow.Schema):
    role = fields.String(required=True, validate=validate.Equal("assistant"))
    content = fields.String(required=True, allow_none=True, metadata={"description": "null with tool_calls only."})
    tool_calls = fields.List(fields.Nested(CompletionToolCall), metadata={
        "description": "Calls of the client's functions (finish_reason `tool_calls`)."})


class CompletionChoice(marshmallow.Schema):
    index = fields.Integer(required=True)
    message = fields.Nested(CompletionMessage, required=True)
    finish_reason = fields.String(required=True, validate=validate.OneOf(["stop", "length", "content_filter",
                                                                          "tool_calls"]))


class ChatCompletion(marshmallow.Schema):
    """OpenAI's `chat.completion` object."""
    id = fields.String(required=True)
    object = fields.String(required=True, validate=validate.Equal("chat.completion"))
    created = fields.Integer(required=True)
    model = fields.String(required=True)
    choices = fields.List(fields.Nested(CompletionChoice), required=True)
    usage = fields.Dict(required=True, metadata={"description": "prompt_tokens, completion_tokens, total_tokens."})


class OpenAiModel(marshmallow.Schema):
    id = fields.String(required=True)
    object = fields.String(required=True, validate=validate.Equal("model"))
    created = fields.Integer(required=True)
    owned_by = fields.String(required=True)


class OpenAiModels(marshmallow.Schema):
    object = fields.String(required=True, validate=validate.Equal("list"))
    data = fields.List(fields.Nested(OpenAiModel), required=True,
                       metadata={"description": "`assistant` first: the chat route."})


class Embedding(marshmallow.Schema):
    object = fields.String(required=True, validate=validate.Equal("embedding"))
    index = fields.Integer(required=True)
    embedding = fields.Raw(required=True, metadata={
        "oneOf": [{"type": "array", "items": {"type": "number"}}, {"type": "string"}],
        "description": "Floats, or with encoding_format base64 their little-endian float32 bytes in base64."})


class EmbeddingUsage(marshmallow.Schema):
    prompt_tokens = fields.Integer(required=True, metadata={"description": "Estimated: a word or CJK character each."})
    total_tokens = fields.Integer(required=True)


class EmbeddingList(marshmallow.Schema):
    """OpenAI's embeddings answer."""
    object = fields.String(required=True, validate=validate.Equal("list"))
    data = fields.List(fields.Nested(Embedding), required=True)
    model = fields.String(required=True, metadata={"description": "The embedder's model id."})
    usage = fields.Nested(EmbeddingUsage, required=True)


class Transcript(marshmallow.Schema):
    """OpenAI's transcription: `text`; with verbose_json also task, language, duration (s), segments."""
    text = fields.String(required=True)
    task = fields.String()
    language = fields.String()
    duration = fields.Float()
    segments = fields.List(fields.Dict())


class Description(marshmallow.Schema):
    description = fields.String(required=True)
    model = fields.String(required=True)


class ToolInfo(marshmallow.Schema):
    name = fields.String(required=True)
    description = fields.String(required=True)
    parameters = fields.Dict(required=True, metadata={"description": "The arguments' JSON schema."})
    examples = fields.Dict(keys=fields.String(), values=fields.List(fields.String()), required=True,
                           metadata={"description": "Example requests by language."})
    owner = fields.String(required=True, metadata={"description": "The plugin that registered it."})
    topic = fields.Dict(keys=fields.String(), values=fields.String(), required=True,
                        metadata={"description": "What help lists it under, by language."})
    help = fields.Dict(keys=fields.String(), values=fields.List(fields.String()), required=True,
                       metadata={"description": "What a person can say to use it, by language."})


class ToolList(marshmallow.Schema):
    tools = fields.List(fields.Nested(ToolInfo), required=True)
    total = fields.Integer(required=True)


class ToolCall(marshmallow.Schema):
    id = fields.Integer(required=True)
    call_id = fields.String(required=True)
    tool_name = fields.String(required=True)
    arguments = fields.Raw(required=True, metadata={"description": "As the model sent them."})
    result = fields.Raw(required=True, allow_none=True)
    error = fields.String(required=True, allow_none=True)
    status = fields.String(required=True, validate=validate.OneOf(["started", "running", "completed", "failed"]))
    duration_ms = fields.Float(required=True)
    session_id = fields.String(required=True, allow_none=True)
    user_id = fields.String(required=True, allow_none=True)
    model = fields.String(required=True, allow_none=True)
    created_at = fields.String(required=True, metadata={"description": "ISO 8601."})


class ToolCalls(marshmallow.Schema):
    calls = fields.List(fields.Nested(ToolCall), required=True, metadata={"description": "Newest first."})
    total = fields.Integer(required=True)
    page = fields.Integer(required=True)
    page_size = fields.Integer(required=True)


class ToolStatistics(marshmallow.Schema):
    tool_name = fields.String(required=True)
    count = fields.Integer(required=True)
    failures = fields.Integer(required=True)
    mean_duration_ms = fields.Float(required=True)
    p95_duration_ms = fields.Float(required=True)
    last_called_at = fields.String(required=True, metadata={"description": "ISO 8601."})


class ToolCallStats(marshmallow.Schema):
    tools = fields.List(fields.Nested(ToolStatistics), required=True)
    total_calls = fields.Integer(required=True)
    total_failures = fields.Integer(required=True)


class StoredProvider(marshmallow.Schema):
    name = fields.String(required=True)
    base_url = fields.String(required=True)
    api_key = fields.String(required=True, metadata={"description": "Masked: `****` and the last 4 characters."})


class StoredProviders(marshmallow.Schema):
    providers = fields.List(fields.Nested(StoredProvider), required=True)
    total = fields.Integer(required=True)


class StoredModel(marshmallow.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    provider = fields.String(required=True)
    description = fields.String(required=True)
    priority = fields.Integer(required=True)
    tags = fields.List(fields.String(), required=True)
    params = fields.Dict(keys=fields.String(), required=True)
    enabled = fields.Boolean(required=True)
    updated_at = fields.String(required=True, metadata={"description": "ISO 8601."})


class StoredModels(marshmallow.Schema):
    models = fields.List(fields.Nested(StoredModel), required=True)
    total = fields.Integer(required=True)


class StoredRoute(marshmallow.Schema):
    purpose = fields.String(required=True)
    fallback_chain = fields.List(fields.String(), required=True)
    required = fields.Boolean(required=True)


class NameChanged(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.OneOf(["saved", "deleted"]))
    name = fields.String(required=True)


class IdChanged(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.OneOf(["saved", "deleted"]))
    id = fields.String(required=True)


class PurposeChanged(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.OneOf(["saved", "deleted"]))
    purpose = fields.String(required=True)


class ProbeAnswer(marshmallow.Schema):
    """The provider's failure is in the answer, not an error status."""
    provider = fields.String(required=True)
    provider_known = fields.Boolean(required=True)
    url = fields.String(required=True)
    key_sent = fields.Boolean(required=True,
                              metadata={"description": "Whether the stored key went along (own origin only)."})
    status = fields.Integer(required=True, allow_none=True, metadata={"description": "The provider's HTTP status."})
    error = fields.String(required=True, allow_none=True)
    error_kind = fields.String(required=True, allow_none=True,
                               metadata={"description": "`refused` when the egress policy refused the URL."})
    body = fields.Raw(required=True, allow_none=True,
                      metadata={"description": "The provider's JSON, or the start of its text."})
    latency_ms = fields.Float(required=True)
