"""The core's resources of one service, opened as it starts and closed as it stops (an aiohttp
cleanup context, built by `create_app`): the HTTP client and the bus always; the database
(migrated), blobs, embeddings and the vector index when a plugin uses them; then the job
scheduler, and the hub's start."""
from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import AsyncIterator, Callable, Iterable

import aiohttp
import aiojobs
from aiohttp import web

from .blobs import create_blob_store
from .bus_factory import create_bus
from .context import Context
from .database import create_pool, drop_connections, resolve_database_url
from .embedded_database import keep_embedded_running
from .embeddings import create_embedder
from .fetch import RESOLVER
from .migrations import apply_migrations, migration_files
from .plugins import Plugin, Registry
from .vectors import open_vector_index

CleanupContext = Callable[[web.Application], AsyncIterator[None]]


@dataclass(frozen=True, slots=True)
class CoreNeeds:
    """Which optional resources the service's plugins use (`Plugin.uses`; the database also
    whenever one has migrations): a service opens nothing it does not need."""

    database: bool
    blobs: bool
    vectors: bool
    embeddings: bool


def _uses(plugins: Iterable[Plugin], registry: Registry, resource: str) -> bool:
    if resource == "database" and registry.migrations:
        return True
    return any(resource in getattr(plugin, "uses", ()) for plugin in plugins)


def core_needs(plugins: list[Plugin], registry: Registry) -> CoreNeeds:
    vectors = _uses(plugins, registry, "vectors")
    return CoreNeeds(database=_uses(plugins, registry, "database"), blobs=_uses(plugins, registry, "blobs"),
                     vectors=vectors, embeddings=vectors or _uses(plugins, registry, "embeddings"))


def core_resources(context: Context, registry: Registry, needs: CoreNeeds) -> CleanupContext:
    """The cleanup context that opens what `needs` names on `context`, and closes it all, in the
    reverse order, as the service stops (also when opening fails half-way)."""
    config = context.config

    async def core_ctx(app: web.Application) -> AsyncIterator[None]:
        # Streams to peers (a chat turn holds one for its whole reply) must not queue behind
        # aiohttp's default cap of 100 pooled connections; the cap is a setting (0: none).
        connector = aiohttp.TCPConnector(limit=config.settings.core.http_connection_limit)
        context.http = aiohttp.ClientSession(connector=connector,
                                             timeout=aiohttp.ClientTimeout(total=None, connect=10))
        context.bus = await create_bus(config)
        watchdog: asyncio.Task[None] | None = None
        try:
            if needs.database:
                url, watchdog = await _resolve_database(context)
                await _open_database(context, registry, url)
            await _open_stores(context, needs)
            context.scheduler = aiojobs.Scheduler(close_timeout=config.settings.core.shutdown_timeout)
            await context.hub.start()
            yield
        finally:
            if watchdog is not None:
                watchdog.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watchdog
            await _close_resources(context)

    return core_ctx


async def _resolve_database(context: Context) -> tuple[str, asyncio.Task[None] | None]:
    """The database's address, and the watchdog of the embedded server when one is used: it
    stops when the last process using it exits; until then this service starts it again should
    it die."""
    url, context.embedded_database = await resolve_database_url(context.config)
    if context.embedded_database is None:
        return url, None

    def server_stopped() -> None:
        if context.has("db"):
            drop_connections(context.db)

    watchdog = asyncio.create_task(keep_embedded_running(context.embedded_database, stopped=server_stopped),
                                   name="embedded-postgres-watchdog")
    return url, watchdog


async def _open_database(context: Context, registry: Registry, url: str) -> None:
    """The pool, then every plugin's pending migrations."""
    config = context.config
    database = config.settings.database
    context.db = await create_pool(url, database.pool_min, database.pool_max, application_name=context.service_id,
                                   idle_seconds=database.pool_idle_seconds)
    plans = [(m.plugin, migration_files(m.package, m.directory)) for m in registry.migrations]
    await apply_migrations(context.db, plans)


async def _open_stores(context: Context, needs: CoreNeeds) -> None:
    config = context.config
    if needs.blobs:
        context.blobs = await create_blob_store(config)
    if needs.embeddings:
        context.embeddings = create_embedder(config, resolver=context.contracts.get(RESOLVER))
    if needs.vectors:
        context.vectors = await open_vector_index(config, context.service_id, context.embeddings)


async def _close_resources(context: Context) -> None:
    """Close what was opened, the last opened first; the bus and the HTTP client always exist."""
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
