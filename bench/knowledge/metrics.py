"""nDCG@k with linear gains (as pytrec_eval and BEIR compute it) and Recall@k over the judged
relevant passages (grade > 0)."""

from __future__ import annotations

import math
from typing import Mapping, Sequence


def ndcg_at(ranking: Sequence[str], grades: Mapping[str, int], k: int = 10) -> float:
    dcg = sum(grades.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranking[:k]))
    ideal = sum(
        grade / math.log2(rank + 2) for rank, grade in enumerate(sorted(grades.values(), reverse=True)[:k])
    )
    return dcg / ideal if ideal else 0.0


def recall_at(ranking: Sequence[str], grades: Mapping[str, int], k: int = 10) -> float:
    relevant = {doc for doc, grade in grades.items() if grade > 0}
    return len(relevant.intersection(ranking[:k])) / len(relevant) if relevant else 0.0


def evaluate(
    rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], k: int = 10
) -> tuple[float, float]:
    """Mean nDCG@k and Recall@k over every judged query (a query without a ranking scores 0)."""
    ndcg = sum(ndcg_at(rankings.get(q, ()), g, k) for q, g in qrels.items()) / len(qrels)
    recall = sum(recall_at(rankings.get(q, ()), g, k) for q, g in qrels.items()) / len(qrels)
    return ndcg, recall
