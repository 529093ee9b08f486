"""Long-term memory: two plugins in one package (docs/memory.md).

- `memory` (the memory-service): what the assistant remembers about each person, with its
  category, priority and source; list, search by meaning (the core's embeddings and vector
  store, English and Chinese), create, update, delete. A new memory that repeats an existing one
  is merged into it; one that contradicts an existing one supersedes it (rules.py).
- `memory_proxy` (the gateway): the spec's four `/api/v1/memory` endpoints, passed on to the
  memory service with the service credential, each person scoped to their own memories."""
from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

import aiohttp

from gateway.plugins import Plugin, Registrar

from . import api, proxy
from .settings import MemoryProxySettings, MemorySettings
from .store import MemoryStore


class MemoryPlugin(Plugin):
    name = "memory"
    depends = ("auth_tokens",)
    uses = ("database", "vectors")
    description = "Memories per person: merged, superseded, searched by meaning"
    settings_schema = MemorySettings

    def setup(self, registrar: Registrar) -> None:
        store = MemoryStore(registrar.context, registrar.settings)
        registrar.migrations("plugins.memory")
        registrar.routes(api.routes)
        registrar.app_state(api.STORE, store)
        registrar.middleware(api.outage_middleware)

        async def collection(context) -> AsyncIterator[None]:
            await store.start()
            yield
            if store.reindexing is not None:
                store.reindexing.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await store.reindexing

        registrar.lifespan(collection)


class MemoryProxyPlugin(Plugin):
    name = "memory_proxy"
    depends = ("auth_tokens",)
    description = "The gateway's /api/v1/memory endpoints, passed on to the memory service"
    settings_schema = MemoryProxySettings

    def setup(self, registrar: Registrar) -> None:
        registrar.routes(proxy.routes)
        registrar.app_state(proxy.TIMEOUT, aiohttp.ClientTimeout(total=registrar.settings["timeout"]))


plugin = MemoryPlugin()
proxy_plugin = MemoryProxyPlugin()
