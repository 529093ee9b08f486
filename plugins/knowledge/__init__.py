"""Knowledge bases: documents from text, uploaded files and web pages, cut into chunks that keep
their headings and offsets, indexed in the core's vector index and searched in hybrid
(lexical + semantic) mode. The `search_knowledge` tool the assistant uses lives beside it in
assistant.py.

See docs/knowledge.md."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar

from . import person_data
from .api import KNOWLEDGE, routes
from .settings import KnowledgeSettings
from .store import KnowledgeStore


class KnowledgePlugin(Plugin):
    name = "knowledge"
    depends = ("auth_tokens",)
    # Documents from uploaded files, when the service stores files.
    optional_depends = ("files",)
    uses = ("database", "vectors")
    settings_class = KnowledgeSettings
    description = "Knowledge bases: documents from text, files and web pages, hybrid semantic search"

    def setup(self, registrar: Registrar[KnowledgeSettings]) -> None:
        store = KnowledgeStore(registrar.context, registrar.settings)
        registrar.migrations("plugins.knowledge")
        registrar.app_state(KNOWLEDGE, store)
        registrar.routes(routes)
        registrar.lifespan(store.lifespan)
        registrar.job("indexer", store.indexer.run)
        person_data.register(registrar, store)


plugin = KnowledgePlugin()
