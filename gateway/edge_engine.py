"""The embedded engine: Qdrant's own engine in-process (`qdrant-edge-py`), one shard per
collection under `DATA_DIR/vectors/<service id>`, the directory locked by one process. A rolling
restart's replacement takes the directory over: its calls wait until the process it replaces
has closed its engine (docs/embeddings-and-vectors.md, "One process per directory")."""
from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar, TypeVarTuple, Unpack

from .lexical import SparseVector
from .vector_store import DENSE, Engine, IndexHit, LEXICAL, StoredPoint, VectorStoreUnavailable, Where, conditions_of


log = logging.getLogger("gateway.vectors")
Result = TypeVar("Result")
Arguments = TypeVarTuple("Arguments")

NEVER_INDEX_KB = 2_000_000_000
COMPACT_EVERY = 30.0  # seconds between checks for deleted points to reclaim
LOCK_POLL_SECONDS = 0.05  # how often a replacement tries the lock the process it replaces holds


class EdgeEngine(Engine):
    """Qdrant's engine in-process (`qdrant_edge`): one shard directory per collection under
    `root`, which this process locks. Shard calls are blocking and run on one dedicated thread,
    each after the lock is held (a replacement's first task on that thread waits for it).

    Deleted and replaced points are reclaimed by the engine's vacuum (`optimize()`, which with
    indexing off only rewrites segments that are more than 20% deleted: under a second for
    25,000 points), checked after writes at most every `COMPACT_EVERY` seconds per shard."""

    kind = "edge"

    def __init__(self, root: Path, *, take_over_within: float = 0.0):
        """`take_over_within`: seconds this process (a rolling restart's replacement) waits for
        the process it replaces to let go of the directory. 0: a directory held now is refused
        at once, as a second process on one directory is a mistake."""
        import qdrant_edge

        self.edge: Any = qdrant_edge
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.root / ".lock", "a+")
        try:
            self._held = self._try_lock()
            if not self._held and take_over_within <= 0:
                raise self._in_use()
        except BaseException:
            self._lock_file.close()
            raise
        self._shards: dict[str, Any] = {}
        self._compacted: dict[str, float] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vectors")
        self._closing = self._gave_up = False
        self._waited_since = time.monotonic()
        self._wait_until = self._waited_since + take_over_within
        if not self._held:
            log.info("the vector directory %s is held by another process (the one this replaces); "
                     "vector calls wait up to %.0f s for it to stop", self.root, take_over_within)
            # The first task on the engine's one thread: every call queues behind it.
            self._executor.submit(self._hold_lock)

    def _try_lock(self) -> bool:
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise

    def _in_use(self, waited: float = 0.0) -> VectorStoreUnavailable:
        held = f"is still in use by another process after {waited:.0f} s" if waited else "is in use by another process"
        return VectorStoreUnavailable(
            f"the vector directory {self.root} {held}; each service needs its own directory, and "
            f"several instances of one service need a Qdrant server (QDRANT_URL)")

    def _hold_lock(self) -> None:
        """On the engine's thread, before any call touches a shard: the directory's lock, waited
        for until `take_over_within` has passed; after that each call tries once."""
        while not self._held:
            if self._closing:
                raise VectorStoreUnavailable(f"the vector store {self.root} is closed")
            if self._try_lock():
                self._held = True
                log.info("the vector directory %s taken over after %.2f s", self.root,
                         time.monotonic() - self._waited_since)
                return
            if time.monotonic() >= self._wait_until:
                error = self._in_use(time.monotonic() - self._waited_since)
                if not self._gave_up:  # said once; each later call tries the lock again
                    self._gave_up = True
                    log.error("%s", error)
                raise error
            time.sleep(LOCK_POLL_SECONDS)

    @property
    def taking_over(self) -> bool:
        """Whether calls now wait for the process this one replaces to let go of the directory."""
        return not self._held and not self._closing and time.monotonic() < self._wait_until

    async def _run(self, function: Callable[[Unpack[Arguments]], Result], *args: Unpack[Arguments]) -> Result:
        def locked() -> Result:
            self._hold_lock()
            return function(*args)

        return await self._on_thread(locked)

    async def _on_thread(self, function: Callable[[], Result]) -> Result:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, function)
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
        conditions = conditions_of(where)
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
        """Everything flushed, then the directory's lock let go (what a replacement waits for)."""
        def close() -> None:
            for shard in self._shards.values():
                shard.flush()
                shard.close()
            self._shards.clear()

        self._closing = True  # a wait for the lock still queued gives up
        try:
            await self._on_thread(close)  # not behind the lock: what was never held has nothing to flush
        finally:
            self._executor.shutdown(wait=True)
            self._lock_file.close()
