"""The console application: the supervisor's REST API (services, logs, health) and the
server-push WebSocket. `create_console_app` is the one factory production and tests use; the
pages, dashboard, proxies and database panel add their route tables to the same app."""
from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import logging
import os
import time
from typing import AsyncIterator, Awaitable, Callable

import marshmallow
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from yarl import URL

from gateway import __version__
from gateway.asyncapi import add_document_route
from gateway.config import Config, ConfigError
from gateway.errors import ApiError, Forbidden, NotFound, Unauthorized, error_middleware
from gateway.jobs import JobGroup
from gateway.openapi import add_document_routes, api_doc
from gateway.peer_location import service_url
from gateway.services import ServiceSpec, load_services
from gateway.validation import parse_query

from . import dashboard, database
from .backups import setup_backups
from .database import DATABASE, DatabasePanel
from .logstore import LogStore
from .pages import setup_pages
from .peers import Peers
from .performance import SAMPLING_JOB, PerformanceMonitor, PerformanceSettings
from .proxy import add_proxy_routes
from .push import PushHub, SttLog
from .push_schemas import PUSH_PATH, push_channel
from .schemas import ConsoleHealth, LogCleared, LogPage, PushQuery, ServiceStatus, ServiceStatuses
from .supervisor import Supervisor, SupervisorError, SupervisorSettings, UnknownService
from .typedefs import CREDENTIAL, LOGS, PEERS, PERFORMANCE, PROXY_MAX_BODY, PUSH, STARTED, STT_LOG, SUPERVISOR

log = logging.getLogger("console.app")

CONSOLE_NAME = "console"
RECENT_LINES = 100

routes = web.RouteTableDef()


# ------------------------------------------------------------------ helpers

def _supervisor(request: web.Request) -> Supervisor:
    return request.app[SUPERVISOR]


def _known(request: web.Request) -> str:
    service_id = request.match_info["id"]
    try:
        _supervisor(request).service(service_id)
    except UnknownService:
        names = ", ".join(spec.id for spec in _supervisor(request).specs)
        raise NotFound(f"Unknown service {service_id!r}.", error_type="unknown_service",
                       hint=f"The service table lists: {names}.") from None
    return service_id


def _failure(error: SupervisorError, supervisor: Supervisor) -> ApiError:
    status = error.status or (409 if error.error_type == "port_in_use" else 502)
    return ApiError(str(error), error_type=error.error_type, status=status,
                    hint=f"Read its log: GET /api/logs/{error.service}",
                    extra={"service": error.service, "services": supervisor.statuses()})


async def _transition(request: web.Request,
                      action: Callable[[], Awaitable[dict | list[dict]]]) -> web.Response:
    supervisor = _supervisor(request)
    try:
        result = await action()
    except SupervisorError as error:
        raise _failure(error, supervisor) from None
    if isinstance(result, list):
        return web.json_response({"services": result})
    return web.json_response(result)


# ------------------------------------------------------------------ health and services

@routes.get("/api/health", name="console_health")
@api_doc("Whether the console answers (no credential needed)", responses={200: ConsoleHealth}, auth="none",
         errors=(403,))
async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "service": CONSOLE_NAME,
                              "uptime": round(time.monotonic() - request.app[STARTED], 1),
                              "wsClients": request.app[PUSH].client_count})


@routes.get("/api/services", name="services")
@api_doc("Every service's state, in start order", responses={200: ServiceStatuses}, auth="console")
async def list_services(request: web.Request) -> web.Response:
    return web.json_response({"services": _supervisor(request).statuses()})


@routes.post("/api/services/start-all", name="services_start_all")
@api_doc("Start every service in order, each once its health check passes", responses={200: ServiceStatuses},
         errors=(409, 502), auth="console")
async def start_all(request: web.Request) -> web.Response:
    return await _transition(request, _supervisor(request).start_all)


@routes.post("/api/services/start-all-fresh", name="services_start_all_fresh")
@api_doc("Stop every service, then start them all in order", responses={200: ServiceStatuses}, errors=(409, 502),
         auth="console")
async def start_all_fresh(request: web.Request) -> web.Response:
    return await _transition(request, _supervisor(request).start_all_fresh)


@routes.post("/api/services/stop-all", name="services_stop_all")
@api_doc("Stop every service, in reverse order", responses={200: ServiceStatuses}, errors=(409, 502), auth="console")
async def stop_all(request: web.Request) -> web.Response:
    return await _transition(request, _supervisor(request).stop_all)


@routes.get("/api/services/{id}", name="service")
@api_doc("One service's state", responses={200: ServiceStatus}, errors=(404,), auth="console")
async def get_service(request: web.Request) -> web.Response:
    return web.json_response(_supervisor(request).status(_known(request)))


