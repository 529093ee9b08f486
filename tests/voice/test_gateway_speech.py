"""Cutting a streamed reply into sentences to speak (plugins/voice/speech.py): the same
sentences however the reply is split into deltas; English and Chinese ends; never inside a
number, after a list number or an abbreviation; code blocks and actions not read; markdown read
as words."""
from __future__ import annotations

import pytest

from plugins.voice.speech import SentenceCutter, speakable


def sentences(text: str, step: int) -> list[str]:
    cutter, out = SentenceCutter(max_chars=120), []
    for start in range(0, len(text), step):
        out += cutter.feed(text[start:start + step])
    return out + cutter.flush()


CASES = [
    ("Pi is about 3.14 today. It costs 1,000.50 dollars! Really?", ["Pi is about 3.14 today.",
                                                                    "It costs 1,000.50 dollars!", "Really?"]),
    ("你好。今天天气很好！温度是3.5度；我们走吧", ["你好。", "今天天气很好！", "温度是3.5度；", "我们走吧"]),
    ("Steps:\n1. Buy milk\n2. Call Dr. Smith, e.g. at noon.", ["Steps:", "Buy milk", "Call Dr. Smith, e.g. at noon."]),
    ("Here:\n```python\nprint('not. read!')\n```\nDone.", ["Here:", "Done."]),
    ("Code:\n~~~\nx = 1. y\n~~~\nAfter it.", ["Code:", "After it."]),
    ("Sure. <action>He nods. Then smiles.</action> Here it is!", ["Sure.", "Here it is!"]),
    ("# Title\n**Bold** and _quiet_ words, see [the docs](http://x.y/z). ![a cat](c.png)\n---\n| a | b |",
     ["Title", "Bold and quiet words, see the docs.", "a cat", "a b"]),
    ("Visit example.com today. a < b holds.", ["Visit example.com today.", "a < b holds."]),
    # A Chinese end is given at once; quotes are not read.
    ("他说：“好的。”然后走了。", ["他说：好的。", "然后走了。"]),
]


@pytest.mark.parametrize("text, expected", CASES)
@pytest.mark.parametrize("step", [1, 2, 5, 1000])
def test_sentences_whatever_the_deltas(text, expected, step):
    assert sentences(text, step) == expected


def test_a_sentence_is_given_as_soon_as_it_is_complete():
    cutter = SentenceCutter()
    assert cutter.feed("The first one") == []
    assert cutter.feed(".") == []  # "3." may still become "3.14"
    assert cutter.feed(" The") == ["The first one."]
    assert cutter.feed(" second。") == ["The second。"]


def test_a_long_run_without_an_end_is_cut_at_a_pause():
    out = sentences("word, " * 60, 7)
    assert len(out) > 1 and all(len(piece) <= 120 for piece in out)


def test_an_unclosed_code_block_is_never_read():
    assert sentences("Look:\n```\nfor i in range(3): print(i). Done!", 4) == ["Look:"]


def test_nothing_to_say_is_skipped():
    assert speakable("---") == "" and speakable("**") == "" and speakable("- ") == ""
