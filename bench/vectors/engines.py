"""Which embedded engine: search latency of qdrant-client's local mode (pure Python) against
Qdrant's own engine in-process (qdrant-edge-py), each driven directly.

20,000 chunks in one base (plus 5,000 of another user), filtered by user_id + kb_id; dense,
lexical (sparse with the IDF modifier) and hybrid (RRF inside the engine); limit 10; no query
embedding. Random unit vectors and Zipf-distributed term ids stand in for text: latency does
not depend on what they mean. Local mode takes about six minutes.

    python -m bench.vectors.engines [edge] [local] [edge-hnsw]

`edge-hnsw` also builds the engine's HNSW graphs first (`optimize()`), which the services never
do: it holds Python's global lock for its whole run (printed).
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import uuid

import numpy as np

CHUNKS, OTHERS, DIMENSION = 20_000, 5_000, 384
TOTAL = CHUNKS + OTHERS
random = np.random.default_rng(1)
zipf = 1 / np.arange(1, 50_001)
zipf /= zipf.sum()


def sparse_document() -> tuple[list[int], list[float]]:
    terms, counts = np.unique(random.choice(len(zipf), size=120, p=zipf), return_counts=True)
    return terms.tolist(), (counts * 2.2 / (counts + 1.2)).astype(float).tolist()


def sparse_query() -> tuple[list[int], list[float]]:
    terms = np.unique(random.choice(len(zipf), size=6, p=zipf))
    return terms.tolist(), [1.0] * len(terms)


def unit_vectors(count: int) -> np.ndarray:
    vectors = random.standard_normal((count, DIMENSION)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


VECTORS = unit_vectors(TOTAL)
DOCUMENTS = [sparse_document() for _ in range(TOTAL)]
PAYLOADS = [{"user_id": "alice" if i < CHUNKS else "bob", "kb_id": "kb1" if i < CHUNKS else "kb2",
             "text": "x" * 300} for i in range(TOTAL)]
IDS = [str(uuid.UUID(int=i + 1)) for i in range(TOTAL)]
QUERY_VECTORS = unit_vectors(200)
QUERY_TERMS = [sparse_query() for _ in range(200)]


def measure(name: str, search, searches: int) -> None:
    for number in range(10):
        search(number)
    timings = []
    for number in range(searches):
        started = time.perf_counter()
        search(number)
        timings.append(time.perf_counter() - started)
    timings.sort()
    print(f"{name:45s} p50 {timings[len(timings) // 2] * 1000:8.2f} ms  "
          f"p99 {timings[max(0, int(len(timings) * 0.99) - 1)] * 1000:8.2f} ms", flush=True)


def bench_edge(root: str, hnsw: bool) -> None:
    import qdrant_edge as edge

    config = edge.EdgeConfig(vectors={"dense": edge.EdgeVectorParams(size=DIMENSION, distance=edge.Distance.Cosine)},
                             sparse_vectors={"lexical": edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)})
    shard = edge.EdgeShard.create(os.path.join(root, "edge"), config)
    for field in ("user_id", "kb_id"):
        shard.update(edge.UpdateOperation.create_field_index(field, edge.PayloadSchemaType.Keyword))
    started = time.perf_counter()
    for start in range(0, TOTAL, 500):
        shard.update(edge.UpdateOperation.upsert_points([
            edge.Point(IDS[i], {"dense": VECTORS[i].tolist(), "lexical": edge.SparseVector(*DOCUMENTS[i])},
                       PAYLOADS[i]) for i in range(start, min(start + 500, TOTAL))]))
    print(f"edge: upserted {TOTAL} points in {time.perf_counter() - started:.1f}s", flush=True)
    label = "edge, plain segments"
    if hnsw:
        started = time.perf_counter()
        shard.optimize()
        print(f"edge: optimize() (HNSW) took {time.perf_counter() - started:.1f}s", flush=True)
        label = "edge, HNSW"
    where = edge.Filter(must=[edge.FieldCondition("user_id", match=edge.MatchValue("alice")),
                              edge.FieldCondition("kb_id", match=edge.MatchAny(["kb1"]))])

    def dense(n):
        return shard.query(edge.QueryRequest(limit=10, query=edge.Query.Nearest(QUERY_VECTORS[n % 200].tolist(),
                                                                                using="dense"),
                                             filter=where, with_payload=True))

    def lexical(n):
        return shard.query(edge.QueryRequest(limit=10, query=edge.Query.Nearest(
            edge.SparseVector(*QUERY_TERMS[n % 200]), using="lexical"), filter=where, with_payload=True))

    def hybrid(n):
        return shard.query(edge.QueryRequest(limit=10, query=edge.Fusion.Rrf(k=60), filter=where, with_payload=True,
                                             prefetches=[
            edge.Prefetch(limit=50, query=edge.Query.Nearest(QUERY_VECTORS[n % 200].tolist(), using="dense"),
                          filter=where),
            edge.Prefetch(limit=50, query=edge.Query.Nearest(edge.SparseVector(*QUERY_TERMS[n % 200]),
                                                             using="lexical"), filter=where)]))

    measure(f"{label}: dense", dense, 200)
    measure(f"{label}: lexical", lexical, 200)
    measure(f"{label}: hybrid (RRF in the engine)", hybrid, 200)
    shard.close()


def bench_local(root: str) -> None:
    import warnings

    from qdrant_client import QdrantClient, models

    warnings.simplefilter("ignore")  # "Local mode is not recommended for ... more than 20,000 points"
    client = QdrantClient(path=os.path.join(root, "local"))
    client.create_collection("c", vectors_config={"dense": models.VectorParams(size=DIMENSION,
                                                                              distance=models.Distance.COSINE)},
                             sparse_vectors_config={"lexical": models.SparseVectorParams(modifier=models.Modifier.IDF)})
    started = time.perf_counter()
    for start in range(0, TOTAL, 500):
        client.upsert("c", [models.PointStruct(id=IDS[i], payload=PAYLOADS[i], vector={
            "dense": VECTORS[i].tolist(),
            "lexical": models.SparseVector(indices=DOCUMENTS[i][0], values=DOCUMENTS[i][1])})
            for i in range(start, min(start + 500, TOTAL))])
    print(f"local mode: upserted {TOTAL} points in {time.perf_counter() - started:.1f}s", flush=True)
    where = models.Filter(must=[models.FieldCondition(key="user_id", match=models.MatchValue(value="alice")),
                                models.FieldCondition(key="kb_id", match=models.MatchAny(any=["kb1"]))])

    def terms(n):
        return models.SparseVector(indices=QUERY_TERMS[n % 200][0], values=QUERY_TERMS[n % 200][1])

    def dense(n):
        return client.query_points("c", query=QUERY_VECTORS[n % 200].tolist(), using="dense", query_filter=where,
                                   limit=10).points

    def lexical(n):
        return client.query_points("c", query=terms(n), using="lexical", query_filter=where, limit=10).points

    def hybrid(n):
        return client.query_points("c", query=models.FusionQuery(fusion=models.Fusion.RRF), limit=10, prefetch=[
            models.Prefetch(query=QUERY_VECTORS[n % 200].tolist(), using="dense", filter=where, limit=50),
            models.Prefetch(query=terms(n), using="lexical", filter=where, limit=50)]).points

    measure("qdrant-client local mode: dense", dense, 50)
    measure("qdrant-client local mode: lexical", lexical, 50)
    measure("qdrant-client local mode: hybrid (RRF in the engine)", hybrid, 50)
    client.close()


if __name__ == "__main__":
    root = tempfile.mkdtemp(prefix="bench-engines-")
    try:
        for which in sys.argv[1:] or ["edge", "local"]:
            if which == "local":
                bench_local(root)
            else:
                bench_edge(root, hnsw=which == "edge-hnsw")
    finally:
        shutil.rmtree(root)
