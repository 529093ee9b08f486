"""The quality of "this memory matters to this question" on the recall bench's labelled set
(bench/memory/recall_pairs.py), with the real embedding model, at the configured floor
(`[plugins.memory] min_relevance`): fixed data, a quality check, not timing. The figures are
bench/README.md's "Memory recall" table; the asserted bounds sit just under them."""
from __future__ import annotations

import pytest

from bench.memory.recall import precision_recall, score_pairs
from bench.memory.recall_pairs import GROUPS
from gateway.lexical import Tokenizer
from plugins.memory.relevance import E5_ALONE_FLOOR, shared_words
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
    assert any(s.pair.held_out for s in scored) and any(s.pair.fresh for s in scored)
    assert sum(s.pair.relevant for s in scored if s.pair.third) >= 140
    assert sum(s.pair.relevant for s in scored if s.pair.fourth) >= 200


def test_relevance_at_the_configured_floor_beats_the_old_cosine_floor(scored):
    precision, recall, _ = precision_recall(scored, FLOOR)
    assert precision >= 0.88 and recall >= 0.7
    old_precision, _, _ = precision_recall(scored, 0.77, measure="cosine")
    assert old_precision < 0.5   # the old floor let most unrelated memories in
    for group in GROUPS:          # the cross-language groups included
        precision, recall, _ = precision_recall(scored, FLOOR, group=group)
        assert precision >= 0.82 and recall >= 0.67, group


def test_the_figures_of_each_part_at_the_configured_floor(scored):
    """The floor was chosen on the three earlier parts together (there the issue's target, 0.9 /
    0.8, is met); the third and fourth held-out sets were each written before a method was tried
    and not used to choose one: the target is missed on both (0.92 / 0.75 and 0.82 / 0.56). The
    chosen-on part's precision is 0.885 on some machines, 0.895 on others: one unrelated pair sits
    0.0001 from the floor."""
    precision, recall, _ = precision_recall(scored, FLOOR, held_out="earlier")
    assert precision >= 0.9 and recall >= 0.8
    bounds = {False: (0.88, 0.83), "first": (0.95, 0.8), "fresh": (0.9, 0.76), "third": (0.9, 0.74),
              "fourth": (0.8, 0.55)}
    for held_out, (least_precision, least_recall) in bounds.items():
        precision, recall, _ = precision_recall(scored, FLOOR, held_out=held_out)
        assert precision >= least_precision and recall >= least_recall, held_out


def test_the_second_model_makes_relevance_better_than_the_embedding_model_alone(scored):
    """The mean of the two models' relevances against e5's alone at its own measured floor
    (`relevance_second_model = false`), on the held-out pairs: better on both counts."""
    for held_out in ("first", "fresh", "third", "fourth"):
        precision, recall, _ = precision_recall(scored, FLOOR, held_out=held_out)
        alone_precision, alone_recall, _ = precision_recall(scored, E5_ALONE_FLOOR, measure="single",
                                                            held_out=held_out)
        assert precision > alone_precision and recall >= alone_recall, held_out


def test_a_shared_content_word_is_found_in_either_language_and_never_across_them():
    tokenizer = Tokenizer()
    memories = ["The user's daughter studies at a university in Shanghai.", "用户的女儿在上海读大学。",
                "The user drives a red Toyota.", "用户有一只叫Max的狗。"]
    assert shared_words(tokenizer, "Plan a trip to visit my daughter.", memories) == [True, False, False, False]
    assert shared_words(tokenizer, "帮我安排一次去看女儿的行程。", memories) == [False, True, False, False]
    # the neutral form's subject is no shared word; a name written alike in both is
    assert shared_words(tokenizer, "Which user owns max?", memories) == [False, False, False, True]
    assert shared_words(tokenizer, "", memories) == [False] * 4
