"""The vector store: hybrid (dense + BM25-style lexical) search over texts, for any plugin that
declares `uses = ("vectors",)` (`context.vectors`, with `context.embeddings`).

One interface, two engines:

- embedded, the default: Qdrant's own engine in-process (`qdrant-edge-py`), one shard per
  collection under `DATA_DIR/vectors/<service id>`. A directory is held by one process: the
  service locks it at start-up, and a second process is refused with a message that says so
  (several instances of one service share vectors only through `QDRANT_URL`); a rolling
  restart's replacement instead waits for the process it replaces to let go of it.
- `QDRANT_URL`: a Qdrant server or cluster through `qdrant-client` (`AsyncQdrantClient`).

`qdrant-client`'s own local mode (pure Python) can be chosen too (`[vectors] engine =
"qdrant-local"`); it is far too slow for real use (see docs/embeddings-and-vectors.md) and is
kept because it runs the server path's code without a server.

Each point carries a dense vector (`context.embeddings`) and a sparse one (`gateway.lexical`:
hashed terms with BM25 weights; the engine applies IDF). Hybrid search runs both searches in
one engine call and fuses the two rankings here (weighted reciprocal rank fusion), so both
engines rank alike. A collection's physical name includes the embedding model, its dimension
and the tokenizer's version: vectors of two models never meet, and `ensure` says when a
collection had to be created so the caller re-indexes from its own records.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Coroutine, Literal, Sequence, TypeVar

from .config import Config
from .embeddings import Embedder
from .lexical import LexicalEncoder, SparseVector, Tokenizer

from .local_engines import create_local_engine
from .shared_vectors import SharedEngine
from .vector_store import Engine, IndexHit, IndexItem, SEARCH_MODES, SearchMode, StoredPoint, UPSERT_BATCH, Where, COLLECTION_NAME

log = logging.getLogger("gateway.vectors")
# What the tokenizer thread is given (a text, or a batch of them) and what it gives back.
Source = TypeVar("Source")
Encoded = TypeVar("Encoded")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:80]


FUSIONS = ("convex", "rrf", "dbsf")


def fuse(rankings: Sequence[Sequence[IndexHit]], weights: Sequence[float], k: float,
         limit: int) -> list[IndexHit]:
    """Weighted reciprocal rank fusion: score = Σ weight / (k + rank), rank from 1."""
    scores: dict[str, float] = {}
    hits: dict[str, IndexHit] = {}
    for ranking, weight in zip(rankings, weights):
        for rank, hit in enumerate(ranking, start=1):
            scores[hit.id] = scores.get(hit.id, 0.0) + weight / (k + rank)
            hits.setdefault(hit.id, hit)
    return _best(scores, hits, limit)


def fuse_scores(rankings: Sequence[Sequence[IndexHit]], weights: Sequence[float], limit: int, *,
                method: Literal["dbsf", "convex"] = "convex") -> list[IndexHit]:
    """Score fusion: each ranking's scores scaled to [0, 1], then the weighted mean,
    Σ weight · scaled / Σ weight (a point missing from a ranking scores 0 there). `convex`
    scales by the ranking's own minimum and maximum (all scores equal: 1), `dbsf` by mean ± 3
    standard deviations (Qdrant's distribution-based score fusion)."""
    scores: dict[str, float] = {}
    hits: dict[str, IndexHit] = {}
    total = sum(weight for ranking, weight in zip(rankings, weights) if ranking) or 1.0
    for ranking, weight in zip(rankings, weights):
        if not ranking:
            continue
        values = [hit.score for hit in ranking]
        if method == "dbsf":
            mean = sum(values) / len(values)
            spread = 3 * (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
            low, high = mean - spread, mean + spread
        else:
            low, high = min(values), max(values)
        for hit in ranking:
            scaled = 1.0 if high <= low else min(1.0, max(0.0, (hit.score - low) / (high - low)))
            scores[hit.id] = scores.get(hit.id, 0.0) + weight * scaled / total
            hits.setdefault(hit.id, hit)
    return _best(scores, hits, limit)


def _best(scores: dict[str, float], hits: dict[str, IndexHit], limit: int) -> list[IndexHit]:
    best = sorted(scores, key=lambda point: scores[point], reverse=True)[:limit]
    return [IndexHit(point, scores[point], hits[point].payload) for point in best]


class VectorIndex:
    """Hybrid search over texts in named collections (`ensure` them first). Blocking work (the
    tokenizer, the embedded engine, the embedding model) runs on threads, never on the loop."""

    def __init__(self, engine: Engine, embedder: Embedder, encoder: LexicalEncoder | None = None, *,
                 fusion: str = "convex", rrf_k: float = 60.0, dense_weight: float = 1.0,
                 lexical_weight: float = 1.0, candidates: int = 50, local_idf: bool = True):
        self.engine = engine
        self.embedder = embedder
        self.encoder = encoder or LexicalEncoder()
        if fusion not in FUSIONS:
            raise ValueError(f"[vectors] fusion: {fusion!r} is not one of {', '.join(FUSIONS)}")
        self.fusion = fusion
        self.rrf_k = rrf_k
        self.dense_weight = dense_weight
        self.lexical_weight = lexical_weight
        self.candidates = candidates
        # BM25's IDF over the points a search may return (e.g. one user's bases), not the whole
        # collection: another user's documents never change a user's scores.
        self.local_idf = local_idf
        self._tokenizer_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lexical")
        self._ready: dict[str, str] = {}  # collection -> physical name known to exist
        self._keyword_fields: dict[str, tuple[str, ...]] = {}
        self._unreported: set[str] = set()  # created by an upsert, not yet reported by ensure()

    @property
    def taking_over(self) -> bool:
        """Whether calls now wait for the process this one replaces to let go of the store:
        start-up must not await one (the replaced process stops only once this one serves)."""
        return self.engine.taking_over

    @contextlib.asynccontextmanager
    async def started(self, start: Callable[[], Coroutine[Any, Any, None]], name: str) -> AsyncIterator[None]:
        """A plugin's lifespan step that prepares its collections: `start()` awaited before the
        service serves, or, while the store is being taken over, run meanwhile (the replaced
        process stops only once this one serves) and cancelled when the lifespan ends."""
        if not self.taking_over:
            await start()
            yield
            return
        starting = asyncio.create_task(start(), name=name)
        try:
            yield
        finally:
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)

    def warm_up(self) -> None:
        """Load the tokenizer's dictionary in the background, so the first Chinese text does
        not wait for it (about a second, once per process)."""
        self._tokenizer_thread.submit(self.encoder.tokenizer.warm_up)

    def physical_name(self, collection: str) -> str:
        """`<collection>__<model>_<dimension>_<tokenizer version>`."""
        if not COLLECTION_NAME.match(collection):
            raise ValueError(f"invalid collection name {collection!r} (lower-case letters, digits, _)")
        model = f"{_slug(self.embedder.model_id)}_{self.embedder.dimension}"
        return f"{collection}__{model}_{self.encoder.version}"

    def _documents(self, texts: list[str]) -> list[SparseVector]:
        return [self.encoder.document(text) for text in texts]

    async def _lexical(self, function: Callable[[Source], Encoded], text: Source) -> Encoded:
        return await asyncio.get_running_loop().run_in_executor(self._tokenizer_thread, function, text)

    async def ensure(self, collection: str, *, keyword_fields: Sequence[str] = ()) -> bool:
        """Create the collection for the current embedding model when missing, with keyword
        indexes on `keyword_fields`; True when it was created now: its records must be indexed
        again (a new collection, or a new model: the old model's vectors stay where they were).
        Also True, once, when an `upsert` before any `ensure` had to create it."""
        await self.embedder.prepare()
        name = self.physical_name(collection)
        self._keyword_fields[collection] = tuple(keyword_fields)
        created = name in self._unreported
        self._unreported.discard(name)
        if self._ready.get(collection) == name:
            return created
        if not await self.engine.exists(name):
            if await self.engine.create(name, self.embedder.dimension, keyword_fields):
                created = True
                log.info("created the vector collection %s (%s)", name, self.engine.kind)
        self._ready[collection] = name
        return created

    async def _existing(self, collection: str) -> str | None:
        """The physical name when the collection exists; searching never creates one (its
        creation would go unnoticed by the caller's `ensure`)."""
        await self.embedder.prepare()
        name = self.physical_name(collection)
        if self._ready.get(collection) == name:
            return name
        if await self.engine.exists(name):
            self._ready[collection] = name
            return name
        return None

    async def _for_writing(self, collection: str) -> str:
        name = await self._existing(collection)
        if name is None:
            name = self.physical_name(collection)
            fields = self._keyword_fields.get(collection, ())
            if await self.engine.create(name, self.embedder.dimension, fields):
                self._unreported.add(name)  # the next ensure() says it was created
            self._ready[collection] = name
        return name

    async def upsert(self, collection: str, items: Sequence[IndexItem]) -> None:
        """Index the items (replacing points with the same ids); searchable once this returns."""
        if not items:
            return
        for item in items:
            uuid.UUID(item.id)  # a clear ValueError before any work
        name = await self._for_writing(collection)
        for start in range(0, len(items), UPSERT_BATCH):
            batch = items[start:start + UPSERT_BATCH]
            texts = [item.text for item in batch]
            missing = [item.text for item in batch if item.dense is None]
            embedded, sparse = await asyncio.gather(self.embedder.embed_passages(missing),
                                                    self._lexical(self._documents, texts))
            fresh = iter(embedded)
            dense = [item.dense if item.dense is not None else next(fresh) for item in batch]
            await self.engine.upsert(name, [StoredPoint(item.id, vector, terms, dict(item.payload))
                                            for item, vector, terms in zip(batch, dense, sparse)])

    async def delete(self, collection: str, *, ids: Sequence[str] = (),
                     where: Where | None = None) -> None:
        """Remove the points with these ids, or those matching `where` (both: those ids that
        match). Gone from search once this returns."""
        if not ids and not where:
            raise ValueError("delete needs ids or a where filter (refusing to empty the collection)")
        for point in ids:
            uuid.UUID(point)
        name = await self._existing(collection)
        if name is not None:
            await self.engine.delete(name, list(ids), where)

    async def search(self, collection: str, query: str, *, where: Where, limit: int,
                     mode: SearchMode = "hybrid") -> list[IndexHit]:
        """The best `limit` points matching `where` (key -> value, or a list of values, any of
        which matches; all keys must match). Scores: cosine (dense), BM25 (lexical), fused RRF
        (hybrid); only their order is meaningful across modes."""
        if mode not in SEARCH_MODES:
            raise ValueError(f"unknown search mode {mode!r}")
        limit = max(1, int(limit))
        name = await self._existing(collection)
        if name is None:
            return []
        want_dense, want_lexical = mode != "lexical", mode != "dense"
        dense_task = self.embedder.embed_query(query) if want_dense else _none()
        sparse_task = self._lexical(self.encoder.query, query) if want_lexical else _none()
        dense, sparse = await asyncio.gather(dense_task, sparse_task)
        if want_lexical and not sparse:
            sparse = None  # nothing but stop words: the dense half alone
            if mode == "lexical":
                return []
        depth = limit if mode != "hybrid" else max(limit, self.candidates)
        rankings = await self.engine.query(name, dense, sparse, where, depth, local_idf=self.local_idf)
        if mode != "hybrid":
            return rankings[0][:limit]
        weights = [self.dense_weight] + ([self.lexical_weight] if sparse is not None else [])
        if self.fusion == "rrf":
            return fuse(rankings, weights, self.rrf_k, limit)
        return fuse_scores(rankings, weights, limit, method="dbsf" if self.fusion == "dbsf" else "convex")

    async def nearest(self, collection: str, vector: list[float], *, where: Where, limit: int) -> list[IndexHit]:
        """The best `limit` points matching `where` by cosine similarity to `vector` (one the
        caller embedded: a passage's, to compare documents with documents), best first."""
        name = await self._existing(collection)
        if name is None:
            return []
        rankings = await self.engine.query(name, vector, None, where, max(1, int(limit)), local_idf=self.local_idf)
        return rankings[0]

    async def count(self, collection: str, where: Where | None = None) -> int:
        name = await self._existing(collection)
        return 0 if name is None else await self.engine.count(name, where)

    async def close(self) -> None:
        try:
            await self.engine.close()
        finally:
            await asyncio.to_thread(self._tokenizer_thread.shutdown, wait=True, cancel_futures=True)


async def _none() -> None:
    return None



def create_engine(config: Config, service_id: str) -> Engine:
    """The service's engine: the parent's, through its socket, for one of several workers;
    else its own."""
    shared_socket = config.settings.vectors.shared_socket
    if shared_socket:  # one of several workers: the parent holds the store
        return SharedEngine(shared_socket, taking_over=config.settings.vectors.take_over)
    return create_local_engine(config, service_id)


async def open_vector_index(config: Config, service_id: str, embedder: Embedder) -> VectorIndex:
    """The service's index as `[vectors]` describes it; the engine is opened off the event loop
    (the embedded one reads its shards' directory). A bad setting raises ValueError naming it."""
    settings = config.settings.vectors
    if settings.fusion not in FUSIONS:
        raise ValueError(f"[vectors] fusion: {settings.fusion!r} is not one of {', '.join(FUSIONS)}")
    if settings.idf_scope not in ("search", "collection"):
        raise ValueError(f"[vectors] idf_scope: {settings.idf_scope!r} is not one of search, collection")
    chinese = settings.chinese_tokens
    encoder = LexicalEncoder(Tokenizer(chinese),  # type: ignore[arg-type]  # Tokenizer checks it
                             k1=settings.bm25_k1, b=settings.bm25_b, avg_len=settings.bm25_avg_len)
    engine = await asyncio.get_running_loop().run_in_executor(None, create_engine, config, service_id)
    index = VectorIndex(engine, embedder, encoder, fusion=settings.fusion, rrf_k=settings.rrf_k,
                        dense_weight=settings.dense_weight, lexical_weight=settings.lexical_weight,
                        candidates=settings.candidates, local_idf=settings.idf_scope == "search")
    return index

