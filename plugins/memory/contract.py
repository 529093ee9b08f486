"""What the memory package offers the plugins of other services: `MEMORY`, the one client of the
memory service (plugin `memory_client`, loaded wherever memories are read or written: the AI
core for recall, the tools and extraction; the gateway for the thinking job).

Memories are plain dicts as the memory service answers them (docs/memory.md, "A memory": id,
user_id, content, category, priority, source, source_session_id, source_message_id,
previous_content, created_at, updated_at; a search hit adds `score`). Every call names the
person it acts for; the client asks with the service credential on their behalf."""
from __future__ import annotations

from typing import Any, Literal, Protocol

from gateway.contracts import ContractKey
from gateway.peers import PeerFailed

SearchMode = Literal["hybrid", "dense", "lexical"]
Source = Literal["explicit", "extracted", "api"]
CATEGORIES = ("identity", "preference", "health", "relationship", "work", "schedule", "other")


class MemoryServiceError(PeerFailed):
    """The memory service answered a call with an error (`peer_status`, its `error_type`, e.g.
    400 `validation_error`, 409 `too_many_memories`), or could not be asked (MemoryUnavailable):
    the core's one error of a call to another service, with the spec's body."""
    error_type = "memory_service_failed"


class MemoryUnavailable(MemoryServiceError):
    """The memory service cannot be used now: not reachable, no answer within the client's
    time limit, an answer that is not a JSON object, our credential refused, or its own 503
    (database, vector store or embedding model down). Callers skip memory, they do not fail."""


class MemoryStore(Protocol):
    async def search(self, user_id: str, query: str, limit: int = 10, mode: SearchMode = "dense",
                     category: str | None = None, min_relevance: float | None = None) -> list[dict]:
        """The person's memories best matching `query`, best first, each with `score` (cosine
        similarity with `dense`) and `relevance`; only those at or above the relevance floor
        (`min_relevance`, else the service's; -1: the nearest whatever their relevance;
        docs/memory.md, "Relevance")."""
        ...

    async def top(self, user_id: str, limit: int = 5) -> list[dict]:
        """The person's highest-priority memories (then the latest updated)."""
        ...

    async def create(self, user_id: str, content: str, category: str = "other", priority: int = 5,
                     source: Source = "api", session_id: str | None = None,
                     message_id: str | None = None, client_key: str | None = None) -> dict:
        """`{action: created|merged|superseded, memory, replaced}` (the service merges a
        near-duplicate and supersedes a contradicted memory). `client_key`: the write's
        idempotency key; a retry with it answers the first write instead of storing twice."""
        ...

    async def get(self, user_id: str, memory_id: str) -> dict | None:
        """The memory; None when the person has no such memory."""
        ...

    async def update(self, user_id: str, memory_id: str, **fields: Any) -> dict | None:
        """The memory after changing any of `content`, `category`, `priority`; None when the
        person has no such memory."""
        ...

    async def delete(self, user_id: str, memory_id: str) -> bool:
        """True when deleted; False when the person has no such memory."""
        ...

    async def list(self, user_id: str | None, category: str | None = None, limit: int = 50,
                   offset: int = 0) -> dict:
        """`{memories, total, limit, offset}`, latest updated first (`user_id` None: everyone's)."""
        ...


MEMORY: ContractKey[MemoryStore] = ContractKey("memory.client", "the memory service: search, top, create, "
                                                                 "update, delete, list memories per person")
