"""`GET /api/dashboard` (six keys: services, performance, sessions, memory, database, system) and the
performance routes. The page polls the dashboard every 5 seconds, so it is cheap: services,
performance and system come from memory (the supervisor's state, the sampler's last round);
sessions, memory and database ask their sources concurrently, each bounded by a short timeout,
and the answer is shared for `SOURCE_TTL` seconds by every caller. A source that is down says so
inside its own key (`{"available": false, "error", "errorType"}`); the dashboard still answers 200."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

import marshmallow
from aiohttp import web
from marshmallow import fields

from gateway.errors import ApiError, NotFound
from gateway.openapi import api_doc
from gateway.validation import parse_query

from .backups import BACKUPS, BackupsState
from .database import DATABASE, EmbeddedPostgres, PortCheck, unavailable
from .peers import GATEWAY
from .performance import PerformanceMonitor
from .schemas import (Histories, HistoryQuery, PerformanceDashboard, PerformanceSnapshot, PerformanceSummary,
                      ServiceHistory, ServiceStatus, SttLogEntries, SummaryQuery, SystemSample)
from .supervisor import Supervisor
from .typedefs import PEERS, PERFORMANCE, STT_LOG, SUPERVISOR

SOURCE_TTL = 2.0  # seconds one asking of the sources serves every dashboard caller
SOURCE_TIMEOUT = 2.0
TREND_WINDOW = 300.0

routes = web.RouteTableDef()


class Shared:
    """One computation of a value, shared by every caller for `ttl` seconds (and while it runs)."""

    def __init__(self, ttl: float):
        self.ttl = ttl
        self._value: Any = None
        self._at = float("-inf")
        self._running: asyncio.Future | None = None

    async def get(self, compute: Callable[[], Awaitable[Any]]) -> Any:
        if time.monotonic() - self._at < self.ttl:
            return self._value
        if self._running is None:
            self._running = asyncio.ensure_future(compute())
            self._running.add_done_callback(self._finished)
        return await asyncio.shield(self._running)

    def _finished(self, future: asyncio.Future) -> None:
        self._running = None
        if not future.cancelled() and future.exception() is None:
            self._value, self._at = future.result(), time.monotonic()


SOURCES = web.AppKey("console_dashboard_sources", Shared)


# ---------------------------------------------------------------- the parts

def services_part(supervisor: Supervisor) -> dict[str, Any]:
    rows = supervisor.statuses()
    return {"total": len(rows), "running": sum(1 for row in rows if row["running"]), "services": rows}


def snapshot(supervisor: Supervisor, monitor: PerformanceMonitor) -> dict[str, Any]:
    return {"interval": monitor.settings.interval, "historySize": monitor.settings.history,
            "sampledAt": monitor.sampled_at, "totals": monitor.totals(),
            "services": [{"id": row["id"], "name": row["name"], "status": row["status"],
                          "sample": monitor.current(row["id"])} for row in supervisor.statuses()]}


async def sessions_part(request: web.Request) -> dict[str, Any]:
    peers = request.app[PEERS]
    # Declared: mypy cannot tell the two answers' types through gather(return_exceptions=True).
    active: dict[str, Any] | BaseException
    totals: dict[str, Any] | BaseException
    try:
        active, totals = await asyncio.gather(
            peers.get_json(GATEWAY, "/api/v1/admin/sessions/active", admin=True, timeout=SOURCE_TIMEOUT),
            peers.get_json(GATEWAY, "/api/v1/admin/stats", admin=True, timeout=SOURCE_TIMEOUT),
            return_exceptions=True)
        if isinstance(active, BaseException):
            raise active
    except ApiError as error:
        return unavailable(error)
    counts = totals if isinstance(totals, dict) else {}
    return {"available": True, "activeSessions": int(active.get("total_sessions", 0)),
            "activeUsers": int(active.get("total_users", 0)),
            "sessionTotal": counts.get("sessions"), "messageTotal": counts.get("messages")}


async def memory_part(request: web.Request) -> dict[str, Any]:
    counted = await request.app[DATABASE].memory_rows()
    if not counted["available"]:
        return counted
    return {"available": True, "total": counted["rows"]}


async def database_part(request: web.Request) -> dict[str, Any]:
    panel = request.app[DATABASE]
    ports, embedded = await asyncio.gather(panel.ports(), panel.embedded())
    return {"available": True, **await panel.online(ports, embedded), "embedded": embedded, "ports": ports,
            "backups": request.app[BACKUPS].summary()}


async def system_part(monitor: PerformanceMonitor) -> dict[str, Any]:
    if monitor.system is None:  # before the first round
        await monitor.sample_now()
    assert monitor.system is not None
    return monitor.system


async def sourced_parts(request: web.Request) -> dict[str, Any]:
    sessions, memory, database = await asyncio.gather(sessions_part(request), memory_part(request),
                                                      database_part(request))
    return {"sessions": sessions, "memory": memory, "database": database}


# ---------------------------------------------------------------- schemas

class ServicesPart(marshmallow.Schema):
    total = fields.Integer(required=True)
    running = fields.Integer(required=True)
    services = fields.List(fields.Nested(ServiceStatus), required=True, metadata={"description": "In start order."})


class SessionsPart(marshmallow.Schema):
    available = fields.Boolean(required=True, metadata={"description": "False: the gateway did not answer."})
    activeSessions = fields.Integer(metadata={"description": "Live sessions (connected devices or running turns)."})
    activeUsers = fields.Integer()
    sessionTotal = fields.Integer(allow_none=True, metadata={"description": "Stored sessions; null: not reported."})
    messageTotal = fields.Integer(allow_none=True, metadata={"description": "Stored messages; null: not reported."})
    error = fields.String()
    errorType = fields.String()


class MemoryPart(marshmallow.Schema):
    available = fields.Boolean(required=True, metadata={"description": "False: the memory service did not answer."})
    total = fields.Integer(metadata={"description": "Memories of every user."})
    error = fields.String()
    errorType = fields.String()


class DatabasePart(marshmallow.Schema):
    available = fields.Boolean(required=True, metadata={"description": "Always true: the console checks itself."})
    online = fields.Boolean(required=True)
    source = fields.String(required=True, metadata={"description": "`DATABASE_URL` or `embedded`."})
    host = fields.String(required=True)
    port = fields.Integer(required=True, allow_none=True)
    embedded = fields.Nested(EmbeddedPostgres, required=True)
    ports = fields.List(fields.Nested(PortCheck), required=True)
    backups = fields.Nested(BackupsState, required=True, metadata={
        "description": "Scheduled backups ([backup] every, keep), the running one and the last one's result."})


class Dashboard(marshmallow.Schema):
    services = fields.Nested(ServicesPart, required=True)
    performance = fields.Nested(PerformanceSnapshot, required=True)
    sessions = fields.Nested(SessionsPart, required=True)
    memory = fields.Nested(MemoryPart, required=True)
    database = fields.Nested(DatabasePart, required=True)
    system = fields.Nested(SystemSample, required=True)


# ---------------------------------------------------------------- routes

@routes.get("/api/dashboard", name="dashboard")
@api_doc("Everything the dashboard shows, in one cheap answer (poll it every 5 s)", responses={200: Dashboard},
         auth="console")
async def dashboard(request: web.Request) -> web.Response:
    supervisor, monitor = request.app[SUPERVISOR], request.app[PERFORMANCE]
    sourced, system = await asyncio.gather(request.app[SOURCES].get(lambda: sourced_parts(request)),
                                           system_part(monitor))
    return web.json_response({"services": services_part(supervisor), "performance": snapshot(supervisor, monitor),
                              **sourced, "system": system})


@routes.get("/api/performance", name="performance")
@api_doc("Each service's last sample (CPU, memory, threads, open files, connections)",
         responses={200: PerformanceSnapshot}, auth="console")
async def performance(request: web.Request) -> web.Response:
    return web.json_response(snapshot(request.app[SUPERVISOR], request.app[PERFORMANCE]))


@routes.get("/api/performance/dashboard", name="performance_dashboard")
@api_doc("The performance panel's data: each service's last sample and its CPU and memory over 5 minutes, "
         "the totals and the machine", responses={200: PerformanceDashboard}, auth="console")
async def performance_dashboard(request: web.Request) -> web.Response:
    supervisor, monitor = request.app[SUPERVISOR], request.app[PERFORMANCE]
    body = snapshot(supervisor, monitor)
    del body["historySize"]
    for row in body["services"]:
        summary = monitor.summary(row["id"], TREND_WINDOW)
        row["cpuPercent"], row["rssBytes"] = summary["cpuPercent"], summary["rssBytes"]
    return web.json_response({**body, "window": TREND_WINDOW, "system": monitor.system})


@routes.get("/api/performance/history", name="performance_history")
@api_doc("Every service's sample history, oldest first", query=HistoryQuery, responses={200: Histories},
         auth="console")
async def performance_history(request: web.Request) -> web.Response:
    window = parse_query(request, HistoryQuery())["window"]
    monitor = request.app[PERFORMANCE]
    return web.json_response({
        "interval": monitor.settings.interval, "historySize": monitor.settings.history,
        "services": [{"id": spec.id, "name": spec.name, "samples": monitor.history(spec.id, window)}
                     for spec in request.app[SUPERVISOR].specs]})


def _known(request: web.Request) -> tuple[str, str]:
    service_id = request.match_info["id"]
    supervisor = request.app[SUPERVISOR]
    spec = next((spec for spec in supervisor.specs if spec.id == service_id), None)
    if spec is None:
        raise NotFound(f"Unknown service {service_id!r}.", error_type="unknown_service",
                       hint="The service table lists: " + ", ".join(s.id for s in supervisor.specs) + ".")
    return spec.id, spec.name


@routes.get("/api/performance/{id}", name="performance_service")
@api_doc("One service's sample history, oldest first", query=HistoryQuery, responses={200: ServiceHistory},
         errors=(404,), auth="console")
async def performance_service(request: web.Request) -> web.Response:
    service_id, name = _known(request)
    window = parse_query(request, HistoryQuery())["window"]
    monitor = request.app[PERFORMANCE]
    return web.json_response({"id": service_id, "name": name, "interval": monitor.settings.interval,
                              "historySize": monitor.settings.history,
                              "samples": monitor.history(service_id, window)})


@routes.get("/api/performance/{id}/summary", name="performance_summary")
@api_doc("min, mean, max and p95 of each metric of one service over the last `window` seconds",
         query=SummaryQuery, responses={200: PerformanceSummary}, errors=(404,), auth="console")
async def performance_summary(request: web.Request) -> web.Response:
    service_id, name = _known(request)
    window = parse_query(request, SummaryQuery())["window"]
    return web.json_response({"id": service_id, "name": name, "window": float(window),
                              **request.app[PERFORMANCE].summary(service_id, window)})


@routes.get("/api/voice/logs", name="voice_logs")
@api_doc("The speech-recognition log: the last 200 results the console saw, oldest first",
         responses={200: SttLogEntries}, auth="console")
async def voice_logs(request: web.Request) -> web.Response:
    stt_log = request.app[STT_LOG]
    return web.json_response({"entries": stt_log.entries(), "size": stt_log.size})
