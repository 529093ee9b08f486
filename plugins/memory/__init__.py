"""Long-term memory: two plugins in one package (docs/memory.md).

- `memory` (the memory-service): what the assistant remembers about each person, with its
  category, priority and source; list, search by meaning (the core's embeddings and vector
  store, English and Chinese), create, update, delete. A new memory that repeats an existing one
  is merged into it; one that contradicts an existing one supersedes it (rules.py).
- `memory_proxy` (the gateway): the spec's four `/api/v1/memory` endpoints, passed on to the
  memory service with the service credential, each person scoped to their own memories.
- `memory_client` (any service that reads or writes memories: the AI core, the gateway): the
  `MEMORY` contract (contract.py), the one client of the memory service (client.py).
- `memory_assistant` (the AI core): recall of the person's memories into every chat turn and the
  `remember` / `recall` / `forget` tools (assistant.py)."""
from __future__ import annotations

from typing import AsyncIterator


from gateway.context import Context
from gateway.peers import PeerTimeout
from gateway.plugins import Plugin, Registrar
from plugins.auth.contract import keep_peer_person_data

from . import proxy
from .client import MemoryClient, MemoryTransport
from .contract import MEMORY
from .settings import MemoryClientSettings, MemoryProxySettings, MemorySettings


class MemoryPlugin(Plugin):
    name = "memory"
    depends = ("auth_tokens",)
    uses = ("database", "vectors")
    description = "Memories per person: merged, superseded, searched by meaning"
    settings_class = MemorySettings

    def setup(self, registrar: Registrar[MemorySettings]) -> None:
        # Imported here: the store brings numpy and the relevance models' code, which the services
        # that load only this package's client plugins (the AI core, the gateway) do not need.
        from . import api, person_data, thinking_api
        from .neutral_form import NeutralFormJob
        from .store import MemoryStore

        # Every record indexed again when the collection had to be created (a new embedding model).
        reindexing = registrar.job_group("reindex", per="collection")
        store = MemoryStore(registrar.context, registrar.settings, reindexing)
        registrar.migrations("plugins.memory")
        registrar.routes(api.routes)
        registrar.routes(thinking_api.routes)
        registrar.app_state(api.STORE, store)
        registrar.middleware(api.outage_middleware)
        person_data.register(registrar, store)

        async def collection(context: Context) -> AsyncIterator[None]:
            # Meanwhile in a replacement taking the embedded store over (the console never rolls
            # this service). A re-index still running is stopped by the core with the jobs.
            async with context.vectors.started(store.start, "memory-collection"):
                yield

        registrar.lifespan(collection)
        # Memories stored in the person's words are rewritten once (docs/memory.md, "A memory").
        registrar.job("neutral_form", lambda context: NeutralFormJob(store).run())


class MemoryProxyPlugin(Plugin):
    name = "memory_proxy"
    depends = ("auth_tokens",)
    description = "The gateway's /api/v1/memory endpoints, passed on to the memory service"
    settings_class = MemoryProxySettings

    def setup(self, registrar: Registrar[MemoryProxySettings]) -> None:
        registrar.routes(proxy.routes)
        transport = MemoryTransport(registrar.context, PeerTimeout.from_config(
            registrar.context.config, total=registrar.settings.timeout))
        registrar.app_state(proxy.TRANSPORT, transport)
        # What the memory service keeps of a person goes when the administrator deletes them.
        keep_peer_person_data(registrar, "memory_service", transport)


class MemoryClientPlugin(Plugin):
    name = "memory_client"
    description = "The client of the memory service (the MEMORY contract)"
    settings_class = MemoryClientSettings

    def setup(self, registrar: Registrar[MemoryClientSettings]) -> None:
        timeout = PeerTimeout.from_config(registrar.context.config, total=registrar.settings.timeout)
        registrar.provide(MEMORY, MemoryClient(MemoryTransport(registrar.context, timeout)))


plugin = MemoryPlugin()
proxy_plugin = MemoryProxyPlugin()
client_plugin = MemoryClientPlugin()
