"""What every vector engine is: the points it holds and answers, and the one interface
the embedded engine and a Qdrant server both implement (`Engine`)."""
from __future__ import annotations

import abc
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

from .lexical import SparseVector

log = logging.getLogger("gateway.vectors")

Where = Mapping[str, "str | Sequence[str]"]
SearchMode = Literal["hybrid", "dense", "lexical"]
SEARCH_MODES: tuple[str, ...] = ("hybrid", "dense", "lexical")
DENSE = "dense"
LEXICAL = "lexical"
UPSERT_BATCH = 256
COLLECTION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}\Z")


class VectorStoreUnavailable(Exception):
    """The vector store cannot be used now (server down, directory held by another process);
    plugins answer 503 `vector_store_unavailable`."""


@dataclass(frozen=True)
class IndexItem:
    id: str                      # a UUID string: the point's id
    text: str                    # embedded (dense) and tokenised (lexical)
    payload: dict[str, Any] = field(default_factory=dict)  # returned with hits; filter on top-level keys
    # The passage vector of `text` when the caller already has it (`embeddings.embed_passages`):
    # not embedded again.
    dense: list[float] | None = None


@dataclass(frozen=True)
class IndexHit:
    id: str
    score: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class StoredPoint:
    """What an engine stores for one item: both vectors and the payload."""

    id: str
    dense: list[float]
    sparse: SparseVector
    payload: dict[str, Any]


def conditions_of(where: Where | None) -> list[tuple[str, list[str] | str]] | None:
    """`where` as (key, value or values); None when a list is empty, so nothing can match."""
    conditions: list[tuple[str, list[str] | str]] = []
    for key, value in (where or {}).items():
        if isinstance(value, str):
            conditions.append((key, value))
        else:
            values = [str(v) for v in value]
            if not values:
                return None
            conditions.append((key, values))
    return conditions


class Engine(abc.ABC):
    """What the index needs from a store, on physical collection names."""

    kind = ""

    @property
    def taking_over(self) -> bool:
        """Whether calls now wait for another process to let go of the store (a rolling
        restart's replacement on the embedded engine: gateway/edge_engine.py)."""
        return False

    @abc.abstractmethod
    async def exists(self, name: str) -> bool: ...

    @abc.abstractmethod
    async def create(self, name: str, dimension: int, keyword_fields: Sequence[str]) -> bool:
        """Create the collection; False when it exists already (another instance was first)."""

    @abc.abstractmethod
    async def upsert(self, name: str, points: Sequence[StoredPoint]) -> None: ...

    @abc.abstractmethod
    async def delete(self, name: str, ids: Sequence[str], where: Where | None) -> None: ...

    @abc.abstractmethod
    async def query(self, name: str, dense: list[float] | None, sparse: SparseVector | None,
                    where: Where, limit: int, *, local_idf: bool = True) -> list[list[IndexHit]]:
        """One ranking per vector given (dense first), best first; [] for a missing collection.
        `local_idf`: the lexical ranking's IDF counts only the points `where` selects."""

    @abc.abstractmethod
    async def count(self, name: str, where: Where | None) -> int: ...

    @abc.abstractmethod
    async def drop(self, name: str) -> None:
        """Remove a collection (tests, and operators removing an old model's vectors)."""

    async def close(self) -> None:
        pass


# Segments of the embedded engine are never turned into HNSW graphs: building one holds Python's
# global lock for its whole run (16 s and more for 25,000 points), freezing the service. Plain
# segments are searched exactly through the payload indexes, a few ms for 20,000 points.
