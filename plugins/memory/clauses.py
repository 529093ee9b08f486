"""A message cut into sentences and clauses, and the sentences whose words are no fact told:
questions, hypotheticals, reported or quoted speech, jokes (docs/memory.md, "Learning from
conversations"). Shared by the English and Chinese rules of statements.py."""
from __future__ import annotations

import re

from gateway.text import has_han

QUOTES = re.compile(r"[\"“”„「」『』«»]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；;])|\n+")
# A comma (or "and"/"but") starts a new clause only where a new statement follows it, so that
# "I'm allergic to peanuts, shellfish and eggs" and "I live in Paris, France" stay whole.
_NEXT_EN = (r"(?:(?:and|but|so|also|plus|btw|oh)\s+)*(?:i|i'm|im|i've|i'd|my|we|you|he|she|it|they|remember|"
            r"please|what|what's|who|where|how|why|when|which|do|does|can|could|would|will|is|are)\b")
_SPLIT_EN = re.compile(rf"(?:\s*[,;:]\s*|\s+(?:and|but|so|plus)\s+)(?={_NEXT_EN})", re.IGNORECASE)
_SPLIT_ZH = re.compile(r"[，,；;：:]\s*(?=(?:而且|并且|但是|不过|还有|另外|所以|也|还)?[我你他她它请记别])|"
                       r"(?:而且|并且|但是|不过|还有|另外)(?=我)")

FILLERS_EN = re.compile(
    r"^(?:(?:oh|well|so|also|and|but|btw|by the way|actually|hi|hey|hello|ok|okay|fyi|yes|yeah|"
    r"just so you know|for your information|for the record|for what it's worth|anyway|plus)\b[\s,:!.-]*)+",
    re.IGNORECASE)
FILLERS_ZH = re.compile(r"^(?:(?:对了|顺便说一下|顺便说|顺便提一下|其实|另外|还有|而且|并且|但是|不过|所以|嗯|哦|噢|好的|你好|是的|对)[，,\s]*)+")

_QUESTION_EN = re.compile(
    r"^(?:what|who|whom|whose|where|when|why|how|which|do|does|did|is|are|am|was|were|can|could|would|"
    r"will|shall|should|may|have|has)\b", re.IGNORECASE)
_QUESTION_ZH = re.compile(r"什么|谁|哪|怎么|为什么|为何|几|多少|是不是|有没有|对不对|好不好|[吗么呢嘛]\s*$")
TAG_QUESTION = re.compile(
    r"^(?:right|correct|true|ok|okay|yes|no|eh|isn't it|aren't i|don't i|didn't i|am i|do i|is it|"
    r"对吧|是吧|对吗|是吗|对不对|是不是|好吗|好吧|行吗)\W*$", re.IGNORECASE)
HYPOTHETICAL_EN = re.compile(
    r"\b(?:if|suppose|supposing|imagine|imagining|assume|assuming|pretend|pretending|hypothetically|"
    r"wish|let's say|what if|in a story|role-?play|for example|e\.g)\b", re.IGNORECASE)
HYPOTHETICAL_ZH = re.compile(r"如果|假如|假设|要是|万一|假若|倘若|想象|比如|例如|的话|举个例子|扮演|假装")
REPORTED_EN = re.compile(r"\b(?:said|says|saying|told|tells|asked|asks|wrote|writes|quote|quoted|"
                         r"according to)\b", re.IGNORECASE)
REPORTED_ZH = re.compile(r"(?<!小)说(?!明)|告诉|问我|写道|写着|引用|据说|听说")
JOKING = re.compile(r"\b(?:lol|lmao|rofl|haha+|hehe+|jk|just kidding|kidding)\b|😂|🤣|😜|哈哈|开玩笑|逗你", re.IGNORECASE)


def split_sentences(text: str) -> list[str]:
    text = text.replace("’", "'").replace("‘", "'")
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def split_clauses(sentence: str) -> list[str]:
    parts = _SPLIT_ZH.split(sentence) if has_han(sentence) else _SPLIT_EN.split(sentence)
    return [p.strip() for p in parts if p and p.strip()]


def strip_end(text: str) -> str:
    return text.strip().rstrip(".!?。！？;；,，:：~～…").strip()


def is_question(clause: str, last_of_question: bool) -> bool:
    if last_of_question:
        return True
    bare = strip_end(clause)
    return bool(_QUESTION_ZH.search(bare) if has_han(bare) else _QUESTION_EN.match(bare))
