"""The application factory: one service = the core + the plugins its row of the service table
names. Production (`gateway serve`) and the tests build apps through `create_app` alike."""
from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import time
from pathlib import Path
from typing import AsyncIterator, Iterable

import aiohttp
import aiojobs
import marshmallow
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_runner import GracefulExit

from . import idle
from .version import __version__
from .asyncapi import add_document_route as add_asyncapi_route
from .blobs import create_blob_store
from .bus_factory import create_bus
from .config import Config, ConfigError
from .context import CONTEXT, Context
from .database import create_pool, drop_connections, resolve_database_url
from .embedded_database import keep_embedded_running
from .embeddings import create_embedder
from .errors import ApiError, error_middleware
from .fetch import RESOLVER
from .introspection import INTROSPECTION_PATH, introspection
from .migrations import apply_migrations, migration_files
from .worker_process import REPLACED_SIGNAL, watch_parent
from .openapi import ASYNCAPI_PATH, DOCS_PATH, OPENAPI_PATH, add_document_routes, api_doc
from .plugins import (REGISTRY, Job, Plugin, PluginError, PluginRecord, Registrar, Registry,
                      installed_plugins, select_plugins)
from .services import ServiceSpec, get_service
from .typedefs import REQUEST_ID, SERVICE_ID, WORKER_INDEX
from .vectors import open_vector_index

log = logging.getLogger("gateway.app")

HEALTH_PATH = "/api/v1/health"


class AccessLogger(AbstractAccessLogger):
    """Logs the path without its query string: tokens travel in queries (WebSocket) and must
    never reach a log."""

    def log(self, request, response, time_taken):  # noqa: A003 - aiohttp's interface
        self.logger.info('%s "%s %s" %s %.1fms %s', request.remote, request.method, request.path,
                         response.status, time_taken * 1000, request.get(REQUEST_ID, "-"))


class HealthAnswer(marshmallow.Schema):
    status = marshmallow.fields.String(required=True, metadata={"description": "`ok` while the service answers."})
    service = marshmallow.fields.String(required=True)
    ws_connections = marshmallow.fields.Integer(required=True, metadata={
        "description": "WebSocket connections open on the process that answered."})
    version = marshmallow.fields.String(required=True)
    worker = marshmallow.fields.Integer(metadata={
        "description": "Which of the service's worker processes answered (0 to N-1); absent when it runs "
                       "as one process."})


@api_doc("Whether the service answers (no credential needed)", auth="none", responses={200: HealthAnswer})
async def health(request: web.Request) -> web.Response:
    context = request.app[CONTEXT]
    answer = {"status": "ok", "service": context.service_id, "ws_connections": context.hub.count(),
              "version": __version__}
    if WORKER_INDEX in request.app:
        answer["worker"] = request.app[WORKER_INDEX]
    return web.json_response(answer)


WORKER_HEADER = "Gateway-Worker"


async def _name_worker(request: web.Request, response: web.StreamResponse) -> None:
    """Each answer of one of several workers says which (the WebSocket handshake's too): the
    operator and the tests see where a connection landed."""
    response.headers[WORKER_HEADER] = str(request.app[WORKER_INDEX])


def _uses(plugins: Iterable[Plugin], registry: Registry, resource: str) -> bool:
    if resource == "database" and registry.migrations:
        return True
    return any(resource in getattr(plugin, "uses", ()) for plugin in plugins)


