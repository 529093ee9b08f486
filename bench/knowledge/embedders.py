"""Embedders for the bench that stand in front of the real one (gateway.embeddings): vectors of
texts already embedded come from the cache, so a rerun costs no model time, and the search
timing can exclude the query's embedding (timed on its own)."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from gateway.embeddings import Embedder

from .cache import EmbeddingCache, text_key


class CachedEmbedder(Embedder):
    """The real embedder's vectors, computed once per text and model and kept on disk."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.passages = EmbeddingCache(inner.model_id, "passage")
        self.queries = EmbeddingCache(inner.model_id, "query")

    async def prepare(self) -> None:
        await self.inner.prepare()
        self.model_id, self.dimension = self.inner.model_id, self.inner.dimension

    async def _through(self, cache: EmbeddingCache, texts: Sequence[str], compute) -> list[list[float]]:
        missing = cache.missing(texts)
        if missing:
            vectors = np.asarray(await compute(missing), dtype=np.float32)
            cache._store(missing, vectors)
        return [cache.vectors[text_key(text)].tolist() for text in texts]

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._through(self.passages, texts, self.inner.embed_passages)

    async def embed_query(self, text: str) -> list[float]:
        async def one(texts: list[str]) -> list[list[float]]:
            return [await self.inner.embed_query(texts[0])]

        return (await self._through(self.queries, [text], one))[0]

    async def close(self) -> None:
        await self.inner.close()


class FixedEmbedder(Embedder):
    """Vectors given in advance by text: the 20,000 chunks of the speed run (derived from their
    source passages' real vectors) and the real queries' vectors."""

    def __init__(
        self,
        model_id: str,
        dimension: int,
        passages: Mapping[str, np.ndarray],
        queries: Mapping[str, np.ndarray],
    ) -> None:
        self.model_id, self.dimension = model_id, dimension
        self._passages, self._queries = passages, queries

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._passages[text].tolist() for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self._queries[text].tolist()
