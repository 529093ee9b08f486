"""Latency of `VectorIndex.search` as the services run it (the query tokenised on its thread, one
batched engine call for the dense and the lexical ranking, fusion in Python), the query's
embedding excluded: the embedder here hands over a precomputed vector at once.

A base of N chunks (default 20,000) of one user plus N/4 chunks of another user; every search
filters on {user_id, kb_id}. Text is synthetic (Zipf-distributed over 30,000 words) so the
tokenizer and the BM25 weights do real work; vectors are random unit vectors (latency does not
depend on what they mean).

    python -m bench.vectors.search [edge|qdrant-local] [N]
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from gateway.embeddings import Embedder
from gateway.edge_engine import EdgeEngine
from gateway.qdrant_engine import QdrantClientEngine
from gateway.vector_store import IndexItem
from gateway.vectors import VectorIndex

DIMENSION = 384
VOCABULARY = [f"w{i}x" for i in range(30_000)]


class PrecomputedEmbedder(Embedder):
    """Random unit vectors for passages; for a query, the vector set in `next_query`."""

    model_id = "bench/random"
    dimension = DIMENSION

    def __init__(self, random: np.random.Generator):
        self.random = random
        self.next_query: list[float] = []

    async def embed_passages(self, texts):
        vectors = self.random.standard_normal((len(texts), DIMENSION)).astype(np.float32)
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).tolist()

    async def embed_query(self, text):
        return self.next_query


def percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[max(0, int(len(sorted_values) * fraction) - 1)]


async def main(kind: str, chunks: int) -> None:
    random = np.random.default_rng(7)
    embedder = PrecomputedEmbedder(random)
    directory = Path(tempfile.mkdtemp(prefix="bench-vectors-"))
    engine = EdgeEngine(directory) if kind == "edge" else QdrantClientEngine(path=directory)
    index = VectorIndex(engine, embedder)
    await index.ensure("kb", keyword_fields=["user_id", "kb_id"])

    others = chunks // 4
    zipf = 1 / np.arange(1, len(VOCABULARY) + 1)
    words = random.choice(len(VOCABULARY), size=(chunks + others, 100), p=zipf / zipf.sum())
    started = time.perf_counter()
    batch: list[IndexItem] = []
    for number, row in enumerate(words):
        text = " ".join(VOCABULARY[word] for word in row)
        owner = {"user_id": "alice", "kb_id": "kb1"} if number < chunks else {"user_id": "bob", "kb_id": "kb2"}
        batch.append(IndexItem(str(uuid.uuid4()), text, {**owner, "text": text[:400]}))
        if len(batch) == 1000:
            await index.upsert("kb", batch)
            batch = []
    if batch:
        await index.upsert("kb", batch)
    print(f"{kind}: indexed {chunks + others} chunks in {time.perf_counter() - started:.1f}s "
          f"(tokenising and storing; embedding excluded)", flush=True)

    searches = 300 if kind == "edge" else 40
    queries = [" ".join(VOCABULARY[w] for w in row) for row in
               random.choice(len(VOCABULARY), size=(searches, 5), p=zipf / zipf.sum())]
    query_vectors = random.standard_normal((searches, DIMENSION)).astype(np.float32)
    query_vectors /= np.linalg.norm(query_vectors, axis=1, keepdims=True)
    where = {"user_id": "alice", "kb_id": ["kb1"]}
    for mode in ("dense", "lexical", "hybrid"):
        timings = []
        for number in range(searches + 10):  # the first 10 warm up
            embedder.next_query = query_vectors[number % searches].tolist()
            started = time.perf_counter()
            hits = await index.search("kb", queries[number % searches], where=where, limit=10, mode=mode)
            if number >= 10:
                timings.append(time.perf_counter() - started)
            assert all(hit.payload["user_id"] == "alice" for hit in hits)
        timings.sort()
        print(f"{kind} {mode:8s} N={chunks}: p50 {percentile(timings, 0.5) * 1000:6.2f} ms  "
              f"p99 {percentile(timings, 0.99) * 1000:6.2f} ms  ({len(timings)} searches)", flush=True)
    await index.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "edge", int(sys.argv[2]) if len(sys.argv) > 2 else 20_000))
