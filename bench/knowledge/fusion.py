"""Ways to merge a dense and a lexical candidate list into one ranking. Each takes the two lists
as (passage index, score) best first and returns passage indexes best first."""

from __future__ import annotations

from typing import Sequence

import numpy as np

Ranked = Sequence[tuple[int, float]]


def rrf(
    dense: Ranked, lexical: Ranked, k: float = 60.0, dense_weight: float = 1.0, lexical_weight: float = 1.0
) -> list[int]:
    fused: dict[int, float] = {}
    for weight, ranked in ((dense_weight, dense), (lexical_weight, lexical)):
        for rank, (index, _) in enumerate(ranked):
            fused[index] = fused.get(index, 0.0) + weight / (k + rank + 1)
    return sorted(fused, key=fused.__getitem__, reverse=True)


def _minmax(ranked: Ranked) -> dict[int, float]:
    if not ranked:
        return {}
    scores = np.array([s for _, s in ranked], dtype=np.float64)
    low, high = scores.min(), scores.max()
    span = high - low or 1.0
    return {index: (score - low) / span for index, score in ranked}


def convex(dense: Ranked, lexical: Ranked, alpha: float = 0.5) -> list[int]:
    """alpha * dense + (1 - alpha) * lexical, each min-max normalised over its own candidates."""
    d, lex = _minmax(dense), _minmax(lexical)
    fused = {i: alpha * d.get(i, 0.0) + (1 - alpha) * lex.get(i, 0.0) for i in d.keys() | lex.keys()}
    return sorted(fused, key=fused.__getitem__, reverse=True)


def _dbsf_normalise(ranked: Ranked) -> dict[int, float]:
    if not ranked:
        return {}
    scores = np.array([s for _, s in ranked], dtype=np.float64)
    mean, std = scores.mean(), scores.std()
    low, high = mean - 3 * std, mean + 3 * std
    span = high - low or 1.0
    return {index: float(np.clip((score - low) / span, 0.0, 1.0)) for index, score in ranked}


def dbsf(dense: Ranked, lexical: Ranked, dense_weight: float = 1.0) -> list[int]:
    """Qdrant's distribution-based score fusion: each list scaled by mean ± 3 sigma, then summed."""
    d, lex = _dbsf_normalise(dense), _dbsf_normalise(lexical)
    fused = {i: dense_weight * d.get(i, 0.0) + lex.get(i, 0.0) for i in d.keys() | lex.keys()}
    return sorted(fused, key=fused.__getitem__, reverse=True)
