"""What the Sessions and Message-search endpoints answer, for the OpenAPI document (spec:
"Session", "Stored message", "Search result")."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

from .exports import FORMATS

ROLES = ("user", "assistant", "system", "action")


class Session(marshmallow.Schema):
    id = fields.String(required=True)
    user_id = fields.String(required=True)
    title = fields.String(required=True)
    is_main = fields.Boolean(required=True)
    created_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})
    updated_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})


class SessionUpdatedFrame(marshmallow.Schema):
    """The `session_updated` frame sent to every device of the session's owner."""
    session_id = fields.String(required=True)
    title = fields.String(required=True, metadata={"description": "The session's new title."})


class SessionList(marshmallow.Schema):
    sessions = fields.List(fields.Nested(Session), required=True, metadata={"description": "Latest first."})


class SessionDeleted(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.Equal("deleted"))
    session_id = fields.String(required=True)


class SessionsDeleted(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.Equal("deleted"))
    user_id = fields.String(required=True)
    count = fields.Integer(required=True, metadata={"description": "Sessions deleted."})


class StoredMessage(marshmallow.Schema):
    id = fields.Integer(required=True)
    session_id = fields.String(required=True)
    user_id = fields.String(required=True)
    role = fields.String(required=True, metadata={"description": "`user`, `assistant`, `system` or `action`."})
    msg_type = fields.String(required=True, metadata={"description": "`chat`, `action`, `markdown` or `code`."})
    content = fields.String(required=True)
    metadata = fields.Dict(keys=fields.String(), required=True)
    client_msg_id = fields.String(required=True, allow_none=True)
    created_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})


class MessagePage(marshmallow.Schema):
    messages = fields.List(fields.Nested(StoredMessage), required=True, metadata={"description": "Oldest first."})
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)
    before_id = fields.Integer(required=True, allow_none=True, metadata={"description": "As asked (not in the spec)."})
    has_more = fields.Boolean(required=True, metadata={
        "description": "Not in the spec: whether messages lie beyond this page: newer ones when paging by "
                       "offset, older ones with `latest` or `before_id`."})


class MessagesCleared(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.Equal("cleared"))
    session_id = fields.String(required=True)
    count = fields.Integer(required=True, metadata={"description": "Messages deleted."})


class ExportedSession(marshmallow.Schema):
    id = fields.String(required=True)
    title = fields.String(required=True)
    created_at = fields.Integer(required=True)
    updated_at = fields.Integer(required=True)


class ExportedMessage(marshmallow.Schema):
    role = fields.String(required=True)
    content = fields.String(required=True)
    created_at = fields.Integer(required=True)


class SessionExport(marshmallow.Schema):
    session = fields.Nested(ExportedSession, required=True)
    messages = fields.List(fields.Nested(ExportedMessage), required=True)


# The export's answer in each format (the query's `format` picks one).
EXPORT_ANSWERS = {FORMATS["json"][0]: SessionExport, FORMATS["markdown"][0]: None, FORMATS["txt"][0]: None}


class SearchResult(marshmallow.Schema):
    message_id = fields.String(required=True)
    session_id = fields.String(required=True)
    session_title = fields.String(required=True)
    role = fields.String(required=True)
    content = fields.String(required=True)
    created_at = fields.Integer(required=True)


class SearchPage(marshmallow.Schema):
    results = fields.List(fields.Nested(SearchResult), required=True, metadata={"description": "Newest first."})
    total = fields.Integer(required=True)
    query = fields.String(required=True)
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)
