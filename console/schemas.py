"""What the console's REST API answers, for its OpenAPI document (spec/console.md, "REST API")."""
from __future__ import annotations

import marshmallow
from marshmallow import fields, validate

from .push_schemas import BuildRecord
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
    rolling = fields.Boolean(required=True, metadata={
        "description": "Whether POST /api/services/:id/rolling-restart can replace its processes one at a time "
                       "(the service table gives it `workers`)."})
    build = fields.Nested(BuildRecord, required=True, allow_none=True, metadata={
        "description": "The last build; null when never built. While it failed the service is not started."})


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


# ---------------------------------------------------------------- performance (console/performance.py)

class ProcessSample(marshmallow.Schema):
    time = fields.Float(required=True, metadata={"description": "Unix seconds."})
    pid = fields.Integer(required=True, metadata={"description": "The service's main process."})
    processes = fields.Integer(required=True, metadata={
        "description": "Processes counted: the main one and its descendants (workers), PostgreSQL excepted."})
    cpuPercent = fields.Float(required=True, metadata={
        "description": "Since the previous sample, summed over the processes (100 = one core busy)."})
    rssBytes = fields.Integer(required=True, metadata={"description": "Resident memory, summed."})
    threads = fields.Integer(required=True)
    openFiles = fields.Integer(required=True, metadata={"description": "Open regular files (not sockets)."})
    connections = fields.Integer(required=True, metadata={"description": "Open TCP/UDP sockets (inet)."})


class Totals(marshmallow.Schema):
    cpuPercent = fields.Float(required=True)
    rssBytes = fields.Integer(required=True)
    processes = fields.Integer(required=True)


class ServiceSample(marshmallow.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(STATES))
    sample = fields.Nested(ProcessSample, required=True, allow_none=True, metadata={
        "description": "The last round's sample; null when the service was not running then."})


class PerformanceSnapshot(marshmallow.Schema):
    interval = fields.Float(required=True, metadata={"description": "Seconds between samples."})
    historySize = fields.Integer(required=True, metadata={"description": "Samples kept per service."})
    sampledAt = fields.Float(required=True, allow_none=True, metadata={"description": "Unix seconds of the last round."})
    totals = fields.Nested(Totals, required=True)
    services = fields.List(fields.Nested(ServiceSample), required=True, metadata={"description": "In start order."})


class Stats(marshmallow.Schema):
    min = fields.Float(required=True)
    mean = fields.Float(required=True)
    max = fields.Float(required=True)
    p95 = fields.Float(required=True, metadata={"description": "Nearest rank: a value of the window."})


class SystemMemory(marshmallow.Schema):
    totalBytes = fields.Integer(required=True)
    usedBytes = fields.Integer(required=True, metadata={"description": "Total less available."})
    availableBytes = fields.Integer(required=True)
    percent = fields.Float(required=True)


class SystemDisk(marshmallow.Schema):
    path = fields.String(required=True, metadata={"description": "DATA_DIR."})
    totalBytes = fields.Integer(required=True)
    usedBytes = fields.Integer(required=True)
    freeBytes = fields.Integer(required=True)
    percent = fields.Float(required=True)


class SystemSample(marshmallow.Schema):
    time = fields.Float(required=True)
    cpuPercent = fields.Float(required=True, metadata={"description": "The whole machine, 0-100."})
    cpuCount = fields.Integer(required=True)
    loadAverage = fields.List(fields.Float(), required=True, metadata={"description": "1, 5 and 15 minutes."})
    memory = fields.Nested(SystemMemory, required=True)
    disk = fields.Nested(SystemDisk, required=True, allow_none=True, metadata={"description": "null: unreadable."})


class ServiceTrend(ServiceSample):
    cpuPercent = fields.Nested(Stats, required=True, allow_none=True, metadata={"description": "Over the window."})
    rssBytes = fields.Nested(Stats, required=True, allow_none=True, metadata={"description": "Over the window."})


class PerformanceDashboard(marshmallow.Schema):
    interval = fields.Float(required=True)
    window = fields.Float(required=True, metadata={"description": "Seconds the trends cover."})
    sampledAt = fields.Float(required=True, allow_none=True)
    totals = fields.Nested(Totals, required=True)
    system = fields.Nested(SystemSample, required=True, allow_none=True)
    services = fields.List(fields.Nested(ServiceTrend), required=True)


class ServiceHistory(marshmallow.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    interval = fields.Float(required=True)
    historySize = fields.Integer(required=True)
    samples = fields.List(fields.Nested(ProcessSample), required=True, metadata={"description": "Oldest first."})


class ServiceSamples(marshmallow.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    samples = fields.List(fields.Nested(ProcessSample), required=True, metadata={"description": "Oldest first."})


class Histories(marshmallow.Schema):
    interval = fields.Float(required=True)
    historySize = fields.Integer(required=True)
    services = fields.List(fields.Nested(ServiceSamples), required=True, metadata={"description": "In start order."})


class HistoryQuery(marshmallow.Schema):
    window = fields.Float(load_default=None, validate=validate.Range(min=1, max=7 * 24 * 3600), metadata={
        "description": "Only the samples of the last `window` seconds (default: the whole history)."})


class SummaryQuery(marshmallow.Schema):
    window = fields.Float(load_default=300, validate=validate.Range(min=1, max=7 * 24 * 3600), metadata={
        "description": "Seconds back from now (default 300)."})


class PerformanceSummary(marshmallow.Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    window = fields.Float(required=True)
    count = fields.Integer(required=True, metadata={"description": "Samples in the window."})
    # `from` is a Python keyword: declared with data_key below.
    start = fields.Float(required=True, allow_none=True, data_key="from",
                         metadata={"description": "Time of the first sample in the window."})
    to = fields.Float(required=True, allow_none=True, metadata={"description": "Time of the last one."})
    cpuPercent = fields.Nested(Stats, required=True, allow_none=True, metadata={"description": "null: no samples."})
    rssBytes = fields.Nested(Stats, required=True, allow_none=True)
    threads = fields.Nested(Stats, required=True, allow_none=True)
    openFiles = fields.Nested(Stats, required=True, allow_none=True)
    connections = fields.Nested(Stats, required=True, allow_none=True)


class SttLogEntries(marshmallow.Schema):
    entries = fields.List(fields.Dict(), required=True, metadata={
        "description": "Oldest first, at most 200: `{time, text, processingMs, ...details}` as pushed in `stt-log`."})
    size = fields.Integer(required=True, metadata={"description": "The ring buffer's capacity (200)."})