def create_app(service_id: str, config: Config | None = None, *, plugins: list[Plugin] | None = None,
               spec: ServiceSpec | None = None) -> web.Application:
    """Build the service `service_id`. `plugins`, when given, replaces discovery (tests register
    plugins inline this way); they are still checked and ordered by their dependencies."""
    config = config or Config.load()
    idle.configure(float(config.get("core.model_idle_seconds", idle.DEFAULT_IDLE_SECONDS)))
    if spec is None:
        spec = (get_service(service_id, data_dir=config.data_dir) if plugins is None
                else ServiceSpec(id=service_id, name=service_id, port=0))
    registry = Registry()
    if plugins is None:
        ordered = select_plugins(spec.plugins, installed_plugins(spec.plugins), config, spec.planned,
                                 registry.skipped)
    else:
        ordered = select_plugins([p.name for p in plugins], {p.name: p for p in plugins}, config,
                                 skipped=registry.skipped)

    for plugin in ordered:
        config.adopt(plugin.environment, plugin.generated_secrets)
    context = Context(service_id, config, spec.name)
    for path in (HEALTH_PATH, OPENAPI_PATH, DOCS_PATH, ASYNCAPI_PATH, INTROSPECTION_PATH):
        registry.claim_route("GET", path, "core")
        registry.claim_route("HEAD", path, "core")
    for plugin in ordered:
        registry.records[plugin.name] = PluginRecord(plugin)
        try:
            plugin.setup(Registrar(registry, plugin, context))
        except PluginError:
            raise
        except Exception as error:
            raise PluginError(f"plugin {plugin.name!r} failed to set up: {error!r}") from error

    app = web.Application(middlewares=[error_middleware, *registry.middlewares],
                          client_max_size=int(config.get("core.max_body_bytes") or 8 * 1024 * 1024))
    app[CONTEXT] = context
    app[REGISTRY] = registry
    app[SERVICE_ID] = service_id
    context.app = app
    for key, (value, _) in registry.app_state.items():
        app[key] = value
    app.router.add_get(HEALTH_PATH, health, name="core.health")
    app.router.add_get(INTROSPECTION_PATH, introspection, name="core.introspection")
    add_document_routes(app, f"{spec.name} ({service_id})", __version__)
    if registry.ws_types or registry.ws_server_types:
        add_asyncapi_route(app, f"{spec.name} ({service_id})", __version__)
    for table in registry.route_tables:
        app.router.add_routes(table)

    needs_database = _uses(ordered, registry, "database")
    needs_blobs = _uses(ordered, registry, "blobs")
    needs_vectors = _uses(ordered, registry, "vectors")
    needs_embeddings = needs_vectors or _uses(ordered, registry, "embeddings")

    async def core_ctx(app: web.Application) -> AsyncIterator[None]:
        # Streams to peers (a chat turn holds one for its whole reply) must not queue behind
        # aiohttp's default cap of 100 pooled connections; the cap is a setting (0: none).
        connector = aiohttp.TCPConnector(limit=int(config.get("core.http_connection_limit") or 0))
        context.http = aiohttp.ClientSession(connector=connector,
                                             timeout=aiohttp.ClientTimeout(total=None, connect=10))
        context.bus = await create_bus(config)
        watchdog: asyncio.Task | None = None
        try:
            if needs_database:
                # The embedded server, when used, stops when the last process using it exits;
                # until then this service starts it again should it die.
                url, context.embedded_database = await resolve_database_url(config)
                if context.embedded_database is not None:
                    def server_stopped() -> None:
                        if context.has("db"):
                            drop_connections(context.db)

                    watchdog = asyncio.create_task(keep_embedded_running(context.embedded_database,
                                                                         stopped=server_stopped),
                                                   name="embedded-postgres-watchdog")
                context.db = await create_pool(url, int(config.get("database.pool_min") or 1),
                                               int(config.get("database.pool_max") or 10))
                plans = [(m.plugin, migration_files(m.package, m.directory)) for m in registry.migrations]
                await apply_migrations(context.db, plans)
            if needs_blobs:
                context.blobs = await create_blob_store(config)
            if needs_embeddings:
                context.embeddings = create_embedder(config, resolver=context.contracts.get(RESOLVER))
            if needs_vectors:
                context.vectors = await open_vector_index(config, service_id, context.embeddings)
            context.scheduler = aiojobs.Scheduler(close_timeout=float(config.get("core.shutdown_timeout") or 10))
            await context.hub.start()
            yield
        finally:
            if watchdog is not None:
                watchdog.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watchdog
            if context.has("scheduler"):
                await context.scheduler.close()
            if context.has("vectors"):
                await context.vectors.close()
            if context.has("embeddings"):
                await context.embeddings.close()
            if context.has("blobs"):
                await context.blobs.close()
            if context.has("db"):
                context.db.close()
                await context.db.wait_closed()
            await context.bus.close()
            await context.http.close()

    app.cleanup_ctx.append(core_ctx)
    for _, lifespan in registry.lifespans:
        app.cleanup_ctx.append(_lifespan_ctx(lifespan, context))

    _run_jobs(app, registry.jobs, context)

    async def close_websockets(app: web.Application) -> None:
        await context.hub.close_all()

    app.on_shutdown.append(close_websockets)
    return app


