"""The memory service's requests and answers, which the gateway's memory endpoints pass on
unchanged (docs/memory.md)."""
from __future__ import annotations

from typing import Any, Mapping

import marshmallow
from marshmallow import fields, validate

from gateway.errors import BadRequest
from gateway.vector_store import SEARCH_MODES

# The categories a memory may have (docs/memory.md, "Categories").
CATEGORIES = ("identity", "preference", "health", "relationship", "work", "schedule", "other")
DEFAULT_CATEGORY = "other"
# Where a memory came from: said explicitly ("remember that ..."), extracted by the assistant from
# a conversation (with its session and message), or added through the API.
SOURCES = ("explicit", "extracted", "api")
PRIORITY_MIN, PRIORITY_MAX, DEFAULT_PRIORITY = 0, 10, 5
ACTIONS = ("created", "merged", "superseded")
MAX_LIST_LIMIT = 200
MAX_SEARCH_LIMIT = 50
MAX_QUERY_CHARS = 1000
LIST_ORDERS = ("updated", "priority")
# A create's client key (docs/memory.md, "Retrying a create"): a retry with the same key answers
# the earlier write instead of storing the memory twice; the answer then says it was replayed.
IDEMPOTENCY_KEY = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
MAX_IDEMPOTENCY_KEY_CHARS = 128
IDEMPOTENCY_HEADERS = {IDEMPOTENCY_KEY: f"Optional; up to {MAX_IDEMPOTENCY_KEY_CHARS} printable ASCII characters, "
                                        "new for each memory: a retry with the same key answers the first "
                                        "write's memory instead of storing it again."}
REPLAYED_HEADERS = {REPLAYED: "`true` when the answer is that of an earlier write with the same Idempotency-Key."}

USER_ID = fields.String(load_default=None, validate=validate.Length(min=1, max=128), metadata={
    "description": "Whose memories. A person's own token acts for them; the service credential and the "
                   "administrator name the person (see docs/memory.md)."})


class Category(fields.String):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(validate=validate.OneOf(CATEGORIES), metadata={
            "description": f"One of {', '.join(CATEGORIES)}."}, **kwargs)


class Priority(fields.Integer):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(strict=True, validate=validate.Range(min=PRIORITY_MIN, max=PRIORITY_MAX), metadata={
            "description": f"{PRIORITY_MIN} (trivia) to {PRIORITY_MAX} (must never be forgotten); "
                           f"default {DEFAULT_PRIORITY}."}, **kwargs)


# ---------------------------------------------------------------- requests

def idempotency_key(headers: Mapping[str, str]) -> str | None:
    """A create's Idempotency-Key header, checked; None without one."""
    key = headers.get(IDEMPOTENCY_KEY)
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY_CHARS or not all("\x21" <= char <= "\x7e" for char in key):
        raise BadRequest(f"{IDEMPOTENCY_KEY} must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} printable ASCII characters "
                         "without spaces.", error_type="validation_error",
                         hint="Send a fresh UUID for each new memory, and the same one when retrying it.")
    return key


class MemoryCreate(marshmallow.Schema):
    """The memory service's create body; the gateway's takes content, category and priority."""
    user_id = USER_ID
    content = fields.String(required=True, validate=validate.Length(min=1))
    category = Category(load_default=DEFAULT_CATEGORY)
    priority = Priority(load_default=DEFAULT_PRIORITY)
    source = fields.String(load_default="api", validate=validate.OneOf(SOURCES), metadata={
        "description": "`explicit`, `extracted` or `api` (default)."})
    source_session_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=128))
    source_message_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=128))


class MemoryUpdate(marshmallow.Schema):
    user_id = USER_ID
    content = fields.String(validate=validate.Length(min=1))
    category = Category()
    priority = Priority()


class MemoryListQuery(marshmallow.Schema):
    user_id = USER_ID
    category = Category(load_default=None)
    limit = fields.Integer(load_default=50, validate=validate.Range(min=1, max=MAX_LIST_LIMIT))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=10**12))
    order = fields.String(load_default="updated", validate=validate.OneOf(LIST_ORDERS), metadata={
        "description": "`updated` (latest updated first, default) or `priority` (highest priority first, "
                       "then latest updated: what recall adds to every turn)."})


class MemorySearchQuery(marshmallow.Schema):
    user_id = USER_ID
    q = fields.String(required=True, validate=validate.Length(min=1, max=MAX_QUERY_CHARS), metadata={
        "description": "What to look for, in any language; matched by meaning and by words."})
    category = Category(load_default=None)
    limit = fields.Integer(load_default=10, validate=validate.Range(min=1, max=MAX_SEARCH_LIMIT))
    mode = fields.String(load_default="hybrid", validate=validate.OneOf(SEARCH_MODES), metadata={
        "description": "`hybrid` (meaning and words, default), `dense` (meaning only: best across "
                       "languages) or `lexical` (words only)."})
    min_relevance = fields.Float(load_default=None, validate=validate.Range(min=-1.0, max=1.0), metadata={
        "description": "The relevance floor of this search (`dense`, `hybrid`); default `[plugins.memory] "
                       "min_relevance`. -1: the nearest memories whatever their relevance (docs/memory.md)."})


class MemoryOwnerQuery(marshmallow.Schema):
    user_id = USER_ID


# ---------------------------------------------------------------- answers

class Memory(marshmallow.Schema):
    id = fields.String(required=True, metadata={"description": "UUID."})
    user_id = fields.String(required=True)
    content = fields.String(required=True)
    category = fields.String(required=True, metadata={"description": f"One of {', '.join(CATEGORIES)}."})
    priority = fields.Integer(required=True)
    source = fields.String(required=True, metadata={"description": "`explicit`, `extracted` or `api`."})
    source_session_id = fields.String(required=True, allow_none=True)
    source_message_id = fields.String(required=True, allow_none=True)
    previous_content = fields.String(required=True, allow_none=True, metadata={
        "description": "What this memory said before a contradicting fact replaced it (the latest)."})
    created_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})
    updated_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})


class MemoryWritten(marshmallow.Schema):
    action = fields.String(required=True, validate=validate.OneOf(ACTIONS), metadata={
        "description": "`created` (201), `merged` into a near-duplicate, or `superseded`: the memory it "
                       "contradicted now says this (200)."})
    memory = fields.Nested(Memory, required=True)
    replaced = fields.String(required=True, allow_none=True, metadata={
        "description": "The content the existing memory had before this write (merged or superseded)."})


class MemoryPage(marshmallow.Schema):
    memories = fields.List(fields.Nested(Memory), required=True, metadata={"description": "Latest updated first."})
    total = fields.Integer(required=True, metadata={"description": "Memories matching the filter."})
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)


class MemoryHit(Memory):
    score = fields.Float(required=True, metadata={
        "description": "Hybrid (meaning and words) rank score; compare only within one answer."})
    relevance = fields.Float(metadata={
        "description": "The embedding similarity above the query's baseline (docs/memory.md, \"Relevance\"); "
                       "every hit has at least `[plugins.memory] min_relevance`. Absent in `lexical` mode."})


class MemorySearchResults(marshmallow.Schema):
    memories = fields.List(fields.Nested(MemoryHit), required=True, metadata={"description": "Best first."})
    query = fields.String(required=True)


class MemoryDeleted(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.Equal("deleted"))
    id = fields.String(required=True)
