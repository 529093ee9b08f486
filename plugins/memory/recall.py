"""Recall: before each chat turn, the person's memories that matter to it go into the model's
system message (a TURN_CONTEXT provider of the AI core): the most relevant by meaning to the
turn's words (dense search, above a similarity floor) and the person's high-priority ones
whatever the turn is about, without repeats, bounded in count and characters.

A memory service that is down or slow costs the turn its memories, never the turn: the AI core
gives each provider a time limit, and an outage is logged here and skipped."""
from __future__ import annotations

import asyncio
import logging

from plugins.ai_core.contract import ContextBlock

from .contract import MemoryServiceError, MemoryStore
from .person import second_person
from .settings import MemoryAssistantSettings

log = logging.getLogger("plugins.memory.recall")

TITLE = ("What you remember about this person (long-term memory, with each memory's category; "
         "use it when it helps, do not mention it otherwise):")
MAX_QUERY_CHARS = 1000   # the memory service's longest query
MAX_MEMORY_CHARS = 300   # what a turn shows of one memory


def memory_line(memory: dict) -> str:
    content = second_person(str(memory["content"]))
    if len(content) > MAX_MEMORY_CHARS:
        content = content[:MAX_MEMORY_CHARS].rstrip() + "…"
    return f"[{memory['category']}] {content}"


class Recall:
    def __init__(self, memory: MemoryStore, settings: MemoryAssistantSettings):
        self.memory = memory
        self.limit = settings.recall_limit
        self.min_score = settings.recall_min_score
        self.priority_limit = settings.priority_limit
        self.priority_min = settings.priority_min
        self.max_chars = settings.recall_max_chars

    async def memories(self, user_id: str, text: str) -> list[dict]:
        """The memories for a turn: the relevant ones (best first), then the important others."""
        query = " ".join(text.split())[:MAX_QUERY_CHARS]
        searching = (self.memory.search(user_id, query, self.limit, "dense") if query and self.limit
                     else _nothing())
        ranking = self.memory.top(user_id, self.priority_limit) if self.priority_limit else _nothing()
        hits, top = await asyncio.gather(searching, ranking)
        # The memory service answers only what clears its relevance floor; `recall_min_score`
        # is an extra cosine floor for an operator (0: none).
        chosen = [hit for hit in hits if hit.get("score", 0.0) >= self.min_score]
        chosen += [memory for memory in top if memory["priority"] >= self.priority_min]
        unique: dict[str, dict] = {}
        for memory in chosen:
            unique.setdefault(memory["id"], memory)
        return list(unique.values())

    async def provide(self, user_id: str, session_id: str | None, text: str) -> list[ContextBlock]:
        """The TURN_CONTEXT provider."""
        try:
            memories = await self.memories(user_id, text)
        except MemoryServiceError as error:
            log.warning("recall skipped for this turn of %s: %s", user_id, error)
            return []
        lines: list[str] = []
        used = 0
        for memory in memories:
            line = memory_line(memory)
            if used + len(line) > self.max_chars:
                break
            lines.append(line)
            used += len(line) + 1
        return [{"title": TITLE, "lines": lines}] if lines else []


async def _nothing() -> list[dict]:
    return []
