"""The embedded vector store shared by the workers of one service (`gateway serve --workers N`).

The embedded engines keep their shards in one directory that one process may hold
(`gateway.vectors`). With several workers the parent holds it, opened at the first call, and
answers the workers' engine calls over a unix socket only the owner may open; each worker's
`VectorIndex` works on a `SharedEngine`, so embedding, tokenising and fusion stay in the
workers and only stored points, filters and rankings cross the socket (JSON). The same socket
answers the workers' offline embeddings (gateway/shared_embeddings.py)."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import aiohttp
import orjson
from aiohttp import web

from .config import Config
from .lexical import SparseVector
from .local_engines import create_local_engine
from .parent_socket import ParentSocket, ParentUnreachable
from .vector_store import Engine, IndexHit, StoredPoint, VectorStoreUnavailable, Where

log = logging.getLogger("gateway.shared_vectors")

SOCKET_SETTING = "vectors.shared_socket"


def hosts_vectors(config: Config) -> bool:
    """Whether the parent of several workers must hold the vector store: the embedded engines
    lock their directory; a Qdrant server (QDRANT_URL) is shared by itself."""
    return not config.settings.vectors.qdrant_url


def _point(data: dict) -> StoredPoint:
    return StoredPoint(data["id"], data["dense"], SparseVector(*data["sparse"]), data["payload"])


def _sparse(vector: SparseVector | None) -> list | None:
    return None if vector is None else [vector.indices, vector.values]


class VectorsHost:
    """In the parent: the engine, and the socket its workers call it through."""

    def __init__(self, config: Config, service_id: str, socket_path: Path,
                 also_serve: Sequence[Callable[[web.Application], None]] = ()):
        """`also_serve`: what else adds routes to the socket (the workers' embeddings)."""
        self.config, self.service_id, self.socket_path = config, service_id, socket_path
        self.also_serve = also_serve
        self._engine: Engine | None = None
        self._opening = asyncio.Lock()
        self._runner: web.AppRunner | None = None

    async def engine(self) -> Engine:
        async with self._opening:
            if self._engine is None:
                self._engine = await asyncio.get_running_loop().run_in_executor(
                    None, create_local_engine, self.config, self.service_id)
            return self._engine

    async def call(self, request: web.Request) -> web.Response:
        arguments = orjson.loads(await request.read())
        engine = await self.engine()
        name = arguments["name"]
        method = request.match_info["method"]
        result: Any
        try:
            if method == "exists":
                result = await engine.exists(name)
            elif method == "create":
                result = await engine.create(name, arguments["dimension"], arguments["keyword_fields"])
            elif method == "upsert":
                await engine.upsert(name, [_point(point) for point in arguments["points"]])
                result = None
            elif method == "delete":
                await engine.delete(name, arguments["ids"], arguments["where"])
                result = None
            elif method == "query":
                sparse = arguments["sparse"]
                rankings = await engine.query(name, arguments["dense"], SparseVector(*sparse) if sparse else None,
                                              arguments["where"], arguments["limit"], local_idf=arguments["local_idf"])
                result = [[[hit.id, hit.score, hit.payload] for hit in ranking] for ranking in rankings]
            elif method == "count":
                result = await engine.count(name, arguments["where"])
            elif method == "drop":
                await engine.drop(name)
                result = None
            else:
                raise web.HTTPNotFound()
        except VectorStoreUnavailable as error:
            return web.json_response({"error": str(error)}, status=503)
        except ValueError as error:
            return web.json_response({"error": str(error)}, status=400)
        return web.Response(body=orjson.dumps({"result": result}), content_type="application/json")

    async def start(self) -> None:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        for add_routes in self.also_serve:
            add_routes(app)
        app.router.add_post("/{method}", self.call)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        site = web.UnixSite(self._runner, str(self.socket_path))
        await site.start()
        os.chmod(self.socket_path, 0o600)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._engine is not None:
            await self._engine.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()


class SharedEngine(Engine):
    """In a worker: the parent's engine, called over its socket."""

    kind = "shared"

    def __init__(self, socket_path: str, *, taking_over: bool = False):
        """`taking_over`: the parent is a rolling restart's replacement, whose engine may wait for
        the process it replaces (gateway/edge_engine.py); said until a call has been answered."""
        self.socket_path = socket_path
        self._parent = ParentSocket(socket_path, "vectors", aiohttp.ClientTimeout(total=120))
        self._taking_over = taking_over

    @property
    def taking_over(self) -> bool:
        return self._taking_over

    async def _call(self, method: str, **arguments: object) -> Any:
        try:
            status, body = await self._parent.post(method, arguments)
        except ParentUnreachable as error:
            raise VectorStoreUnavailable(f"the vector store of this service's parent process cannot be "
                                         f"reached: {error}") from None
        if status == 503:
            raise VectorStoreUnavailable(body["error"])
        if status == 400:
            raise ValueError(body["error"])
        if status != 200:
            raise VectorStoreUnavailable(f"the vector store answered HTTP {status}")
        self._taking_over = False
        return body["result"]

    async def exists(self, name: str) -> bool:
        return bool(await self._call("exists", name=name))

    async def create(self, name: str, dimension: int, keyword_fields: Sequence[str]) -> bool:
        return bool(await self._call("create", name=name, dimension=dimension, keyword_fields=list(keyword_fields)))

    async def upsert(self, name: str, points: Sequence[StoredPoint]) -> None:
        await self._call("upsert", name=name, points=[
            {"id": point.id, "dense": point.dense, "sparse": _sparse(point.sparse), "payload": point.payload}
            for point in points])

    async def delete(self, name: str, ids: Sequence[str], where: Where | None) -> None:
        await self._call("delete", name=name, ids=list(ids), where=_where(where))

    async def query(self, name: str, dense: list[float] | None, sparse: SparseVector | None,
                    where: Where, limit: int, *, local_idf: bool = True) -> list[list[IndexHit]]:
        rankings = await self._call("query", name=name, dense=dense, sparse=_sparse(sparse), where=_where(where),
                                    limit=limit, local_idf=local_idf)
        return [[IndexHit(*hit) for hit in ranking] for ranking in rankings]

    async def count(self, name: str, where: Where | None) -> int:
        return int(await self._call("count", name=name, where=_where(where)))

    async def drop(self, name: str) -> None:
        await self._call("drop", name=name)

    async def close(self) -> None:
        await self._parent.close()


def _where(where: Where | None) -> dict | None:
    if where is None:
        return None
    return {key: value if isinstance(value, str) else list(value) for key, value in where.items()}
