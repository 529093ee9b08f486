"""A Qdrant server or cluster through `qdrant-client` (`QDRANT_URL`), or `qdrant-client`'s
pure-Python local mode (`[vectors] engine = "qdrant-local"`)."""
from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Sequence

from .lexical import SparseVector
from .vector_store import DENSE, Engine, IndexHit, LEXICAL, StoredPoint, VectorStoreUnavailable, Where, conditions_of


log = logging.getLogger("gateway.vectors")

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

    # Any: the client's method named `method`, called as given (qdrant-client ships no types here).
    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
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
        conditions = conditions_of(where)
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