def _service_action(name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(request: web.Request) -> web.Response:
        service_id = _known(request)
        return await _transition(request, lambda: getattr(_supervisor(request), name)(service_id))
    handler.__name__ = f"service_{name}"
    return handler


ACTION_SUMMARIES = {"start": "Start a service", "stop": "Stop a service", "restart": "Stop, then start a service",
                    "build": "Build a service (its steps: install, compile, assets...), then restart it on the "
                             "result; a failed build leaves it as it was and keeps it from being started"}
for _action, _summary in ACTION_SUMMARIES.items():
    routes.post(f"/api/services/{{id}}/{_action}", name=f"service_{_action}")(
        api_doc(_summary, responses={200: ServiceStatus}, errors=(404, 409, 502), auth="console")(
            _service_action(_action)))


@routes.post("/api/services/{id}/rolling-restart", name="service_rolling_restart")
@api_doc("Replace a service's processes one at a time, each new one serving before the old one drains "
         "(its WebSockets closed with 1012, service restart); 409 for a service that runs one process by "
         "design (no `workers` in the service table) or is not running", responses={200: ServiceStatus},
         errors=(404, 409, 502), auth="console")
async def rolling_restart(request: web.Request) -> web.Response:
    service_id = _known(request)
    return await _transition(request, lambda: _supervisor(request).rolling_restart(service_id))


# ------------------------------------------------------------------ logs

class LogQuery(marshmallow.Schema):
    lines = marshmallow.fields.Integer(load_default=200,
                                       validate=marshmallow.validate.Range(min=1, max=10000))
    offset = marshmallow.fields.Integer(load_default=0, validate=marshmallow.validate.Range(min=0))


async def _log_page(request: web.Request, lines: int, offset: int) -> web.Response:
    service_id = _known(request)
    page = await request.app[LOGS].get(service_id).tail(lines, offset)
    return web.json_response({"service": service_id, "lines": page.lines, "offset": offset,
                              "hasMore": page.has_more})


@routes.get("/api/logs/{id}", name="logs")
@api_doc("A page of a service's log, counted back from the end", query=LogQuery, responses={200: LogPage},
         errors=(404,), auth="console")
async def get_logs(request: web.Request) -> web.Response:
    query = parse_query(request, LogQuery())
    return await _log_page(request, query["lines"], query["offset"])


@routes.get("/api/logs/{id}/recent", name="logs_recent")
@api_doc("A service's last 100 log lines", responses={200: LogPage}, errors=(404,), auth="console")
async def recent_logs(request: web.Request) -> web.Response:
    return await _log_page(request, RECENT_LINES, 0)


@routes.delete("/api/logs/{id}", name="logs_clear")
@api_doc("Clear a service's log", responses={200: LogCleared}, errors=(404,), auth="console")
async def clear_logs(request: web.Request) -> web.Response:
    service_id = _known(request)
    await request.app[LOGS].get(service_id).clear()
    return web.json_response({"service": service_id, "cleared": True})


# ------------------------------------------------------------------ push

@routes.get("/ws", name="console_ws")
@api_doc("Server push (WebSocket upgrade): `log`, `status` and `stt-log` messages", query=PushQuery,
         responses={101: None}, headers={"Upgrade": "`websocket`"}, auth="console")
async def websocket(request: web.Request) -> web.WebSocketResponse:
    return await request.app[PUSH].handle(request)


# ------------------------------------------------------------------ access control

def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def console_credential(config: Config, host: str) -> str:
    """The credential a console on `host` asks for: CONSOLE_TOKEN (config `console.token`) when
    one is set, whatever the address, so that other local users' processes cannot drive a
    loopback console either (docs/console.md, "Access"); without one, none on loopback and the
    administrator password elsewhere."""
    token = os.environ.get("CONSOLE_TOKEN") or config.settings.console.token
    if token:
        return str(token)
    if is_loopback(host):
        return ""
    credential = config.settings.auth.admin_password
    if not credential:
        raise ConfigError(f"the console is bound to {host}, which is not a loopback address: set "
                          f"CONSOLE_TOKEN (or ADMIN_PASSWORD) so that it can require a credential")
    return credential


def _presented(request: web.Request, admin_username: str) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value:
        return value.strip()
    if scheme.lower() == "basic" and value:
        try:
            username, _, password = base64.b64decode(value.strip()).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return password if username == admin_username else None
    if request.path == "/ws":
        return request.query.get("token")  # browsers cannot set headers on a WebSocket
    return None


def credential_middleware(admin_username: str) -> Middleware:
    @web.middleware
    async def require_credential(request: web.Request, handler: Handler) -> web.StreamResponse:
        expected = request.app[CREDENTIAL]
        if expected and request.path != "/api/health":
            presented = _presented(request, admin_username)
            if presented is None or not hmac.compare_digest(presented.encode(), expected.encode()):
                raise Unauthorized("This console requires an operator credential.",
                                   error_type="unauthorized",
                                   hint="Send Authorization: Bearer <CONSOLE_TOKEN> (or Basic with the "
                                        "administrator's name and password).",
                                   headers={"WWW-Authenticate": 'Basic realm="console"'})
        return await handler(request)
    return require_credential


UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# What a browser sends in Sec-Fetch-Site for a request that another site's page started.
OTHER_SITES = frozenset({"cross-site", "same-site"})


def is_cross_site(request: web.Request) -> bool:
    """A browser request that another site's page started: its Sec-Fetch-Site says so, or it
    carries an Origin other than the console's own. The command line and curl send neither."""
    if request.headers.get("Sec-Fetch-Site", "").strip().lower() in OTHER_SITES:
        return True
    origin = request.headers.get("Origin")
    return origin is not None and origin.rstrip("/").lower() != f"{request.scheme}://{request.host}".lower()


@web.middleware
async def same_site_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The console starts and stops processes, so a web page the operator happens to open must
    not drive it: a state-changing request (POST, PUT, PATCH, DELETE) or the `/ws` upgrade (which
    CORS does not cover) started by another site is refused; and so is a Host header naming
    anything but a loopback address when no credential guards the console (DNS rebinding).
    The console's own pages need no token for this: their same-origin fetches pass."""
    if (request.method in UNSAFE_METHODS or request.path == PUSH_PATH) and is_cross_site(request):
        raise Forbidden("Requests started by another web site are refused.", error_type="cross_site_request",
                        hint="Open the console's own pages, or call the API from the command line.")
    if not request.app[CREDENTIAL]:
        try:
            host = URL(f"http://{request.host}").host or ""
        except ValueError:
            host = ""
        if not is_loopback(host.strip("[]")):
            raise Forbidden("This console answers only to loopback host names.", error_type="bad_host",
                            hint="Use http://127.0.0.1:<port> or http://localhost:<port>.")
    return await handler(request)


# ------------------------------------------------------------------ factory

def create_console_app(config: Config, *, host: str | None = None,
                       specs: list[ServiceSpec] | None = None) -> web.Application:
    host = host or config.settings.console.host
    specs = load_services(data_dir=config.data_dir) if specs is None else specs
    push = PushHub()
    console = config.settings.console
    logs = LogStore(config.data_dir / "logs", console.log_max_bytes, console.log_backups)
    stt_log = SttLog(push)
    peers = Peers(specs, config)
    supervisor = Supervisor(specs, config.data_dir, logs, push, SupervisorSettings.from_config(config),
                            line_listener=stt_log.read_service_line,
                            peer_urls={spec.id: service_url(config, spec) for spec in specs}, peers=peers)

    app = web.Application(middlewares=[error_middleware, same_site_only,
                                       credential_middleware(config.settings.auth.admin_username)])
    app[SUPERVISOR] = supervisor
    app[PUSH] = push
    app[LOGS] = logs
    app[STT_LOG] = stt_log
    app[STARTED] = time.monotonic()
    app[CREDENTIAL] = console_credential(config, host)
    app[PEERS] = peers
    monitor = PerformanceMonitor([spec.id for spec in specs], supervisor.pids, config.data_dir,
                                 PerformanceSettings.from_config(config))
    app[PERFORMANCE] = monitor
    app[DATABASE] = DatabasePanel(config, peers)
    app[dashboard.SOURCES] = dashboard.Shared(dashboard.SOURCE_TTL)
    app[PROXY_MAX_BODY] = console.proxy_max_body_bytes
    app.router.add_routes(routes)
    app.router.add_routes(dashboard.routes)
    app.router.add_routes(database.routes)
    # The console's own loops (the backup schedule, the performance sampling), each failure logged
    # once the way a service's jobs' are (gateway/jobs.py).
    jobs = JobGroup("console")
    setup_backups(app, config, supervisor, jobs)
    add_proxy_routes(app)
    setup_pages(app)
    add_document_route(app, "console", __version__, lambda app: [push_channel(bool(app[CREDENTIAL]))],
                       "The console's server push on /ws.", auth="console")
    add_document_routes(app, "Management console (console)", __version__, auth="console")

    async def supervisor_ctx(app: web.Application) -> AsyncIterator[None]:
        await supervisor.open()
        yield
        await supervisor.close()

    async def peers_ctx(app: web.Application) -> AsyncIterator[None]:
        await peers.open()
        yield
        await peers.close()

    async def performance_ctx(app: web.Application) -> AsyncIterator[None]:
        monitor.start(jobs)
        yield
        await jobs.stop(SAMPLING_JOB)

    app.cleanup_ctx.append(peers_ctx)
    app.cleanup_ctx.append(supervisor_ctx)
    app.cleanup_ctx.append(performance_ctx)

    async def close_websockets(app: web.Application) -> None:
        await push.close_all()

    app.on_shutdown.append(close_websockets)
    return app


def resolve_port(config: Config, port: int | None) -> int:
    return port or config.settings.console.port


def run_console(config: Config, host: str | None = None, port: int | None = None) -> None:
    """Serve in the foreground until SIGTERM/SIGINT; stopping the console stops its services."""
    host = host or config.settings.console.host
    port = resolve_port(config, port)
    app = create_console_app(config, host=host)
    web.run_app(app, host=host, port=port, access_log=None, shutdown_timeout=5,
                print=lambda *_: log.info("console listening on http://%s:%s", host, port))

