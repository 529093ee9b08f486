"""The application factory: one service = the core + the plugins its row of the service table
names. Production (`gateway serve`, through gateway/serving.py) and the tests build apps through
`create_app` alike."""
from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterator

import aiojobs
import marshmallow
from aiohttp import web

from . import idle
from .asyncapi import add_document_route as add_asyncapi_route
from .config import Config
from .context import CONTEXT, Context
from .core_resources import CleanupContext, core_needs, core_resources
from .errors import error_middleware
from .introspection import INTROSPECTION_PATH, introspection
from .jobs import run_logged
from .openapi import ASYNCAPI_PATH, DOCS_PATH, OPENAPI_PATH, add_document_routes, api_doc
from .plugins import (REGISTRY, Lifespan, Plugin, PluginError, PluginRecord, Registrar, Registry,
                      installed_plugins, select_plugins)
from .services import ServiceSpec, get_service
from .typedefs import SERVICE_ID, WORKER_INDEX
from .version import __version__

log = logging.getLogger("gateway.app")

HEALTH_PATH = "/api/v1/health"
# Paths the core serves itself: no plugin may register a route on them.
CORE_PATHS = (HEALTH_PATH, OPENAPI_PATH, DOCS_PATH, ASYNCAPI_PATH, INTROSPECTION_PATH)


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


def create_app(service_id: str, config: Config | None = None, *, plugins: list[Plugin] | None = None,
               spec: ServiceSpec | None = None) -> web.Application:
    """Build the service `service_id`. `plugins`, when given, replaces discovery (tests register
    plugins inline this way); they are still checked and ordered by their dependencies."""
    config = config or Config.load()
    idle.configure(config.settings.core.model_idle_seconds)
    if spec is None:
        spec = (get_service(service_id, data_dir=config.data_dir) if plugins is None
                else ServiceSpec(id=service_id, name=service_id, port=0))
    registry = Registry()
    ordered = _select(spec, config, registry, plugins)
    for plugin in ordered:
        config.adopt(plugin.environment, plugin.generated_secrets, plugin.former_settings)
    context = Context(service_id, config, spec.name)
    _set_up_plugins(ordered, registry, context)
    app = _application(context, registry, config)
    _add_routes(app, registry, f"{spec.name} ({service_id})")
    app.cleanup_ctx.append(core_resources(context, registry, core_needs(ordered, registry)))
    for _, lifespan in registry.lifespans:
        app.cleanup_ctx.append(_lifespan_ctx(lifespan, context))

    _run_jobs(app, registry, context)

    async def close_websockets(app: web.Application) -> None:
        await context.hub.close_all()

    app.on_shutdown.append(close_websockets)
    return app


def _select(spec: ServiceSpec, config: Config, registry: Registry, plugins: list[Plugin] | None) -> list[Plugin]:
    """The service's plugins, checked and ordered by their dependencies: the installed ones its
    row names, or `plugins` when given (what was left out is noted in `registry.skipped`)."""
    if plugins is None:
        return select_plugins(spec.plugins, installed_plugins(spec.plugins), config, spec.planned,
                              registry.skipped)
    return select_plugins([p.name for p in plugins], {p.name: p for p in plugins}, config,
                          skipped=registry.skipped)


def _set_up_plugins(ordered: list[Plugin], registry: Registry, context: Context) -> None:
    """Each plugin's `setup`, in order, after the core claimed its own paths; a plugin that fails
    stops start-up naming it."""
    for path in CORE_PATHS:
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


def _application(context: Context, registry: Registry, config: Config) -> web.Application:
    """The aiohttp application with the plugins' middlewares and app state, and the context."""
    app = web.Application(middlewares=[error_middleware, *registry.middlewares],
                          client_max_size=config.settings.core.max_body_bytes)
    app[CONTEXT] = context
    app[REGISTRY] = registry
    app[SERVICE_ID] = context.service_id
    context.app = app
    for key, (value, _) in registry.app_state.items():
        app[key] = value
    return app


def _add_routes(app: web.Application, registry: Registry, title: str) -> None:
    """The core's routes (health, introspection, the API documents), then the plugins'."""
    app.router.add_get(HEALTH_PATH, health, name="core.health")
    app.router.add_get(INTROSPECTION_PATH, introspection, name="core.introspection")
    add_document_routes(app, title, __version__)
    if registry.ws_types or registry.ws_server_types:
        add_asyncapi_route(app, title, __version__)
    for table in registry.route_tables:
        app.router.add_routes(table)


def _run_jobs(app: web.Application, registry: Registry, context: Context) -> None:
    """The plugins' declared jobs (`registrar.job`): started once every lifespan has run, and
    cancelled as the service begins to stop, before the lifespans end, so that no job outlives
    what it uses; then whatever of the job groups (`registrar.job_group`) still runs. A job that
    fails is logged once (gateway/jobs.py, `run_logged`) and not restarted."""
    running: list[aiojobs.Job] = []

    async def start(app: web.Application) -> None:
        for job in registry.jobs:
            running.append(await context.scheduler.spawn(run_logged(job.name, job.factory(context))))

    async def stop(app: web.Application) -> None:
        outcomes = await asyncio.gather(*(job.close() for job in running), return_exceptions=True)
        for job, outcome in zip(registry.jobs, outcomes):
            if isinstance(outcome, BaseException):  # it did not end within core.shutdown_timeout
                log.warning("background job %s did not stop: %r", job.name, outcome)
        running.clear()
        await asyncio.gather(*(group.close(shutdown_timeout) for group in registry.job_groups))

    shutdown_timeout = context.config.settings.core.shutdown_timeout
    app.on_startup.append(start)
    app.on_shutdown.append(stop)


def _lifespan_ctx(lifespan: Lifespan, context: Context) -> CleanupContext:
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
