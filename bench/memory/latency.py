"""What the second relevance model and the shared words add to a search, so to recall before
each chat turn (bench/README.md, "Memory recall"). As `MemoryStore.search` does it: the second
model reads the question while e5 embeds it (at once, on their own threads), then judges the 20
candidates a floored search reads while their words are compared with the question's. Timed in turn for each question: e5's question alone (what every search
already had), and e5's question with the second model's whole part; the difference is what a
search gains. The candidates' vectors are kept (a person's memories change rarely); 20
memories never seen (a new process) are timed apart.

    python -m bench.memory.latency
"""
from __future__ import annotations

import asyncio
import statistics
import time

from gateway.embeddings import LocalE5Embedder
from gateway.lexical import JIEBA, Tokenizer
from plugins.memory.relevance import SecondOpinion, sharing_words

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
    tokenizer = Tokenizer()
    await asyncio.to_thread(JIEBA.load)   # loaded already where the search's tokeniser has met Chinese
    await second.relevances("warm up", candidates)
    await embedder.embed_query("warm up")
    times: dict[str, list[float]] = {"e5 question alone": [], "e5 question + second model, 20 kept candidates": [],
                                     "added to a search": [], "shared words alone, 20 candidates": [],
                                     "second model, 20 new memories": []}
    for round_ in range(rounds):
        for question in questions:
            start = time.perf_counter()
            await embedder.embed_query(question)
            alone = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            _, asked = await asyncio.gather(embedder.embed_query(question), second.question(question))
            await asyncio.gather(second.relevances(asked, candidates), sharing_words(tokenizer, question, candidates))
            both = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            await sharing_words(tokenizer, question, candidates)
            times["shared words alone, 20 candidates"].append((time.perf_counter() - start) * 1000)
            times["e5 question alone"].append(alone)
            times["e5 question + second model, 20 kept candidates"].append(both)
            times["added to a search"].append(both - alone)
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
    # "added" is per call, so its p50 is not the difference of the two p50s
    for name, values in times.items():
        print(f"| {name} | {len(values)} | {statistics.median(values):.1f} | {_percentile(values, 0.9):.1f} | "
              f"{max(values):.1f} |")


if __name__ == "__main__":
    main()
