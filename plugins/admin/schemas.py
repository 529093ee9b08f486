"""What the administrator's endpoints answer, for the OpenAPI document (spec: "Administration",
"Known client", "Model provider", "Model", "Routing rule")."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate


class Device(marshmallow.Schema):
    connection_id = fields.String(required=True)
    client_id = fields.String(required=True)
    device_name = fields.String(required=True)
    user_agent = fields.String(required=True)
    connected_at = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})


class SessionState(marshmallow.Schema):
    """A live session: devices connected to it, a turn running or queued."""
    session_id = fields.String(required=True)
    user_id = fields.String(required=True)
    title = fields.String(required=True)
    devices = fields.List(fields.Nested(Device), required=True)
    device_count = fields.Integer(required=True)
    turn_running = fields.Boolean(required=True)
    queue_length = fields.Integer(required=True)
    last_activity = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})


class LiveSessions(marshmallow.Schema):
    sessions = fields.List(fields.Nested(SessionState), required=True,
                           metadata={"description": "Latest activity first."})
    total = fields.Integer(required=True)


class LiveSessionsByUser(marshmallow.Schema):
    users = fields.Dict(keys=fields.String(), values=fields.List(fields.Nested(SessionState)), required=True,
                        metadata={"description": "user_id: that user's live sessions."})
    total_users = fields.Integer(required=True)
    total_sessions = fields.Integer(required=True)


class StoredTotals(marshmallow.Schema):
    users = fields.Integer(required=True, metadata={"description": "Users with at least one stored session."})
    sessions = fields.Integer(required=True, metadata={"description": "Stored sessions of every user."})
    messages = fields.Integer(required=True, metadata={"description": "Stored messages of every user."})


class StoredMessagePage(marshmallow.Schema):
    session_id = fields.String(required=True)
    user_id = fields.String(required=True, metadata={"description": "The session's owner."})
    messages = fields.List(fields.Dict(), required=True, metadata={
        "description": "Oldest first, each as `GET /api/v1/sessions/:id/messages` gives it (docs/sessions.md)."})
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)


class KnownClient(marshmallow.Schema):
    client_id = fields.String(required=True)
    user_id = fields.String(required=True)
    device_name = fields.String(required=True)
    user_agent = fields.String(required=True)
    note = fields.String(required=True)
    last_seen = fields.Integer(required=True, metadata={"description": "Epoch milliseconds."})
    online = fields.Boolean(required=True)


class KnownClients(marshmallow.Schema):
    clients = fields.List(fields.Nested(KnownClient), required=True, metadata={"description": "Last seen first."})
    total = fields.Integer(required=True)


class NoteSaved(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.Equal("ok"))
    client_id = fields.String(required=True)
    note = fields.String(required=True)


class Provider(marshmallow.Schema):
    name = fields.String(required=True)
    base_url = fields.String(required=True)
    api_key = fields.String(required=True, metadata={"description": "Masked: `****` and the last 4 characters."})
    has_api_key = fields.Boolean(required=True)


class Providers(marshmallow.Schema):
    providers = fields.List(fields.Nested(Provider), required=True)
    total = fields.Integer(required=True)


class ProviderChanged(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.OneOf(["saved", "deleted"]))
    name = fields.String(required=True)


class Model(marshmallow.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True, metadata={"description": "The provider's name for the model."})
    provider = fields.String(required=True)
    description = fields.String(required=True)
    priority = fields.Integer(required=True)
    tags = fields.List(fields.String(), required=True)
    params = fields.Dict(keys=fields.String(), required=True, metadata={"description": "e.g. temperature."})
    enabled = fields.Boolean(required=True)
    updated_at = fields.String(required=True, metadata={"description": "ISO 8601."})


class Models(marshmallow.Schema):
    models = fields.List(fields.Nested(Model), required=True)
    total = fields.Integer(required=True)


class ModelChanged(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.OneOf(["saved", "deleted"]))
    id = fields.String(required=True)


class RoutingRule(marshmallow.Schema):
    purpose = fields.String(required=True)
    fallback_chain = fields.List(fields.String(), required=True, metadata={"description": "Model ids, tried in order."})
    required = fields.Boolean(required=True)


class RouteChanged(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.OneOf(["saved", "deleted"]))
    purpose = fields.String(required=True)


class HealthCheck(marshmallow.Schema):
    provider = fields.String(required=True)
    message = fields.String(required=True, metadata={"description": "What happened, for a person."})
    reachable = fields.Boolean(required=True)
    ok = fields.Boolean(required=True)
    status = fields.Integer(required=True, allow_none=True, metadata={"description": "The provider's HTTP status."})
    latency_ms = fields.Float(required=True)
    method = fields.String(required=True, validate=validate.OneOf(["models", "completion"]))
    models_count = fields.Integer(required=True, allow_none=True)
    error = fields.String(required=True, allow_none=True)
    error_kind = fields.String(required=True, allow_none=True)
    url = fields.String(required=True)


class ProviderModel(marshmallow.Schema):
    id = fields.String(required=True)
    owned_by = fields.Raw(required=True, allow_none=True, metadata={"description": "As the provider said it."})
    created = fields.Integer(required=True, allow_none=True)


class ProviderModels(marshmallow.Schema):
    provider = fields.String(required=True)
    url = fields.String(required=True)
    models = fields.List(fields.Nested(ProviderModel), required=True)
    total = fields.Integer(required=True)
