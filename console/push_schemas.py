"""The schemas of what the console pushes on `/ws` (console/push.py, console/supervisor.py),
for its AsyncAPI document (`GET /api/v1/asyncapi.json`, built by gateway.asyncapi);
tests/console/test_push_documents.py checks real pushes against them."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

from gateway.asyncapi import Channel, Frame

from .supervisor import BUILDING, FAILED, RUNNING, STARTING, STOPPED, STOPPING

PUSH_PATH = "/ws"


class BuildStep(marshmallow.Schema):
    step = fields.String(required=True, validate=validate.OneOf(("install", "compile", "assets", "command")))
    ok = fields.Boolean(required=True)
    skipped = fields.Boolean(required=True, metadata={"description": "Nothing needed doing (the install is "
                                                                    "up to date)."})
    detail = fields.String(required=True, metadata={"description": "What it did, or why it failed."})


class BuildRecord(marshmallow.Schema):
    """A service's last build (console/build.py), kept across restarts of the console."""
    ok = fields.Boolean(required=True)
    at = fields.String(required=True, metadata={"description": "ISO 8601, when it finished."})
    steps = fields.List(fields.Nested(BuildStep), required=True,
                        metadata={"description": "In order, up to the one that failed."})
    error = fields.String(required=True, allow_none=True)


class ServiceRecord(marshmallow.Schema):
    """A supervised service, as `GET /api/services/:id` answers it."""

    id = fields.String(required=True)
    name = fields.String(required=True)
    port = fields.Integer(required=True)
    status = fields.String(required=True, validate=validate.OneOf(
        (STOPPED, STARTING, RUNNING, STOPPING, BUILDING, FAILED)))
    running = fields.Boolean(required=True)
    pid = fields.Integer(required=True, allow_none=True)
    uptime = fields.Float(required=True, metadata={"description": "Seconds since the process started; 0 when none."})
    startedAt = fields.String(required=True, allow_none=True, metadata={"description": "ISO 8601."})
    exitCode = fields.Integer(required=True, allow_none=True,
                              metadata={"description": "The last exit; negative: killed by that signal."})
    lastError = fields.String(required=True, allow_none=True)
    restarts = fields.Integer(required=True)
    depends = fields.List(fields.String(), required=True)
    healthUrl = fields.String(required=True)
    rolling = fields.Boolean(required=True, metadata={
        "description": "Whether a rolling restart can replace its processes one at a time."})
    build = fields.Nested(BuildRecord, required=True, allow_none=True, metadata={
        "description": "The last build; null when never built. While it failed the service is not started."})


class LogPush(marshmallow.Schema):
    service = fields.String(required=True)
    line = fields.String(required=True, metadata={"description": "Without its newline."})
    source = fields.String(required=True, validate=validate.OneOf(("service", "console")),
                           metadata={"description": "`service`: its output; `console`: the console's note about it."})


class StatusPush(marshmallow.Schema):
    service = fields.String(required=True)
    status = fields.Nested(ServiceRecord, required=True)


class SttLogEntry(marshmallow.Schema):
    """Details of the transcription ride along (`SttLog.add(**details)`)."""

    class Meta:
        unknown = marshmallow.INCLUDE

    time = fields.Float(required=True, metadata={"description": "Unix seconds."})
    text = fields.String(required=True)
    processingMs = fields.Float(required=True)


class SttLogPush(marshmallow.Schema):
    entry = fields.Nested(SttLogEntry, required=True)


PUSHES = [
    Frame("log", LogPush(), "One line of a service's output, or the console's note about it."),
    Frame("status", StatusPush(), "A service changed state."),
    Frame("stt-log", SttLogPush(), "An entry of the speech-recognition log."),
]


def push_channel(credential_required: bool) -> Channel:
    """`/ws`: server push only (what a client sends is ignored)."""
    return Channel(PUSH_PATH, "The console's server push", sends=PUSHES,
                   security=("bearer", "tokenQuery", "basic") if credential_required else ())
