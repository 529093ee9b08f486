"""How relevant a memory is to a question, beyond the raw cosine similarity (docs/memory.md,
"Relevance"; measured by `python -m bench.memory.recall`, bench/README.md).

multilingual-e5-small gives every pair of short sentences a high cosine (0.64–0.92 on the
labelled set), and how high depends on the question and on the languages: a Chinese question
scores every Chinese memory higher than an English one, a short question everything higher. So
a memory's relevance is its cosine minus the question's *baseline* against memories of the same
language: the mean cosine of the question's three nearest among a fixed set of ordinary memories
(`ANCHORS`, none about anything in particular) in that language. A memory that matters stands
out of that crowd (relevance > 0); an unrelated one scores like the crowd (≤ 0)."""
from __future__ import annotations

import asyncio
import re
from typing import Callable, Sequence

import numpy as np

from gateway.embeddings import Embedder

ANCHORS: dict[str, tuple[str, ...]] = {
    "en": ("The user has a meeting on Friday.", "The user likes hiking in the mountains.",
           "The user's brother lives in London.", "The user is afraid of spiders.", "The user plays the piano.",
           "The user reads before bed.", "The user owns a bicycle.", "The user's favourite colour is green.",
           "The user was born in 1990.", "The user speaks three languages.", "The user's son plays football.",
           "The user works from home on Fridays.", "The user is saving money for a house.",
           "The user had knee surgery last year.", "The user collects stamps.", "The user's neighbour is called Paul.",
           "The user prefers tea to coffee.", "The user takes the bus to work.", "The user has two children.",
           "The user does not eat pork.", "The user visits their parents every Sunday.",
           "The user is a software engineer.", "The user has a parrot.", "The user lives near the river."),
    "zh": ("用户周五有个会议。", "用户喜欢去山里徒步。", "用户的哥哥住在伦敦。", "用户怕蜘蛛。", "用户会弹钢琴。", "用户睡前看书。",
           "用户有一辆自行车。", "用户最喜欢的颜色是绿色。", "用户出生于1990年。", "用户会说三种语言。", "用户的儿子踢足球。",
           "用户每周五在家办公。", "用户在攒钱买房。", "用户去年做过膝盖手术。", "用户喜欢集邮。", "用户的邻居叫保罗。",
           "用户喜欢喝茶胜过咖啡。", "用户坐公交车上班。", "用户有两个孩子。", "用户不吃猪肉。", "用户每周日去看父母。",
           "用户是一名软件工程师。", "用户养了一只鹦鹉。", "用户住在河边。"),
}
BASELINE_NEAREST = 3
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def language(text: str) -> str:
    return "zh" if _CJK.search(text) else "en"


def baselines(query_vector: Sequence[float], anchors: dict[str, np.ndarray]) -> dict[str, float]:
    """The question's baseline per memory language: the mean cosine of its nearest anchors."""
    query = np.asarray(query_vector, dtype=np.float32)
    return {lang: float(np.sort(vectors @ query)[::-1][:BASELINE_NEAREST].mean())
            for lang, vectors in anchors.items()}


def relevance(cosine: float, memory: str, baseline: dict[str, float]) -> float:
    return cosine - baseline[language(memory)]


# The anchors' vectors by embedding model: the same for every service of the process.
_ANCHOR_VECTORS: dict[str, dict[str, np.ndarray]] = {}


class Relevance:
    """The anchors' vectors for the embedder in use, embedded once (as passages, as memories are)."""

    def __init__(self, embedder: Callable[[], Embedder]):
        self._embedder = embedder   # read when needed: a service's embedder exists once it started
        self._lock = asyncio.Lock()

    async def anchors(self) -> dict[str, np.ndarray]:
        embedder = self._embedder()
        async with self._lock:
            if embedder.model_id not in _ANCHOR_VECTORS:
                _ANCHOR_VECTORS[embedder.model_id] = {
                    lang: np.asarray(await embedder.embed_passages(list(texts)), dtype=np.float32)
                    for lang, texts in ANCHORS.items()}
            return _ANCHOR_VECTORS[embedder.model_id]

    async def baselines(self, query: str) -> dict[str, float]:
        anchors = await self.anchors()
        return baselines(await self._embedder().embed_query(query), anchors)
