"""The quality of "this memory matters to this question" on the recall bench's labelled set
(bench/memory/recall_pairs.py), with the real embedding model, at the configured floor
(`[plugins.memory] min_relevance`): fixed data, a quality check, not timing. The figures are
bench/README.md's "Memory recall" table; the asserted bounds sit just under them."""
from __future__ import annotations

import pytest

from bench.memory.recall import precision_recall, score_pairs
from bench.memory.recall_pairs import GROUPS
from plugins.memory.settings import MemorySettings

FLOOR = MemorySettings().min_relevance


@pytest.fixture(scope="module")
def scored():
    import asyncio
    return asyncio.run(score_pairs())


def test_the_labelled_set_has_matching_and_unrelated_pairs_in_every_language_pair(scored):
    for group in GROUPS:
        pairs = [s for s in scored if s.pair.group == group]
        assert sum(s.pair.relevant for s in pairs) >= 30 and sum(not s.pair.relevant for s in pairs) >= 100
    assert any(s.pair.held_out for s in scored)


def test_relevance_at_the_configured_floor_beats_the_old_cosine_floor(scored):
    precision, recall, _ = precision_recall(scored, FLOOR)
    assert precision >= 0.9 and recall >= 0.78
    old_precision, _, _ = precision_recall(scored, 0.77, measure="cosine")
    assert old_precision < 0.5   # the old floor let most unrelated memories in
    for group in GROUPS:          # the cross-language groups included
        precision, recall, _ = precision_recall(scored, FLOOR, group=group)
        assert precision >= 0.85 and recall >= 0.72, group
    for held_out in ("first", "fresh"):   # neither held-out set was looked at when the floor was chosen
        held_precision, held_recall, _ = precision_recall(scored, FLOOR, held_out=held_out)
        assert held_precision >= 0.88 and held_recall >= 0.73, held_out


def test_the_second_model_makes_relevance_better_than_the_embedding_model_alone(scored):
    """The mean of the two models' relevances against e5's alone at its own measured floor
    (0.005, `relevance_second_model = false`), on the held-out pairs: better on both counts."""
    for held_out in ("first", "fresh"):
        precision, recall, _ = precision_recall(scored, FLOOR, held_out=held_out)
        alone_precision, alone_recall, _ = precision_recall(scored, 0.005, measure="single", held_out=held_out)
        assert precision > alone_precision and recall >= alone_recall, held_out
