"""What the AI core reads as the person's yes or no to a call waiting for confirmation
(docs/ai-core.md, "Confirmation"): a whole message that says only that, in English or Chinese."""
from __future__ import annotations

import pytest

from plugins.ai_core.confirmation import answer_of


@pytest.mark.parametrize("text", ["yes", "Yes!", " YES. ", "ok", "OK", "okay", "sure", "go ahead", "do it",
                                  "确认", "确认。", "是", "是的", "好的", "可以", "ｙｅｓ"])
def test_a_plain_yes(text):
    assert answer_of(text) == "yes"


@pytest.mark.parametrize("text", ["no", "No.", "cancel", "don't", "不", "不要", "取消", "算了"])
def test_a_plain_no(text):
    assert answer_of(text) == "no"


@pytest.mark.parametrize("text", ["yes, and turn on the light", "yesterday", "ok but later", "not now",
                                  "确认一下门锁了吗", "", "what do my notes say?"])
def test_anything_else_is_neither(text):
    assert answer_of(text) is None
