"""Memories in the neutral form and said in the second person (plugins/memory/person.py),
with no model: what the rules, extraction and the migration store, and what recall shows."""
from __future__ import annotations

import pytest

from plugins.memory.person import neutral, second_person


@pytest.mark.parametrize("said, stored, shown", [
    ("I am allergic to peanuts", "The user is allergic to peanuts.", "You are allergic to peanuts."),
    ("I'm vegetarian", "The user is vegetarian.", "You are vegetarian."),
    ("I have a dog called Max", "The user has a dog called Max.", "You have a dog called Max."),
    ("I've got two kids", "The user has got two kids.", "You have got two kids."),
    ("My name is Bob", "The user's name is Bob.", "Your name is Bob."),
    ("Call me Bob", "The user's name is Bob.", "Your name is Bob."),
    ("I like green tea", "The user likes green tea.", "You like green tea."),
    ("I don't like cats", "The user doesn't like cats.", "You don't like cats."),
    ("I do not eat pork", "The user does not eat pork.", "You do not eat pork."),
    ("I live in Berlin", "The user lives in Berlin.", "You live in Berlin."),
    ("I work as a nurse", "The user works as a nurse.", "You work as a nurse."),
    ("I really love my dog", "The user really loves their dog.", "You really love your dog."),
    ("I go to the gym on Mondays", "The user goes to the gym on Mondays.", "You go to the gym on Mondays."),
    ("I study Japanese", "The user studies Japanese.", "You study Japanese."),
    ("I watch films with my wife", "The user watches films with their wife.", "You watch films with your wife."),
    ("I never drink alcohol", "The user never drinks alcohol.", "You never drink alcohol."),
    ("I gave up coffee", "The user gave up coffee.", "You gave up coffee."),
    ("I moved to Berlin", "The user moved to Berlin.", "You moved to Berlin."),
    ("I can swim", "The user can swim.", "You can swim."),
    ("My favourite colour is green", "The user's favourite colour is green.", "Your favourite colour is green."),
    ("I'm 34 years old", "The user is 34 years old.", "You are 34 years old."),
    ("我对花生过敏", "用户对花生过敏。", "你对花生过敏。"),
    ("我叫小明", "用户叫小明。", "你叫小明。"),
    ("你可以叫我小明", "用户叫小明。", "你叫小明。"),
    ("我是素食者", "用户是素食者。", "你是素食者。"),
    ("我喜欢猫", "用户喜欢猫。", "你喜欢猫。"),
    ("我住在上海", "用户住在上海。", "你住在上海。"),
    ("我的职业是护士", "用户的职业是护士。", "你的职业是护士。"),
    ("我妹妹叫莉娜", "用户的妹妹叫莉娜。", "你的妹妹叫莉娜。"),
    ("我们家有两只猫", "我们家有两只猫。", "我们家有两只猫。"),
])
def test_a_statement_is_stored_neutral_and_shown_in_the_second_person(said, stored, shown):
    assert neutral(said) == stored
    assert neutral(stored) == stored            # already neutral: unchanged
    assert second_person(stored) == shown


def test_a_memory_still_in_the_first_person_is_shown_in_the_second_person_too():
    assert second_person("I'm allergic to peanuts") == "You are allergic to peanuts."
    assert second_person("My sister is called Lena") == "Your sister is called Lena."
    assert second_person("Peanut allergy") == "Peanut allergy"   # no person: as it is
