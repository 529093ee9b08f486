"""What the console's REST API answers, for its OpenAPI document (spec/console.md, "REST API")."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

from .supervisor import BUILDING, FAILED, RUNNING, STARTING, STOPPED, STOPPING

STATES = (STOPPED, STARTING, RUNNING, STOPPING, BUILDING, FAILED)


class ConsoleHealth(marshmallow.Schema):
    status = fields.String(required=True, validate=validate.Equal("ok"))
    service = fields.String(required=True, validate=validate.Equal("console"))
    uptime = fields.Float(required=True, metadata={"description": "Seconds."})
    wsClients = fields.Integer(required=True, metadata={"description": "Connected WebSocket clients."})


class ServiceStatus(marshmallow.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    port = fields.Integer(required=True)
    status = fields.String(required=True, validate=validate.OneOf(STATES))
    running = fields.Boolean(required=True)
    pid = fields.Integer(required=True, allow_none=True)
    uptime = fields.Float(required=True, metadata={"description": "Seconds; 0 when not running."})
    startedAt = fields.String(required=True, allow_none=True, metadata={"description": "ISO 8601."})
    exitCode = fields.Integer(required=True, allow_none=True)
    lastError = fields.String(required=True, allow_none=True)
    restarts = fields.Integer(required=True)
    depends = fields.List(fields.String(), required=True)
    healthUrl = fields.String(required=True)


class ServiceStatuses(marshmallow.Schema):
    services = fields.List(fields.Nested(ServiceStatus), required=True, metadata={"description": "In start order."})


class LogPage(marshmallow.Schema):
    service = fields.String(required=True)
    lines = fields.List(fields.String(), required=True, metadata={"description": "Oldest first."})
    offset = fields.Integer(required=True)
    hasMore = fields.Boolean(required=True)


class LogCleared(marshmallow.Schema):
    service = fields.String(required=True)
    cleared = fields.Boolean(required=True)


class PushQuery(marshmallow.Schema):
    token = fields.String(metadata={"description": "The console's credential, when one is required "
                                                   "(browsers cannot set headers on a WebSocket)."})
