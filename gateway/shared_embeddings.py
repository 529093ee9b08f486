"""The offline embedding model shared by the workers of one service (`gateway serve --workers N`,
issues 43 and 44).

Each worker loaded its own copy of multilingual-e5-small (72 MB once in use: the gateway's memory
rose by a copy's worth when a second worker first searched). Where the parent hosts the vector
store for its workers (`hosts_vectors`), it answers their offline embeddings too, on the same
socket only the owner may open: one `LocalE5Embedder` in the parent, its model loaded on first use
and released when idle (gateway.idle) as in any process, computing on its own threads (passages
on one, queries on another), never on the event loop. A worker's `SharedEmbedder`
(gateway/embeddings.py) sends its texts a batch (`[embeddings] batch_size`) per call; only texts
and vectors cross the socket (JSON).

A provider (`[embeddings] base_url`) is still called by each worker itself (`create_embedder`);
a service of one process keeps its model in its own process."""
from __future__ import annotations

import logging
from typing import Awaitable

import orjson
from aiohttp import web

from .config import Config
from .embeddings import local_embedder

log = logging.getLogger("gateway.shared_embeddings")


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
    async def _answer(embedding: Awaitable[object]) -> web.Response:
        try:
            vectors = await embedding
        except Exception as error:  # noqa: BLE001 - the worker's caller gets EmbeddingError, as in-process
            log.exception("embedding for a worker failed")
            return web.json_response({"error": f"the embedding model failed: {error!r}"}, status=503)
        return web.Response(body=orjson.dumps({"result": vectors}), content_type="application/json")

    async def close(self) -> None:
        await self.embedder.close()
