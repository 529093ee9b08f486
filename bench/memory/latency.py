"""What the second relevance model adds to a search, so to recall before each chat turn
(bench/README.md, "Memory recall"): the time of `SecondOpinion.relevances` for a question against
the 20 candidates a floored search reads, once their vectors are kept (a person's memories
change rarely) and for 20 memories never seen (a new process), with the embedding model's
question for comparison (the part of a turn's recall every search already had).

    python -m bench.memory.latency
"""
from __future__ import annotations

import asyncio
import statistics
import time

from gateway.embeddings import LocalE5Embedder
from plugins.memory.relevance import SecondOpinion

from .recall_pairs import FRESH_QUESTIONS, MEMORIES, QUESTIONS


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def measure(rounds: int = 3) -> dict[str, list[float]]:
    second = SecondOpinion()
    embedder = LocalE5Embedder()
    await asyncio.gather(second.prepare(), embedder.prepare())
    questions = [q for question in QUESTIONS + FRESH_QUESTIONS for q in (question.en, question.zh)]
    memories = [text for pair in MEMORIES.values() for text in pair]
    candidates = memories[:20]
    await second.relevances("warm up", candidates)
    await embedder.embed_query("warm up")
    times: dict[str, list[float]] = {"second model, 20 kept candidates": [], "e5 question": [],
                                     "second model, 20 new memories": []}
    for round_ in range(rounds):
        for question in questions:
            start = time.perf_counter()
            await second.relevances(question, candidates)
            times["second model, 20 kept candidates"].append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            await embedder.embed_query(question)
            times["e5 question"].append((time.perf_counter() - start) * 1000)
    for round_ in range(5):
        fresh = SecondOpinion()
        await fresh.prepare()
        start = time.perf_counter()
        await fresh.relevances(questions[round_], [f"{text} ({round_})" for text in candidates])
        times["second model, 20 new memories"].append((time.perf_counter() - start) * 1000)
    await embedder.close()
    return times


def main() -> None:
    times = asyncio.run(measure())
    print("| what | calls | p50 ms | p90 ms | max ms |\n|---|---|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {len(values)} | {statistics.median(values):.1f} | {_percentile(values, 0.9):.1f} | "
              f"{max(values):.1f} |")


if __name__ == "__main__":
    main()
