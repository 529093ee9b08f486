"""The assistant's memory, a plugin of the ai-core service (`memory_assistant`): recall of the
person's memories into every chat turn (a TURN_CONTEXT provider), the `remember` / `recall` /
`forget` tools, and extraction of new memories after each turn (extraction.py). The memory
service is reached through the MEMORY contract (the `memory_client` plugin), with the service
credential acting for the person of the turn."""
from __future__ import annotations

from gateway.plugins import Plugin, Registrar

from .extraction import register_extraction
from .settings import ExtractionSettings


class MemoryAssistantPlugin(Plugin):
    name = "memory_assistant"
    depends = ("ai_core", "memory_client")
    description = "recall of memories into every chat turn, the remember / recall / forget tools"
    settings_schema = ExtractionSettings  # extraction's keys; the lead merges recall's settings in

    def setup(self, registrar: Registrar) -> None:
        # Extraction (helper "extract", plugins/memory/extraction.py) is registered here:
        register_extraction(registrar)


assistant_plugin = MemoryAssistantPlugin()
