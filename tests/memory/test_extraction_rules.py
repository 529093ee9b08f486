"""What extraction reads without a model service: the rules for explicit statements in English and
Chinese (what is caught, how it is written, what is left alone on purpose), and the reading of a
model's answer (fences, wrapping prose, other shapes, junk)."""
from __future__ import annotations

import pytest

from plugins.memory.extraction import Fact, parse_facts
from plugins.memory.statements import explicit_statements, speaks_of_self


def caught(text: str, limit: int = 5) -> list[tuple[str, str, int, bool]]:
    return [(s.content, s.category, s.priority, s.explicit) for s in explicit_statements(text, limit)]


def contents(text: str) -> list[str]:
    return [s.content for s in explicit_statements(text)]


@pytest.mark.parametrize("text, expected", [
    ("I'm vegetarian and my sister is called Lena.",
     [("The user is vegetarian.", "preference", 7, False), ("The user's sister is called Lena.", "relationship", 7, False)]),
    ("Remember that I'm allergic to peanuts, shellfish and eggs.",
     [("The user is allergic to peanuts, shellfish and eggs.", "health", 9, True)]),
    ("Please remember that my wifi password is hunter2.", [("The user's wifi password is hunter2.", "other", 7, True)]),
    ("Can you remember that I'm vegan?", [("The user is vegan.", "preference", 7, True)]),
    ("my name is bob", [("The user's name is Bob.", "identity", 8, False)]),
    ("Call me Ishmael.", [("The user's name is Ishmael.", "identity", 8, False)]),
    ("I moved to Berlin last year", [("The user lives in Berlin.", "identity", 7, False)]),
    ("Hi! I work for Siemens and I live in Munich.",
     [("The user works for Siemens.", "work", 6, False), ("The user lives in Munich.", "identity", 7, False)]),
    ("I work as a nurse at the city hospital.", [("The user works as a nurse at the city hospital.", "work", 6, False)]),
    ("I'm allergic to penicillin, by the way.", [("The user is allergic to penicillin.", "health", 9, False)]),
    ("I have a dog named Rex", [("The user's dog is called Rex.", "relationship", 7, False)]),
    ("I don't eat pork", [("The user doesn't eat pork.", "preference", 7, False)]),
    ("I'm lactose intolerant", [("The user is lactose intolerant.", "health", 8, False)]),
    ("I prefer short answers.", [("The user prefers short answers.", "preference", 5, False)]),
    ("My favorite color is green", [("The user's favourite color is green.", "preference", 5, False)]),
    ("my birthday is on May 3rd", [("The user's birthday is May 3rd.", "identity", 7, False)]),
    ("I'm 34 years old", [("The user is 34 years old.", "identity", 5, False)]),
    ("My name is Bob, what's yours?", [("The user's name is Bob.", "identity", 8, False)]),
    ("i live in new york", [("The user lives in New York.", "identity", 7, False)]),
    ("I live in a small village near Lyon", [("The user lives in a small village near Lyon.", "identity", 7, False)]),
])
def test_english_statements_are_caught_in_the_neutral_form(text, expected):
    assert caught(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("记住，我对花生过敏", [("用户对花生过敏。", "health", 9, True)]),
    ("请记住我的车牌号是沪A12345", [("用户的车牌号是沪A12345。", "other", 7, True)]),
    ("我叫小明，你叫什么？", [("用户叫小明。", "identity", 8, False)]),
    ("你可以叫我老王", [("用户叫老王。", "identity", 8, False)]),
    ("我喜欢吃辣", [("用户喜欢吃辣。", "preference", 5, False)]),
    ("我不喜欢香菜", [("用户不喜欢香菜。", "preference", 5, False)]),
    ("我搬到了上海", [("用户住在上海。", "identity", 7, False)]),
    ("我住在北京", [("用户住在北京。", "identity", 7, False)]),
    ("我是素食者，我妹妹叫Lena。", [("用户是素食者。", "preference", 7, False), ("用户的妹妹叫Lena。", "relationship", 7, False)]),
    ("我在腾讯工作", [("用户在腾讯工作。", "work", 6, False)]),
    ("我是一名护士", [("用户是一名护士。", "work", 6, False)]),
    ("我最喜欢的颜色是蓝色", [("用户最喜欢的颜色是蓝色。", "preference", 5, False)]),
    ("我不吃香菜", [("用户不吃香菜。", "preference", 7, False)]),
    ("我有一只猫叫咪咪", [("用户的猫叫咪咪。", "relationship", 7, False)]),
    ("我今年30岁", [("用户今年30岁。", "identity", 5, False)]),
    ("我对花生、鸡蛋过敏", [("用户对花生、鸡蛋过敏。", "health", 9, False)]),
    ("我喜欢看小说", [("用户喜欢看小说。", "preference", 5, False)]),  # 小说 is a novel, not reported speech
])
def test_chinese_statements_are_caught_in_the_neutral_form(text, expected):
    assert caught(text) == expected


