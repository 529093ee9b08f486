"""BM25 with interchangeable tokenisers, for choosing the lexical side of the hybrid."""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

# The usual English stop list (Lucene's plus a few question words the Cranfield queries use).
ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with what which who whom how why when where do does did "
    "been being have has had can could would should may might must shall we you he she i me my "
    "our your its them those than so also any all some other from about over under between".split()
)
CHINESE_STOPWORDS = frozenset(
    "的 了 是 在 和 与 及 或 也 都 而 就 被 把 之 其 这 那 个 有 为 于 以 中 对 上 下 吗 呢 吧 啊 什么 哪 哪些 哪个 哪里 谁 多少 几 怎么 如何 为什么 是否".split()
)

_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?|[\u3400-\u9fff\uf900-\ufaff]+", re.IGNORECASE)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


@lru_cache(maxsize=1)
def _stemmer():
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def _english_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower())]


def english_plain(text: str) -> list[str]:
    return _english_words(text)


def english_stop(text: str) -> list[str]:
    return [w for w in _english_words(text) if w not in ENGLISH_STOPWORDS]


def english_stem(text: str) -> list[str]:
    """Lowercase, stop words out, Snowball (Porter 2) stems."""
    return _stemmer().stemWords(english_stop(text))


def _light_stem(word: str) -> str:
    """A few suffixes only (plural, -ing, -ed, -ly): what a tokeniser without a stemming library does."""
    for suffix, keep in (
        ("ies", "y"),
        ("sses", "ss"),
        ("ing", ""),
        ("edly", ""),
        ("ed", ""),
        ("ly", ""),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)] + keep
    return word


def english_light(text: str) -> list[str]:
    return [_light_stem(w) for w in english_stop(text)]


def _split_runs(text: str) -> list[tuple[bool, str]]:
    """(is_chinese, run) for each run of Chinese characters or Latin letters/digits."""
    out = []
    for match in _WORD.finditer(text.lower()):
        run = match.group()
        out.append((bool(_CJK.match(run)), run))
    return out


def _mixed(text: str, chinese: Callable[[str], list[str]], stop: bool = False) -> list[str]:
    tokens: list[str] = []
    for is_chinese, run in _split_runs(text):
        if is_chinese:
            tokens.extend(t for t in chinese(run) if t.strip() and not (stop and t in CHINESE_STOPWORDS))
        else:
            tokens.extend(english_stem(run))
    return tokens


@lru_cache(maxsize=1)
def _jieba():
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def chinese_jieba(text: str) -> list[str]:
    return _mixed(text, lambda run: _jieba().lcut(run))


def chinese_jieba_stop(text: str) -> list[str]:
    return _mixed(text, lambda run: _jieba().lcut(run), stop=True)


def chinese_jieba_search(text: str) -> list[str]:
    return _mixed(text, lambda run: _jieba().lcut_for_search(run))


def chinese_jieba_search_stop(text: str) -> list[str]:
    return _mixed(text, lambda run: _jieba().lcut_for_search(run), stop=True)


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]


def chinese_bigrams(text: str) -> list[str]:
    return _mixed(text, _bigrams)


def chinese_unigrams_bigrams(text: str) -> list[str]:
    return _mixed(text, lambda run: list(run) + ([run[i:i + 2] for i in range(len(run) - 1)]))


TOKENISERS: dict[str, dict[str, Callable[[str], list[str]]]] = {
    "en": {
        "plain (lowercase words)": english_plain,
        "lowercase + stop words": english_stop,
        "stop words + light suffixes": english_light,
        "stop words + Snowball stems": english_stem,
    },
    "zh": {
        "character bigrams": chinese_bigrams,
        "characters + bigrams": chinese_unigrams_bigrams,
        "jieba": chinese_jieba,
        "jieba + stop words": chinese_jieba_stop,
        "jieba search mode": chinese_jieba_search,
        "jieba search mode + stop words": chinese_jieba_search_stop,
    },
}


class Bm25:
    """Okapi BM25 over pre-tokenised passages. `average_length` fixes avgdl (as a sparse-vector
    store that computes document weights once, at insert time, has to) instead of the corpus's."""

    def __init__(
        self,
        documents: Sequence[list[str]],
        k1: float = 1.2,
        b: float = 0.75,
        average_length: float | None = None,
    ) -> None:
        self.size = len(documents)
        lengths = np.array([len(d) for d in documents], dtype=np.float32)
        avgdl = average_length or float(lengths.mean() or 1.0)
        frequency: Counter[str] = Counter()
        postings: dict[str, list[tuple[int, float]]] = {}
        for index, document in enumerate(documents):
            counts = Counter(document)
            norm = k1 * (1 - b + b * lengths[index] / avgdl)
            for term, tf in counts.items():
                postings.setdefault(term, []).append((index, tf * (k1 + 1) / (tf + norm)))
            frequency.update(counts.keys())
        self.idf = {t: math.log(1 + (self.size - n + 0.5) / (n + 0.5)) for t, n in frequency.items()}
        self.postings = {
            t: (np.array([i for i, _ in p]), np.array([w for _, w in p], dtype=np.float32))
            for t, p in postings.items()
        }

    def scores(self, query: list[str]) -> np.ndarray:
        out = np.zeros(self.size, dtype=np.float32)
        for term in set(query):
            if term in self.postings:
                indexes, weights = self.postings[term]
                out[indexes] += self.idf[term] * weights
        return out


def gateway_tokenisers() -> dict[str, Callable[[str], list[str]]]:
    """The core's own tokeniser (gateway.lexical), both Chinese modes, when it is there."""
    try:
        from gateway.lexical import Tokenizer
    except ImportError:
        return {}
    jieba_mode, bigram_mode = Tokenizer("jieba"), Tokenizer("bigrams")
    return {"gateway.lexical, jieba": jieba_mode.tokens, "gateway.lexical, bigrams": bigram_mode.tokens}


for _language in ("en", "zh"):
    TOKENISERS[_language].update(gateway_tokenisers())
