"""The vector store: hybrid (dense + BM25-style lexical) search over texts, for any plugin that
declares `uses = ("vectors",)` (`context.vectors`, with `context.embeddings`).

One interface, two engines:

- embedded, the default: Qdrant's own engine in-process (`qdrant-edge-py`), one shard per
  collection under `DATA_DIR/vectors/<service id>`. A directory is held by one process: the
  service locks it at start-up, and a second process is refused with a message that says so
  (several instances of one service share vectors only through `QDRANT_URL`).
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

import abc
import asyncio
import errno
import fcntl
import logging
import os
import re
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from .embeddings import Embedder
from .lexical import LexicalEncoder, SparseVector, Tokenizer

log = logging.getLogger("gateway.vectors")

Where = Mapping[str, "str | Sequence[str]"]
SearchMode = Literal["hybrid", "dense", "lexical"]
SEARCH_MODES: tuple[str, ...] = ("hybrid", "dense", "lexical")
DENSE = "dense"
LEXICAL = "lexical"
UPSERT_BATCH = 256
_COLLECTION = re.compile(r"^[a-z][a-z0-9_]{0,62}\Z")


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


def _conditions(where: Where | None) -> list[tuple[str, list[str] | str]] | None:
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
NEVER_INDEX_KB = 2_000_000_000
COMPACT_EVERY = 30.0  # seconds between checks for deleted points to reclaim


class EdgeEngine(Engine):
    """Qdrant's engine in-process (`qdrant_edge`): one shard directory per collection under
    `root`, which this process locks. Shard calls are blocking and run on one dedicated thread.

    Deleted and replaced points are reclaimed by the engine's vacuum (`optimize()`, which with
    indexing off only rewrites segments that are more than 20% deleted: under a second for
    25,000 points), checked after writes at most every `COMPACT_EVERY` seconds per shard."""

    kind = "edge"

    def __init__(self, root: Path):
        import qdrant_edge

        self.edge: Any = qdrant_edge
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.root / ".lock", "a+")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            self._lock_file.close()
            if error.errno in (errno.EAGAIN, errno.EACCES):
                raise VectorStoreUnavailable(
                    f"the vector directory {self.root} is in use by another process; each service "
                    f"needs its own directory, and several instances of one service need a Qdrant "
                    f"server (QDRANT_URL)") from None
            raise
        self._shards: dict[str, Any] = {}
        self._compacted: dict[str, float] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vectors")

    async def _run(self, function, *args):
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, partial(function, *args))
        except OSError as error:
            raise VectorStoreUnavailable(f"the vector store failed: {error}") from error

    def _compact_now_and_then(self, name: str, shard: Any) -> None:
        now = time.monotonic()
        if now - self._compacted.get(name, 0.0) < COMPACT_EVERY:
            return
        self._compacted[name] = now
        started = time.perf_counter()
        if shard.optimize():
            log.info("reclaimed deleted points of %s in %.2fs", name, time.perf_counter() - started)

    def _path(self, name: str) -> Path:
        return self.root / name

    def _shard(self, name: str) -> Any:
        shard = self._shards.get(name)
        if shard is None and (self._path(name) / "edge_config.json").exists():
            shard = self._shards[name] = self.edge.EdgeShard.load(str(self._path(name)))
        return shard

    def _filter(self, where: Where | None, ids: Sequence[str] = ()) -> Any:
        edge = self.edge
        conditions = _conditions(where)
        if conditions is None:
            return False
        must: list[Any] = [edge.FieldCondition(key, match=edge.MatchValue(value) if isinstance(value, str)
                                               else edge.MatchAny(value))
                           for key, value in conditions]
        if ids:
            must.append(edge.HasIdCondition({uuid.UUID(i) for i in ids}))
        return edge.Filter(must=must) if must else None

    async def exists(self, name: str) -> bool:
        return await self._run(lambda: self._shard(name) is not None)

    async def create(self, name: str, dimension: int, keyword_fields: Sequence[str]) -> bool:
        edge = self.edge

        def create() -> bool:
            if self._shard(name) is not None:
                return False
            # Built aside and renamed into place: a crash never leaves a half-made collection.
            staging = self.root / f".staging-{name}-{uuid.uuid4().hex[:8]}"
            config = edge.EdgeConfig(
                vectors={DENSE: edge.EdgeVectorParams(size=dimension, distance=edge.Distance.Cosine)},
                sparse_vectors={LEXICAL: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
                optimizers=edge.EdgeOptimizersConfig(indexing_threshold=NEVER_INDEX_KB))
            shard = edge.EdgeShard.create(str(staging), config)
            try:
                for key in keyword_fields:
                    shard.update(edge.UpdateOperation.create_field_index(key, edge.PayloadSchemaType.Keyword))
                shard.flush()
            finally:
                shard.close()
            os.replace(staging, self._path(name))
            self._shards[name] = edge.EdgeShard.load(str(self._path(name)))
            return True

        return await self._run(create)

    async def upsert(self, name: str, points: Sequence[StoredPoint]) -> None:
        edge = self.edge

        def upsert() -> None:
            shard = self._shard(name)
            if shard is None:
                raise KeyError(name)
            shard.update(edge.UpdateOperation.upsert_points([
                edge.Point(uuid.UUID(p.id),
                           {DENSE: p.dense, LEXICAL: edge.SparseVector(p.sparse.indices, p.sparse.values)},
                           p.payload) for p in points]))
            self._compact_now_and_then(name, shard)

        await self._run(upsert)

    async def delete(self, name: str, ids: Sequence[str], where: Where | None) -> None:
        edge = self.edge

        def delete() -> None:
            shard = self._shard(name)
            if shard is None:
                return
            if ids and where is None:
                shard.update(edge.UpdateOperation.delete_points([uuid.UUID(i) for i in ids]))
            else:
                selector = self._filter(where, ids)
                if selector is False:
                    return
                shard.update(edge.UpdateOperation.delete_points_by_filter(selector))
            self._compact_now_and_then(name, shard)

        await self._run(delete)

    async def query(self, name: str, dense: list[float] | None, sparse: SparseVector | None,
                    where: Where, limit: int, *, local_idf: bool = True) -> list[list[IndexHit]]:
        edge = self.edge

        def query() -> list[list[IndexHit]]:
            shard = self._shard(name)
            selector = self._filter(where)
            requests = []
            if dense is not None:
                requests.append(edge.QueryRequest(limit=limit, query=edge.Query.Nearest(dense, using=DENSE),
                                                  filter=selector or None, with_payload=True))
            if sparse is not None:
                scope = (edge.SearchParams(idf=edge.IdfParams(corpus=selector)) if local_idf and selector
                         else None)
                requests.append(edge.QueryRequest(limit=limit, query=edge.Query.Nearest(
                    edge.SparseVector(sparse.indices, sparse.values), using=LEXICAL), filter=selector or None,
                    with_payload=True, params=scope))
            if shard is None or selector is False:
                return [[] for _ in requests]
            batch = edge.QueryBatchRequest(requests)
            return [[IndexHit(str(p.id), float(p.score), dict(p.payload or {})) for p in ranking]
                    for ranking in shard.query_batch(batch)]

        return await self._run(query)

    async def count(self, name: str, where: Where | None) -> int:
        edge = self.edge

        def count() -> int:
            shard = self._shard(name)
            selector = self._filter(where)
            if shard is None or selector is False:
                return 0
            return int(shard.count(edge.CountRequest(exact=True, filter=selector)))

        return await self._run(count)

    async def drop(self, name: str) -> None:
        def drop() -> None:
            shard = self._shards.pop(name, None)
            if shard is not None:
                shard.close()
            shutil.rmtree(self._path(name), ignore_errors=True)

        await self._run(drop)

    async def close(self) -> None:
        def close() -> None:
            for shard in self._shards.values():
                shard.flush()
                shard.close()
            self._shards.clear()

        try:
            await self._run(close)
        finally:
            self._executor.shutdown(wait=True)
            self._lock_file.close()


class QdrantClientEngine(Engine):
    """`qdrant-client`: a server (`AsyncQdrantClient(url)`) or, with `path`, its pure-Python
    local mode, whose blocking calls run on a dedicated thread."""

    def __init__(self, *, url: str = "", api_key: str = "", path: Path | None = None, timeout: float = 10.0):
        from qdrant_client import AsyncQdrantClient, QdrantClient, models

        self.models: Any = models
        self._executor: ThreadPoolExecutor | None = None
        self.client: Any
        if url:
            self.kind = "server"
            self.client = AsyncQdrantClient(url=url, api_key=api_key or None, timeout=int(timeout),
                                            check_compatibility=False)
            self.where = url
        else:
            self.kind = "qdrant-local"
            assert path is not None
            path.mkdir(parents=True, exist_ok=True)
            try:
                self.client = QdrantClient(path=str(path))
            except RuntimeError as error:  # "already accessed by another instance"
                raise VectorStoreUnavailable(f"the vector directory {path}: {error}") from None
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vectors")
            self.where = str(path)

    async def _call(self, method: str, *args, **kwargs):
        from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

        try:
            if self._executor is None:
                return await getattr(self.client, method)(*args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(
                self._executor, partial(getattr(self.client, method), *args, **kwargs))
        except UnexpectedResponse as error:
            if error.status_code in (404, 409):
                raise
            raise VectorStoreUnavailable(f"the Qdrant server at {self.where} answered {error.status_code}: "
                                         f"{error.content[:200]!r}") from None
        except (ResponseHandlingException, OSError, TimeoutError) as error:
            raise self._unreachable(error) from None
        except Exception as error:
            if type(error).__module__.startswith(("httpx", "httpcore", "grpc")):
                raise self._unreachable(error) from None
            raise

    def _unreachable(self, error: BaseException) -> VectorStoreUnavailable:
        return VectorStoreUnavailable(f"the Qdrant server at {self.where} cannot be reached: {error}")

    def _filter(self, where: Where | None, ids: Sequence[str] = ()) -> Any:
        models = self.models
        conditions = _conditions(where)
        if conditions is None:
            return False
        must: list[Any] = [models.FieldCondition(key=key, match=models.MatchValue(value=value)
                                                 if isinstance(value, str) else models.MatchAny(any=value))
                           for key, value in conditions]
        if ids:
            must.append(models.HasIdCondition(has_id=list(ids)))
        return models.Filter(must=must) if must else None

    async def exists(self, name: str) -> bool:
        return bool(await self._call("collection_exists", name))

    async def create(self, name: str, dimension: int, keyword_fields: Sequence[str]) -> bool:
        from qdrant_client.http.exceptions import UnexpectedResponse

        models = self.models
        if await self.exists(name):
            return False
        try:
            await self._call("create_collection", name,
                             vectors_config={DENSE: models.VectorParams(size=dimension,
                                                                        distance=models.Distance.COSINE)},
                             sparse_vectors_config={LEXICAL: models.SparseVectorParams(
                                 modifier=models.Modifier.IDF)})
        except UnexpectedResponse as error:
            if error.status_code == 409:  # another instance created it in between
                return False
            raise VectorStoreUnavailable(f"creating {name} failed: {error}") from None
        except ValueError as error:  # local mode: "Collection ... already exists"
            if "already exists" in str(error):
                return False
            raise
        # Local mode has no payload indexes (it warns and filters by scanning).
        for key in keyword_fields if self.kind == "server" else ():
            await self._call("create_payload_index", name, field_name=key,
                             field_schema=models.PayloadSchemaType.KEYWORD, wait=True)
        return True

    async def upsert(self, name: str, points: Sequence[StoredPoint]) -> None:
        models = self.models
        await self._call("upsert", name, wait=True, points=[
            models.PointStruct(id=p.id, payload=p.payload, vector={
                DENSE: p.dense,
                LEXICAL: models.SparseVector(indices=p.sparse.indices, values=p.sparse.values)})
            for p in points])

    async def delete(self, name: str, ids: Sequence[str], where: Where | None) -> None:
        from qdrant_client.http.exceptions import UnexpectedResponse

        models = self.models
        if ids and where is None:
            selector: Any = models.PointIdsList(points=list(ids))
        else:
            flt = self._filter(where, ids)
            if flt is False:
                return
            selector = models.FilterSelector(filter=flt)
        try:
            await self._call("delete", name, points_selector=selector, wait=True)
        except UnexpectedResponse as error:
            if error.status_code != 404:
                raise
        except ValueError as error:  # local mode: "Collection ... not found"
            if "not found" not in str(error):
                raise

    async def query(self, name: str, dense: list[float] | None, sparse: SparseVector | None,
                    where: Where, limit: int, *, local_idf: bool = True) -> list[list[IndexHit]]:
        from qdrant_client.http.exceptions import UnexpectedResponse

        models = self.models
        flt = self._filter(where)
        requests = []
        if dense is not None:
            requests.append(models.QueryRequest(query=dense, using=DENSE, filter=flt or None, limit=limit,
                                                with_payload=True))
        if sparse is not None:
            terms = models.SparseVector(indices=sparse.indices, values=sparse.values)
            scope = models.SearchParams(idf=models.IdfCorpusParams(corpus=flt)) if local_idf and flt else None
            requests.append(models.QueryRequest(query=terms, using=LEXICAL, filter=flt or None, limit=limit,
                                                with_payload=True, params=scope))
        if flt is False or not requests:
            return [[] for _ in requests]
        try:
            answers = await self._call("query_batch_points", name, requests=requests)
        except UnexpectedResponse as error:
            if error.status_code == 404:
                return [[] for _ in requests]
            raise
        except ValueError as error:
            if "not found" in str(error):
                return [[] for _ in requests]
            raise
        return [[IndexHit(str(p.id), float(p.score), dict(p.payload or {})) for p in answer.points]
                for answer in answers]

    async def count(self, name: str, where: Where | None) -> int:
        from qdrant_client.http.exceptions import UnexpectedResponse

        flt = self._filter(where)
        if flt is False:
            return 0
        try:
            return int((await self._call("count", name, count_filter=flt, exact=True)).count)
        except UnexpectedResponse as error:
            if error.status_code == 404:
                return 0
            raise
        except ValueError as error:
            if "not found" in str(error):
                return 0
            raise

    async def drop(self, name: str) -> None:
        await self._call("delete_collection", name)

    async def close(self) -> None:
        try:
            await self._call("close")
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)


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

    def warm_up(self) -> None:
        """Load the tokenizer's dictionary in the background, so the first Chinese text does
        not wait for it (about a second, once per process)."""
        self._tokenizer_thread.submit(self.encoder.tokenizer.warm_up)

    def physical_name(self, collection: str) -> str:
        """`<collection>__<model>_<dimension>_<tokenizer version>`."""
        if not _COLLECTION.match(collection):
            raise ValueError(f"invalid collection name {collection!r} (lower-case letters, digits, _)")
        model = f"{_slug(self.embedder.model_id)}_{self.embedder.dimension}"
        return f"{collection}__{model}_{self.encoder.version}"

    def _documents(self, texts: list[str]) -> list[SparseVector]:
        return [self.encoder.document(text) for text in texts]

    async def _lexical(self, function, text):
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


def vectors_directory(config, service_id: str) -> Path:
    """`[vectors] path`, else `DATA_DIR/vectors/<service id>`: one directory per service."""
    configured = str(config.get("vectors.path") or "")
    return Path(configured).expanduser().resolve() if configured else config.data_dir / "vectors" / service_id


def create_engine(config, service_id: str) -> Engine:
    settings = config.section("vectors")
    if settings.get("shared_socket"):  # one of several workers: the parent holds the store
        from .shared_vectors import SharedEngine

        return SharedEngine(str(settings["shared_socket"]))
    url = str(settings.get("qdrant_url") or "")
    if url:
        return QdrantClientEngine(url=url, api_key=str(settings.get("qdrant_api_key") or ""),
                                  timeout=float(settings.get("timeout") or 10))
    engine = str(settings.get("engine") or "edge")
    directory = vectors_directory(config, service_id)
    if engine == "edge":
        return EdgeEngine(directory)
    if engine == "qdrant-local":
        return QdrantClientEngine(path=directory)
    raise ValueError(f"[vectors] engine: {engine!r} is not one of edge, qdrant-local")


async def open_vector_index(config, service_id: str, embedder: Embedder) -> VectorIndex:
    """The service's index as `[vectors]` describes it; the engine is opened off the event loop
    (the embedded one reads its shards' directory). A bad setting raises ValueError naming it."""
    settings = config.section("vectors")
    chinese = str(settings.get("chinese_tokens") or "jieba")
    fusion = str(settings.get("fusion") or "convex")
    if fusion not in FUSIONS:
        raise ValueError(f"[vectors] fusion: {fusion!r} is not one of {', '.join(FUSIONS)}")
    idf_scope = str(settings.get("idf_scope") or "search")
    if idf_scope not in ("search", "collection"):
        raise ValueError(f"[vectors] idf_scope: {idf_scope!r} is not one of search, collection")
    encoder = LexicalEncoder(Tokenizer(chinese),  # type: ignore[arg-type]  # Tokenizer checks it
                             k1=float(settings.get("bm25_k1") or 1.2), b=float(settings.get("bm25_b", 0.75)),
                             avg_len=float(settings.get("bm25_avg_len") or 120))
    engine = await asyncio.get_running_loop().run_in_executor(None, create_engine, config, service_id)
    index = VectorIndex(engine, embedder, encoder, fusion=fusion, rrf_k=float(settings.get("rrf_k") or 60),
                        dense_weight=float(settings.get("dense_weight", 1.0)),
                        lexical_weight=float(settings.get("lexical_weight", 1.0)),
                        candidates=int(settings.get("candidates") or 50),
                        local_idf=idf_scope == "search")
    return index