@pytest.mark.parametrize("text", [
    # questions, and statements turned into one by a tag
    "Where do I live?", "Do you remember my name?", "I live in Paris, right?", "Is my name Bob?",
    "我住在北京吗？", "我叫什么？", "我喜欢什么",
    # hypotheticals
    "If I lived in Paris I'd be happy.", "What if my name is Bob?", "Imagine I'm allergic to cats.",
    "Suppose I work as a pilot.", "如果我住在北京就好了", "假如我叫小明", "我要是对花生过敏的话怎么办",
    # reported and quoted speech
    "My friend said I live in Paris.", 'He told me "I live in Rome".', "She says my name is Tom.",
    "他说我叫小明", "“我住在上海”是一句话", "听说我对花生过敏",
    # negated
    "I'm not allergic to peanuts.", "My name is not Bob", "I don't live in Paris anymore.",
    "我对花生不过敏", "我不叫小明",
    # about someone else, or no fact
    "My friend lives in Paris.", "Tom is allergic to cats.", "我朋友住在上海", "Thanks!", "ok",
    "Can you help me plan a trip?", "Tell me a joke.",
    # words that look like a statement but are not about the person
    "Call me tomorrow.", "call me crazy", "Call me back later please", "I like it.", "I love you",
    "I like that idea", "我叫了外卖", "我叫他走", "我喜欢你", "我爱你",
    # idioms, jokes, stays, reminders and remarks for the moment
    "I live in fear of spiders", "I live in the moment.", "I'm allergic to meetings haha", "我住在酒店里，明天回家",
    "Please note the meeting is at 3pm.", "记住，下周一交报告", "Remember that tomorrow I have a dentist appointment",
    # pointing into the conversation
    "I prefer the second one.", "I like the red one", "I like the first option", "I like to think so",
    "我喜欢第二个", "我喜欢刚才那个", "我喜欢这个",
    # reminders are tasks, not facts
    "remember to buy milk", "Remember when we went to Rome?", "记住明天开会", "记得提醒我", "记住这个",
])
def test_questions_hypotheticals_quotes_and_negations_are_not_stored(text):
    assert caught(text) == []


def test_at_most_the_limit_and_each_statement_once():
    text = ("My name is Ann. I live in Oslo. I work as a pilot. I'm vegan. I like jazz. I have a cat named Tom. "
            "My name is Ann.")
    assert len(caught(text, limit=3)) == 3
    assert contents(text) == ["The user's name is Ann.", "The user lives in Oslo.", "The user works as a pilot.",
                              "The user is vegan.", "The user likes jazz."]
    assert contents("I'm vegan. I am vegan!") == ["The user is vegan."]


def test_a_turn_is_about_the_person_when_they_speak_of_themself():
    for text in ("I'm tired of rain", "Plan a trip for my sister", "Call me Bob", "we moved last year",
                 "I’ve got a dog", "给我妹妹写首诗", "我住在北京"):
        assert speaks_of_self(text), text
    for text in ("What's the weather in Paris?", "Write a poem about the sea", "Translate this into French",
                 "写一首关于大海的诗", "Is it raining in Oslo?"):
        assert not speaks_of_self(text), text


# ---------------------------------------------------------------- a model's answer

def test_a_plain_json_answer_is_read_with_its_fields_checked():
    answer = ('{"facts": [{"content": "I am vegetarian.", "category": "preference", "priority": 7, "action": "add"},'
              ' {"content": "My sister is called Lena.", "category": "family", "priority": "8", "action": "add"},'
              ' {"content": "I live in Berlin.", "category": "identity", "priority": 99, "action": "update",'
              ' "memory": "m2"},'
              ' {"content": "I like tea.", "category": "gossip", "action": "ignore"},'
              ' {"content": "   "}, {"category": "health"}, "a string", {"content": "x", "action": "explode"}]}')
    assert parse_facts(answer) == [
        Fact("The user is vegetarian.", "preference", 7, "add"),
        Fact("The user's sister is called Lena.", "relationship", 8, "add"),
        Fact("The user lives in Berlin.", "identity", 10, "update", "m2"),
        Fact("The user likes tea.", "other", 5, "ignore"),
    ]


@pytest.mark.parametrize("answer", [
    '```json\n[{"content": "I\'m allergic to peanuts.", "category": "health", "priority": 9, "action": "add"}]\n```',
    'Here is what I found:\n```\n{"facts": [{"content": "I\'m allergic to peanuts.", "category": "health", '
    '"priority": 9}]}\n```\nLet me know if you need more.',
    '<think>The user said they are allergic {maybe}.</think>\n{"memories": [{"content": "I\'m allergic to peanuts.",'
    ' "category": "health", "priority": 9, "action": "add"}]}',
    'Sure. {"content": "I\'m allergic to peanuts.", "category": "health", "priority": 9} That is all.',
])
def test_fences_thinking_and_wrapping_prose_are_read_through(answer):
    assert parse_facts(answer) == [Fact("The user is allergic to peanuts.", "health", 9, "add")]


@pytest.mark.parametrize("answer", [
    "", "Sure! The user seems to like tea.", "I could not find any facts.", '{"facts": "none"}',
    '{"facts": [{"content": "I like tea", "category": "preference"', "```json\nnot json\n```", "42", '"text"',
    '{"answer": "the user likes tea"}',
])
def test_junk_holds_no_facts(answer):
    assert parse_facts(answer) is None


def test_an_empty_list_is_an_answer_with_nothing_to_remember():
    assert parse_facts('{"facts": []}') == [] and parse_facts("```json\n[]\n```") == []
