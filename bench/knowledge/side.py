"""One side of `python -m bench.knowledge --only speed --base REV` (bench/knowledge/compare.py):
run as `python bench/knowledge/side.py CHECKOUT EVAL_DIR CHUNKS` with the checkout's code first
on the path, it builds the speed run's index with that checkout's VectorIndex and embedder, uses
each once (the first use), then answers the coordinator one JSON line per command on stdin:
`search N` (N timed searches per mode), `embed` (query embedding), `quit`."""

from __future__ import annotations

import sys

sys.path[0] = sys.argv[1]  # the checkout measured, not this script's folder

import asyncio  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from bench.knowledge import data  # noqa: E402
from bench.knowledge.cache import EmbeddingCache, text_key  # noqa: E402
from bench.knowledge.embedders import FixedEmbedder  # noqa: E402
from gateway.embeddings import create_embedder  # noqa: E402
from gateway.vector_store import IndexItem  # noqa: E402
from gateway.vectors import open_vector_index  # noqa: E402

try:
    from bench.knowledge.index import (K, KEYWORD_FIELDS, MODES, NAMESPACE, drop_collection, index_config,
                                       passage_windows)
except ImportError:  # the measured checkout predates index.py (issue 42): the same pieces were in run.py
    from bench.knowledge.run import K, KEYWORD_FIELDS, MODES, NAMESPACE
    from bench.knowledge.run import _config as index_config
    from bench.knowledge.run import _drop as drop_collection
    from bench.knowledge.run import _windows as passage_windows


def passage_vector(cache: EmbeddingCache, text: str, dimension: int) -> np.ndarray:
    """The cached real vector, else one drawn from the text's hash (the same on both sides):
    latency does not depend on what a vector means."""
    cached = cache.vectors.get(text_key(text))
    if cached is not None:
        return cached
    seed = int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).normal(0, 1, dimension).astype(np.float32)
    return vector / np.linalg.norm(vector)


def corpus(sets, model_id: str, dimension: int, total: int, seed: int = 7) -> list[tuple[str, np.ndarray]]:
    """As bench.knowledge.run.speed_corpus: windows of the real passages, alternating the sets,
    each with its passage's vector plus noise."""
    cache = EmbeddingCache(model_id, "passage")
    rng = np.random.default_rng(seed)
    pools = []
    for evalset in sets:
        size, stride = (100, 8) if evalset.language == "en" else (250, 20)
        pools.append([(passage_vector(cache, evalset.passages[n], dimension), text)
                      for n, text in passage_windows(evalset, size, stride)])
    chunks, seen = [], set()
    while len(chunks) < total:
        for pool in pools:
            if pool and len(chunks) < total:
                vector, text = pool.pop(int(rng.integers(len(pool))))
                if text in seen:
                    continue
                seen.add(text)
                noisy = vector + rng.normal(0, 0.0247, vector.shape).astype(np.float32)
                chunks.append((text, noisy / np.linalg.norm(noisy)))
        if not any(pools):
            raise SystemExit(f"only {len(chunks)} distinct chunks could be made")
    return chunks


def items_of(chunks, total: int) -> list:
    others = len(chunks) - total
    items = []
    for number, (text, _) in enumerate(chunks):
        if number < total:
            payload = {"user_id": "alice", "kb_id": "kb-main", "document_id": f"doc-{number // 20}"}
        elif number < total + others // 2:
            payload = {"user_id": "alice", "kb_id": "kb-notes", "document_id": f"note-{number // 20}"}
        else:
            payload = {"user_id": "bob", "kb_id": "kb-bob", "document_id": f"bob-{number // 20}"}
        items.append(IndexItem(str(uuid.uuid5(NAMESPACE, f"chunk:{number}")), text, payload))
    return items


async def embed_round(real, sets) -> dict[str, list[float]]:
    out = {}
    for evalset in sets:
        timings = []
        for query in evalset.queries[:40]:
            began = time.perf_counter()
            await real.embed_query(query)
            timings.append((time.perf_counter() - began) * 1000)
        out[evalset.name] = timings
    return out


async def serve(eval_dir: Path, total: int) -> None:
    data.EVAL_DIR = eval_dir
    sets = [data.load(name) for name in data.SETS]
    directory = Path(tempfile.mkdtemp(prefix="bench-knowledge-side-"))
    real = create_embedder(index_config(directory))
    await real.prepare()
    queries = [q for s in sets for q in s.queries[:100]]
    query_vectors = {q: np.asarray(await real.embed_query(q), dtype=np.float32) for q in queries}  # first use
    chunks = corpus(sets, real.model_id, real.dimension, total + total // 4)
    index = await open_vector_index(index_config(directory), "bench-knowledge",
                                    FixedEmbedder(real.model_id, real.dimension, dict(chunks), query_vectors))
    collection = f"bench_speed_{uuid.uuid4().hex[:8]}"
    where = {"user_id": "alice", "kb_id": ["kb-main"]}  # as plugins/knowledge/store.py asks
    try:
        await index.ensure(collection, keyword_fields=KEYWORD_FIELDS)
        items = items_of(chunks, total)
        for start in range(0, len(items), 1000):
            await index.upsert(collection, items[start:start + 1000])
        for mode in MODES:  # the first use of each mode
            for query in queries[:20]:
                await index.search(collection, query, where=where, limit=K, mode=mode)
        count = await index.count(collection, {"user_id": "alice", "kb_id": "kb-main"})
        print(json.dumps({"ready": True, "count": count, "engine": index.engine.kind, "model": real.model_id}),
              flush=True)
        searched = 0
        for line in sys.stdin:
            command = line.split()
            if command[0] == "search":
                out = {}
                for mode in MODES:
                    timings = []
                    for _ in range(int(command[1])):
                        query = queries[searched % len(queries)]
                        searched += 1
                        began = time.perf_counter()
                        hits = await index.search(collection, query, where=where, limit=K, mode=mode)
                        timings.append((time.perf_counter() - began) * 1000)
                        assert hits and all(hit.payload["kb_id"] == "kb-main" for hit in hits)
                    out[mode] = timings
                print(json.dumps(out), flush=True)
            elif command[0] == "embed":
                print(json.dumps(await embed_round(real, sets)), flush=True)
            else:
                break
    finally:
        await drop_collection(index, collection)
        await index.close()
        await real.close()


if __name__ == "__main__":
    asyncio.run(serve(Path(sys.argv[2]), int(sys.argv[3])))
