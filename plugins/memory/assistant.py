"""The assistant's memory, a plugin of the ai-core service (`memory_assistant`): recall of the
person's memories into every chat turn (a TURN_CONTEXT provider, recall.py), the `remember` /
`recall` / `forget` tools (tools.py), and extraction of new memories after each turn
(extraction.py). The memory service is reached through the MEMORY contract (the
`memory_client` plugin), with the service credential acting for the person of the turn."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar
from plugins.ai_core.contract import TOOLS, TURN_CONTEXT

from .contract import MEMORY
from .extraction import register_extraction
from .recall import Recall
from .settings import MemoryAssistantSettings
from .tools import add_memory_tools


class MemoryAssistantPlugin(Plugin):
    name = "memory_assistant"
    depends = ("ai_core", "memory_client")
    description = "recall of memories into every chat turn, the remember / recall / forget tools, learning from turns"
    settings_class = MemoryAssistantSettings

    def setup(self, registrar: Registrar[MemoryAssistantSettings]) -> None:
        contracts = registrar.context.contracts
        memory = contracts.require(MEMORY)
        settings = registrar.settings
        contracts.require(TURN_CONTEXT).add(self.name, Recall(memory, settings).provide)
        add_memory_tools(contracts.require(TOOLS), memory, settings, owner=self.name)
        register_extraction(registrar)


assistant_plugin = MemoryAssistantPlugin()