def _run_jobs(app: web.Application, jobs: list[Job], context: Context) -> None:
    """The plugins' declared jobs (`registrar.job`): started once every lifespan has run, and
    cancelled as the service begins to stop, before the lifespans end, so that no job outlives
    what it uses. A job that fails is logged once and not restarted."""
    running: list[aiojobs.Job] = []

    async def start(app: web.Application) -> None:
        for job in jobs:
            running.append(await context.scheduler.spawn(_guarded(job.name, job.factory(context))))

    async def stop(app: web.Application) -> None:
        outcomes = await asyncio.gather(*(job.close() for job in running), return_exceptions=True)
        for job, outcome in zip(jobs, outcomes):
            if isinstance(outcome, BaseException):  # it did not end within core.shutdown_timeout
                log.warning("background job %s did not stop: %r", job.name, outcome)
        running.clear()

    app.on_startup.append(start)
    app.on_shutdown.append(stop)


def _lifespan_ctx(lifespan, context: Context):
    """A plugin's lifespan as a cleanup context: its code up to `yield` runs at start, the rest at stop."""
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        generator = lifespan(context)
        await generator.__anext__()
        yield
        try:
            await generator.__anext__()
        except StopAsyncIteration:
            return
        raise PluginError(f"the lifespan {lifespan.__qualname__} must yield exactly once")

    return ctx


async def _guarded(name: str, coroutine) -> None:
    started = time.monotonic()
    try:
        await coroutine
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("background job %s failed after %.1fs", name, time.monotonic() - started)


def new_event_loop(config: Config) -> asyncio.AbstractEventLoop:
    """The loop a service runs on (`core.event_loop`). uvloop's sockets and callbacks are
    written in C: relaying a streamed reply costs about a third less CPU per event than on
    asyncio's own loop, which decides how many chat sessions one instance carries."""
    choice = str(config.get("core.event_loop") or "uvloop")
    if choice not in ("uvloop", "asyncio"):
        raise ConfigError(f"core.event_loop: {choice!r} is not one of uvloop, asyncio")
    if choice == "uvloop":
        try:
            import uvloop
        except ImportError:  # not built for this platform (Windows): the standard loop works the same
            log.warning("core.event_loop is uvloop, which is not installed here; using asyncio's loop")
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class SpecErrorRequestHandler(RequestHandler):
    """Answers what aiohttp's parser refuses before any middleware runs (an over-long request
    line or header, too many headers, a malformed request line) with the spec's error body
    instead of aiohttp's plain text."""

    __slots__ = ()

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs it, and refuses once bytes went out
        error = parser_error(status, exc)
        response = web.json_response(error.body(), status=error.status)
        response.force_close()
        return response


def parser_error(status: int, exc: BaseException | None) -> ApiError:
    """The spec's error for what aiohttp's protocol answers by itself (`status` is its choice)."""
    if isinstance(exc, LineTooLong) or (isinstance(exc, BadHttpMessage) and "too many" in exc.message.lower()):
        return ApiError("The request line or its headers are too large.", error_type="request_too_large",
                        status=431, hint="Send a shorter address (data belongs in the body) and fewer or "
                                         "shorter headers.")
    if 400 <= status < 500:
        return ApiError("The request could not be parsed as HTTP.", error_type="malformed_request",
                        status=status, hint="Check the request line and the headers.")
    if status == 504:
        return ApiError("The server took too long to answer.", error_type="timeout", status=504)
    return ApiError("Internal server error.", error_type="internal_error", status=status,
                    hint="Details are in the service log.")


class SpecErrorServer(web.Server):
    def __call__(self) -> RequestHandler:
        return SpecErrorRequestHandler(self, loop=self._loop, **self._kwargs)


