"""What the knowledge endpoints take and answer (spec: "Knowledge base", "Knowledge document";
KnowledgeChunk and SearchChunkResult are this plugin's, described in docs/knowledge.md)."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

SOURCE_TYPES = ("text", "file", "url")
INDEX_STATES = ("pending", "indexing", "ready", "failed")
SEARCH_MODES = ("hybrid", "dense", "lexical")
MAX_SEARCH_LIMIT = 50
# More ids than any user may keep bases (`max_bases_per_user` is 100 by default) is a mistake.
MAX_SEARCH_BASES = 1000
MAX_SESSION_ID = 128


def not_blank(value: str) -> None:
    if not value.strip():
        raise marshmallow.ValidationError("Must not be blank.")


class OwnerQuery(marshmallow.Schema):
    user_id = fields.String(load_default=None, metadata={
        "description": "The administrator acts on this user's knowledge."})


class BaseListQuery(OwnerQuery):
    session_id = fields.String(load_default=None, validate=validate.Length(min=1, max=MAX_SESSION_ID), metadata={
        "description": "Only the base of this chat session (at most one)."})


class DocumentListQuery(OwnerQuery):
    include_content = fields.Boolean(load_default=False, metadata={
        "description": "Add each document's `raw_content` (left out of listings by default: it may be megabytes)."})


class OwnerBody(marshmallow.Schema):
    """`user_id` may come in the body of a POST or PUT too (the AI core's peer client puts it there)."""
    user_id = fields.String(load_default=None, allow_none=True, metadata={
        "description": "The administrator acts on this user's knowledge (as the `user_id` query parameter)."})


class BaseBody(OwnerBody):
    name = fields.String(required=True, validate=[validate.Length(min=1, max=200), not_blank])
    description = fields.String(load_default="", allow_none=True, validate=validate.Length(max=2000))
    session_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(min=1, max=MAX_SESSION_ID),
                               metadata={"description": (
        "POST: the chat session this base belongs to (documents attached in that conversation). One base per "
        "person and session: when it exists already, it is answered (200) instead of a new one. Searched only "
        "in that session's turns. Ignored by PUT.")})


class DocumentBody(OwnerBody):
    title = fields.String(required=True, validate=[validate.Length(min=1, max=500), not_blank])
    source_type = fields.String(load_default="text", validate=validate.OneOf(SOURCE_TYPES))
    content = fields.String(load_default=None, allow_none=True, metadata={
        "description": "`text`: the document's text (required). `url`: the address, when `url` is not given."})
    file_id = fields.String(load_default=None, allow_none=True, metadata={
        "description": "`file`: an uploaded file of the caller (POST /api/v1/files/upload); required."})
    url = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=4000), metadata={
        "description": "`url`: the http(s) address of the page or file to read."})


class SearchBody(OwnerBody):
    query = fields.String(required=True, validate=[validate.Length(min=1, max=2000), not_blank])
    kb_ids = fields.List(fields.String(validate=validate.Length(max=64)), load_default=list, allow_none=True,
                         validate=validate.Length(max=MAX_SEARCH_BASES), metadata={
        "description": "Bases to search (ids of the caller's bases); empty or left out: all of them."})
    limit = fields.Integer(load_default=5, validate=validate.Range(min=1, max=MAX_SEARCH_LIMIT))
    mode = fields.String(load_default="hybrid", validate=validate.OneOf(SEARCH_MODES), metadata={
        "description": "`hybrid` (default): lexical and semantic results fused; `dense` or `lexical` alone."})
    session_id = fields.String(load_default=None, allow_none=True, validate=validate.Length(max=MAX_SESSION_ID),
                               metadata={"description": (
        "Search as in this chat session: the general bases (no `session_id`) and this session's own, never another "
        "session's; empty: the general bases only. Left out: every base.")})


class KnowledgeBase(marshmallow.Schema):
    id = fields.String(required=True, metadata={"format": "uuid"})
    user_id = fields.String(required=True)
    name = fields.String(required=True)
    description = fields.String(required=True)
    session_id = fields.String(required=True, allow_none=True, metadata={
        "description": "The chat session whose own base this is (its attached documents); null for a general base."})
    created_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})
    updated_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})
    doc_count = fields.Integer(required=True)


class KnowledgeDocument(marshmallow.Schema):
    id = fields.String(required=True, metadata={"format": "uuid"})
    kb_id = fields.String(required=True, metadata={"format": "uuid"})
    user_id = fields.String(required=True)
    title = fields.String(required=True)
    source_type = fields.String(required=True, validate=validate.OneOf(SOURCE_TYPES))
    source_ref = fields.String(required=True, metadata={
        "description": "`file`: the file's id; `url`: the address read (after redirects); `text`: empty."})
    content_type = fields.String(required=True, metadata={"description": "The source's MIME type."})
    raw_content = fields.String(metadata={
        "description": "The document's text, which chunk offsets point into. Listings leave it out unless "
                       "`include_content=true`."})
    content_length = fields.Integer(required=True, metadata={"description": "Characters of `raw_content`."})
    chunk_count = fields.Integer(required=True)
    index_status = fields.String(required=True, validate=validate.OneOf(INDEX_STATES), metadata={
        "description": "`ready`: searchable. `pending`/`indexing`: being indexed in the background. "
                       "`failed`: see `index_error`."})
    index_error = fields.String(required=True, allow_none=True)
    created_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})
    updated_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})


class KnowledgeChunk(marshmallow.Schema):
    id = fields.String(required=True, metadata={"format": "uuid"})
    document_id = fields.String(required=True, metadata={"format": "uuid"})
    document_title = fields.String(required=True)
    kb_id = fields.String(required=True, metadata={"format": "uuid"})
    position = fields.Integer(required=True, metadata={"description": "0-based order within the document."})
    text = fields.String(required=True, metadata={"description": "Exactly raw_content[start_offset:end_offset]."})
    heading_path = fields.List(fields.String(), required=True, metadata={
        "description": "The headings above the chunk, outermost first."})
    start_offset = fields.Integer(required=True, metadata={"description": "In characters (code points)."})
    end_offset = fields.Integer(required=True)


class SearchChunkResult(KnowledgeChunk):
    kb_name = fields.String(required=True, metadata={"description": "The name of the chunk's knowledge base."})
    score = fields.Float(required=True, metadata={"description": "Higher is better; comparable within one answer."})
    source_type = fields.String(required=True, validate=validate.OneOf(SOURCE_TYPES))
    source_ref = fields.String(required=True)


class BaseList(marshmallow.Schema):
    knowledge_bases = fields.List(fields.Nested(KnowledgeBase), required=True)
    total = fields.Integer(required=True)


class BaseDetail(marshmallow.Schema):
    knowledge_base = fields.Nested(KnowledgeBase, required=True)
    documents = fields.List(fields.Nested(KnowledgeDocument), required=True, metadata={
        "description": "Without `raw_content`."})


class DocumentList(marshmallow.Schema):
    documents = fields.List(fields.Nested(KnowledgeDocument), required=True)
    total = fields.Integer(required=True)


class DocumentDetail(marshmallow.Schema):
    document = fields.Nested(KnowledgeDocument, required=True)
    chunks = fields.List(fields.Nested(KnowledgeChunk), required=True)


class SearchAnswer(marshmallow.Schema):
    chunks = fields.List(fields.Nested(SearchChunkResult), required=True, metadata={"description": "Best first."})
    total = fields.Integer(required=True)
    query = fields.String(required=True)


class Updated(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.Equal("updated"))


class Deleted(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.Equal("deleted"))
