"""The lexical half of hybrid search: text -> tokens -> a BM25-weighted sparse vector whose
indices are hashed tokens. The engine applies IDF at query time (Qdrant's `IDF` modifier on the
sparse vector), so a document's weights depend only on the document itself and indexing never
needs corpus statistics.

English (and other space-separated scripts): NFKC, lower case, stop words dropped, a light
suffix stemmer, so "running"/"runs"/"run" meet. Chinese has no spaces: runs of Han characters
are segmented with jieba (its dictionary loads once, lazily, on the thread that first
tokenises: always an executor, never the event loop) or, when so configured, cut into
overlapping character bigrams. Every method here is blocking CPU work: call it in an executor.
"""
from __future__ import annotations

import math
import re
import unicodedata
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from .idle import IdleModel
from .text import HAN_RANGES

# Bump when tokens or weights change: the vector store keys its collections by it, so an index
# built by an older tokenizer is rebuilt rather than mixed with the new one.
LEXICAL_VERSION = 2

ChineseMode = Literal["jieba", "bigrams"]

# A run of Han characters, or a run of other letters/digits (underscore excluded).
_RUNS = re.compile(rf"([{HAN_RANGES}]+)|([^\W_{HAN_RANGES}]+)", re.UNICODE)

ENGLISH_STOP_WORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being
below between both but by can cannot could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves s t d ll m re ve
""".split())

# Function words that carry no topic; jieba returns them as single tokens.
CHINESE_STOP_WORDS = frozenset("""
的 了 是 在 和 与 及 或 也 就 都 而 并 等 着 过 之 其 此 这 那 个 为 以 于 被 把 让 从 对 向 吗 呢 吧 啊 呀
么 什么 一个 我 你 您 他 她 它 我们 你们 他们 她们 它们 自己 这个 那个 这些 那些 哪 里 上 中 下 有 没有 不 很 更 最 会 能 要 可以
""".split())


def stem(word: str) -> str:
    """A light English suffix stemmer (plural, -ing, -ed, -ly...), conservative on short words
    so that a rare exact term stays recognisable."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    for suffix, replacement, keep in (("sses", "ss", 2), ("ies", "y", 2), ("ss", "ss", 2), ("us", "us", 2),
                                      ("is", "is", 2), ("s", "", 3)):
        if word.endswith(suffix):
            if len(word) - len(suffix) >= keep:
                word = word[: len(word) - len(suffix)] + replacement
            break
    for suffix, keep in (("ingly", 4), ("edly", 4), ("ing", 4), ("ed", 4), ("ly", 4)):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep:
            word = word[: len(word) - len(suffix)]
            if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # running -> runn -> run
            break
    return word


class Tokenizer:
    """Text to index terms. Thread-safe; jieba's dictionary (about 70 MB of Python objects) is
    loaded on the first Chinese text and released after `[core] model_idle_seconds` without one
    (gateway.idle)."""

    def __init__(self, chinese: ChineseMode = "jieba"):
        if chinese not in ("jieba", "bigrams"):
            raise ValueError(f"unknown Chinese tokenisation {chinese!r} (jieba or bigrams)")
        self.chinese = chinese

    def tokens(self, text: str) -> list[str]:
        runs = _RUNS.findall(unicodedata.normalize("NFKC", text).lower())
        if self.chinese == "jieba" and any(han for han, _ in runs):
            with JIEBA.using() as segmenter:
                return self._terms(runs, segmenter)
        return self._terms(runs, None)

    def _terms(self, runs: list[tuple[str, str]], segmenter: Any) -> list[str]:
        terms: list[str] = []
        for han, word in runs:
            if word:
                if word not in ENGLISH_STOP_WORDS and (len(word) > 1 or word.isdigit()):
                    terms.append(stem(word))
            elif segmenter is None:
                terms.extend(_bigrams(han))
            else:
                terms.extend(t for t in segmenter.lcut(han, HMM=True)
                             if t not in CHINESE_STOP_WORDS and t.strip())
        return terms

    def warm_up(self) -> None:
        """Load what the first Chinese text would (jieba's dictionary): blocking, about a second."""
        if self.chinese == "jieba":
            JIEBA.load()


def _load_jieba() -> Any:
    """jieba's segmenter with its dictionary (read-only once loaded: shared by threads)."""
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    segmenter = jieba.Tokenizer()
    segmenter.initialize()
    return segmenter


JIEBA = IdleModel("jieba dictionary", _load_jieba)


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [] if run in CHINESE_STOP_WORDS else [run]
    return [run[i:i + 2] for i in range(len(run) - 1)]


def term_index(term: str) -> int:
    """A stable 32-bit sparse index for a term (collisions are negligible at this scale)."""
    return zlib.crc32(term.encode("utf-8"))


@dataclass(frozen=True)
class SparseVector:
    indices: list[int]
    values: list[float]

    def __bool__(self) -> bool:
        return bool(self.indices)


class LexicalEncoder:
    """BM25 as sparse vectors: a document's weight for a term is BM25's saturated term
    frequency, tf·(k1+1) / (tf + k1·(1 − b + b·len/avg_len)); a query's is 1 per distinct term;
    the engine multiplies by IDF. `avg_len` is a fixed expected chunk length in terms, so a
    document's vector never changes as the corpus grows."""

    def __init__(self, tokenizer: Tokenizer | None = None, *, k1: float = 1.2, b: float = 0.75,
                 avg_len: float = 120.0):
        self.tokenizer = tokenizer or Tokenizer()
        self.k1 = k1
        self.b = b
        self.avg_len = avg_len

    @property
    def version(self) -> str:
        """Names the tokens and weights; part of the collection's name, so that documents
        weighed one way are never ranked against documents weighed another."""
        name = f"lex{LEXICAL_VERSION}{'b' if self.tokenizer.chinese == 'bigrams' else 'j'}"
        if (self.k1, self.b, self.avg_len) != (1.2, 0.75, 120.0):
            name += f"_{zlib.crc32(repr((self.k1, self.b, self.avg_len)).encode()):08x}"
        return name

    def document(self, text: str) -> SparseVector:
        counts = Counter(term_index(term) for term in self.tokenizer.tokens(text))
        length = sum(counts.values())
        norm = self.k1 * (1 - self.b + self.b * length / self.avg_len)
        indices = sorted(counts)
        values = [counts[i] * (self.k1 + 1) / (counts[i] + norm) for i in indices]
        return SparseVector(indices, values)

    def query(self, text: str) -> SparseVector:
        indices = sorted({term_index(term) for term in self.tokenizer.tokens(text)})
        return SparseVector(indices, [1.0] * len(indices))


def idf(documents_with_term: int, documents: int) -> float:
    """Qdrant's IDF (as its `IDF` modifier computes it), for tests and explanations."""
    return math.log((documents - documents_with_term + 0.5) / (documents_with_term + 0.5) + 1)