class ServiceRunner(web.AppRunner):
    """`web.AppRunner` whose connections answer parser errors in the spec's body."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return SpecErrorServer(server.request_handler, request_factory=server.request_factory,
                               handler_cancellation=server.handler_cancellation, loop=server._loop,
                               **server._kwargs)


# The cyclic collector's thresholds while serving (Python's are 700, 10, 10): at 700 objects merely
# in flight get promoted, so the passes that walk every open connection's objects run every second.
GC_THRESHOLDS = (10_000, 10, 10)


def settle_garbage_collector() -> None:
    """Leave what start-up built (every plugin, route, schema and client: it lives as long as the
    process) out of the cyclic garbage collector's passes, and make the passes rarer (see
    GC_THRESHOLDS): each full pass walked all of it while requests ran."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def serve(app: web.Application, host: str, port: int, *, shutdown_timeout: float,
                on_listening=None, reuse_port: bool = False) -> None:
    """Run `app` on host:port until cancelled; SIGINT and SIGTERM stop it (`GracefulExit`) and
    the runner's cleanup drains it (what `web.run_app` does, with `ServiceRunner`)."""
    runner = ServiceRunner(app, handle_signals=True, access_log_class=AccessLogger,
                           shutdown_timeout=shutdown_timeout, keepalive_timeout=75.0)
    await runner.setup()
    settle_garbage_collector()
    try:
        site = web.TCPSite(runner, host, port, reuse_port=reuse_port or None)
        await site.start()
        if on_listening is not None:
            on_listening(site.port)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def _stop_replaced(app: web.Application, who: str) -> None:
    log.info("%s: replaced (rolling restart); draining, its WebSockets told to reconnect (1012)", who)
    app[CONTEXT].hub.replaced()
    os.kill(os.getpid(), signal.SIGTERM)  # then as any stop: aiohttp's own SIGTERM handler drains


def listen_host(config: Config, service_id: str, host: str | None = None) -> str:
    """Where a service listens: `--host`, else `[core] listen_hosts.<service id>`, else loopback
    only (a phone on the network reaches the web client once `frontend = "0.0.0.0"` is set)."""
    configured = config.get("core.listen_hosts") or {}
    return host or str(configured.get(service_id) or "127.0.0.1")


def run(service_id: str, host: str | None = None, port: int | None = None, config: Config | None = None,
        worker_index: int | None = None, reuse_port: bool = False, ready_file: Path | None = None) -> None:
    """Serve `service_id` in this process; `worker_index`: as one of `gateway serve --workers N`'s
    processes (gateway.workers), sharing the port and stopping when the parent is gone.
    `reuse_port`: bind with SO_REUSEPORT, so that a replacement can serve the port beside this
    process before it stops; `ready_file`: written once the port is served (what the starter of a
    replacement waits for: a health check on a shared port may be answered by the old process)."""
    config = config or Config.load()
    idle.limit_malloc_arenas(int(config.get("core.malloc_arenas", idle.DEFAULT_MALLOC_ARENAS)))
    spec = get_service(service_id, data_dir=config.data_dir)
    loop = new_event_loop(config)
    asyncio.set_event_loop(loop)
    app = create_app(service_id, config, spec=spec)
    if worker_index is not None:
        app[WORKER_INDEX] = worker_index
        app.on_response_prepare.append(_name_worker)
        watch_parent(loop)
    host = listen_host(config, service_id, host)
    who = service_id if worker_index is None else f"{service_id} worker {worker_index} (pid {os.getpid()})"
    if REPLACED_SIGNAL is not None:
        loop.add_signal_handler(REPLACED_SIGNAL, _stop_replaced, app, who)

    def listening(bound: int) -> None:
        log.info("%s listening on %s:%s (event loop: %s)", who, host, bound, type(loop).__module__.split(".")[0])
        if ready_file is not None:
            ready_file.write_text(f"{os.getpid()} {bound}\n")

    main = loop.create_task(serve(
        app, host, port or spec.port, shutdown_timeout=float(config.get("core.shutdown_timeout") or 10),
        reuse_port=reuse_port or worker_index is not None, on_listening=listening))
    try:
        loop.run_until_complete(main)
    except (GracefulExit, KeyboardInterrupt):  # SIGTERM or SIGINT: drain and stop
        pass
    finally:
        try:
            if not main.done():
                main.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(main)
        finally:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
