"""Which models answer a purpose, in order: the routing rule's fallback chain, else the enabled
models tagged with the purpose (for `chat`, every model not only for images).

The three tables are read once and kept until an administrator edits them: every edit through
the admin API drops the copy of this instance at once and tells the other instances on the bus
(`ROUTING_CHANGED`), so an edit applies to the next request everywhere the bus reaches. The copy
is also dropped when the bus comes back after an outage (a message may have been lost) and after
`routing_cache_seconds` in any case (0: read the tables for every request, as before)."""
from __future__ import annotations

import logging
import time

from gateway.context import Context

from . import store
from .store import Candidate, Model, Provider, Route

log = logging.getLogger("plugins.ai_core.routing")

ROUTING_CHANGED = "ai_core:routing_changed"
# The purpose of the person's own conversation; background work without its own models uses its chain.
CHAT_PURPOSE = "chat"
VISION_PURPOSE = "vision"
# A model tagged so is never sent tools: the OpenAI door answers 400 `tools_unsupported` when a
# client's functions would have to go to it, and routing skips it for such a request.
NO_TOOLS_TAG = "no_tools"

Snapshot = tuple[dict[str, Provider], dict[str, Model], dict[str, Route]]


def supports_tools(model: Model) -> bool:
    return NO_TOOLS_TAG not in model.tags


class RoutingTable:
    def __init__(self, context: Context, max_age: float) -> None:
        self.context = context
        self.max_age = max_age
        self._snapshot: Snapshot | None = None
        self._read_at = 0.0
        self._generation = 0  # moved by every change: a read begun before one is not kept

    def forget(self) -> None:
        self._snapshot = None
        self._generation += 1

    async def changed(self) -> None:
        """After an edit of the tables: this instance forgets at once, the others when told."""
        self.forget()
        try:
            await self.context.bus.publish(ROUTING_CHANGED, {"at": time.time()})
        except Exception as error:  # the bus is down: the others forget within routing_cache_seconds
            log.warning("could not tell the other instances of a routing change: %r", error)

    async def on_changed(self, message: dict) -> None:
        self.forget()

    async def on_bus_restored(self) -> None:
        self.forget()

    async def snapshot(self) -> Snapshot:
        now = time.monotonic()
        if self._snapshot is not None and now - self._read_at < self.max_age:
            return self._snapshot
        generation = self._generation
        snapshot = await store.routing_snapshot(self.context.db)
        if generation == self._generation and self.max_age > 0:
            self._snapshot, self._read_at = snapshot, now
        return snapshot

    async def candidates(self, purpose: str, preferred: str | None = None) -> tuple[list[Candidate], Route | None]:
        """The models to try for `purpose`, in order; `preferred` first when it exists."""
        providers, models, routes = await self.snapshot()
        route = routes.get(purpose)
        if route is not None:
            ids = list(route.fallback_chain)
        else:
            usable = sorted((m for m in models.values() if m.enabled), key=lambda m: (-m.priority, m.id))
            if purpose == CHAT_PURPOSE:
                ids = [m.id for m in usable if VISION_PURPOSE not in m.tags or CHAT_PURPOSE in m.tags]
            else:
                ids = [m.id for m in usable if purpose in m.tags]
        if preferred and preferred in models:
            ids = [preferred] + [i for i in ids if i != preferred]
        chain = []
        for model_id in ids:
            model = models.get(model_id)
            if model is None or not model.enabled or model.provider not in providers:
                continue
            chain.append(Candidate(model, providers[model.provider]))
        if not chain and purpose not in (CHAT_PURPOSE, VISION_PURPOSE):
            # Background work (`thinking`, `memory`...) without a rule or tagged models: the chat chain.
            return await self.candidates(CHAT_PURPOSE, preferred)
        return chain, route

    async def enabled_models(self) -> list[Model]:
        """The enabled models, highest priority first (`/v1/models`)."""
        _, models, _ = await self.snapshot()
        return sorted((m for m in models.values() if m.enabled), key=lambda m: (-m.priority, m.id))
