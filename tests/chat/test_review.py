"""The reply classifier: a pure function, so every rule is checked on plain strings."""
from __future__ import annotations

import pytest

from plugins.chat.review import looks_like_markdown, review_reply, stored_role


def kinds(text: str) -> list[tuple[str, str]]:
    return [(part["type"], part["content"]) for part in review_reply(text)]


def test_plain_text_is_one_chat_message():
    assert review_reply("Hello there.") == [{"type": "chat", "content": "Hello there.", "delay_ms": 0,
                                             "metadata": {}}]


@pytest.mark.parametrize("text", ["", "   \n\n  "])
def test_nothing_gives_no_messages(text):
    assert review_reply(text) == []


def test_action_tag_inside_a_sentence_splits_it():
    assert kinds("Sure. <action>nods slowly</action> Here it is.") == [
        ("chat", "Sure."), ("action", "nods slowly"), ("chat", "Here it is.")]


def test_action_tag_is_case_insensitive_and_whitespace_is_collapsed():
    assert kinds("<ACTION>\n  stretches\n  and yawns </ACTION>") == [("action", "stretches and yawns")]


@pytest.mark.parametrize("text, action", [("【挥手】", "挥手"), ("（微笑着点头）", "微笑着点头"), ("[[bows]]", "bows")])
def test_legacy_bracket_paragraphs_are_actions(text, action):
    assert kinds(f"{text}\n\n你好") == [("action", action), ("chat", "你好")]


def test_brackets_inside_a_sentence_are_not_actions():
    assert kinds("I said 【hello】 to her.") == [("chat", "I said 【hello】 to her.")]


def test_code_blocks_keep_their_language_and_are_never_split():
    text = "Try this:\n\n```Python\ndef f():\n\n    return 1\n```\nDone."
    parts = review_reply(text)
    assert [(p["type"], p["metadata"]) for p in parts] == [("chat", {}), ("code", {"language": "python"}),
                                                          ("chat", {})]
    assert parts[1]["content"] == "def f():\n\n    return 1"


def test_a_fence_without_language_and_an_unclosed_fence():
    assert review_reply("```\nx = 1\n```")[0]["metadata"] == {"language": "text"}
    assert kinds("Look:\n~~~sh\nls -la") == [("chat", "Look:"), ("code", "ls -la")]


def test_action_tags_inside_code_stay_code():
    assert kinds("```html\n<action>not narration</action>\n```") == [("code", "<action>not narration</action>")]


def test_a_markdown_run_is_one_message_with_its_plain_paragraphs():
    text = "# Plan\n\nFirst we talk.\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    assert kinds(text) == [("markdown", text)]


@pytest.mark.parametrize("text", ["**bold** words", "see [docs](https://x.example)", "run `ls`", "1. first",
                                  "> quoted", "---"])
def test_markdown_is_recognised(text):
    assert looks_like_markdown(text)


@pytest.mark.parametrize("text", ["Just a sentence.", "2 * 3 = 6", "a - b", "price: $5"])
def test_plain_sentences_are_chat(text):
    assert not looks_like_markdown(text)


def test_search_results_become_markdown_or_chat_with_their_url():
    parts = review_reply('<search_result url="https://news.example/a">**Rain** today</search_result>'
                         "<search_result>sunny tomorrow</search_result>")
    assert [(p["type"], p["content"], p["metadata"]) for p in parts] == [
        ("markdown", "**Rain** today", {"url": "https://news.example/a"}), ("chat", "sunny tomorrow", {})]


def test_stray_tags_are_removed():
    assert kinds("Hello <action>unfinished") == [("chat", "Hello unfinished")]


def test_mixed_reply_keeps_order_and_delays_follow_reading_time():
    parts = review_reply("Hi!\n\n<action>waves</action>\n\n```js\nx()\n```\n\n- a\n- b")
    assert [p["type"] for p in parts] == ["chat", "action", "code", "markdown"]
    assert parts[0]["delay_ms"] == 0
    assert parts[1]["delay_ms"] == 300 + 15 * len("Hi!")
    assert review_reply("x" * 500 + "\n\n<action>a</action>")[1]["delay_ms"] == 2000


def test_stored_roles():
    assert stored_role("action") == "action"
    assert stored_role("code") == stored_role("markdown") == stored_role("chat") == "assistant"
