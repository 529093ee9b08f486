"""Explicit statements a person makes about themself, caught by rules in English and Chinese —
what extraction stores when no language model is configured or the model fails (docs/memory.md,
"Learning from conversations").

Only the person's own words are read, one clause at a time, and only a clause that *begins*
with a statement of a known shape: "remember that …", "my name is …", "call me …", "I'm
allergic to …", "I'm vegetarian", "I don't eat …", "my sister is called …", "I live in …", "I
moved to …", "I work as / at …", "I like …", "my favourite … is …", "my birthday is …", "记住…",
"我叫…", "我喜欢…", "我对…过敏", "我住在…", "我在…工作", "我妹妹叫…", "我吃素"…

Conservative on purpose; a missed fact is cheaper than a wrong one. Not stored: questions (and
statements ending in a tag question: "…, right?", "…对吧？"), hypotheticals ("if", "imagine",
"如果", "假如"…), reported or quoted speech ("my friend said …", "他说…", anything in quotation
marks), negated statements ("my name is not …", "我对花生不过敏"), a clause about someone else,
and values that are pronouns ("I like it", "我喜欢你").

Each statement is read as a short first-person sentence ("I'm allergic to peanuts", "I live in
Berlin" for "I moved to Berlin", "我对花生过敏") and stored in the neutral form (plugins/memory/
person.py): "The user is allergic to peanuts.", "The user lives in Berlin.", "用户对花生过敏。" —
the shape the memory service's slot rules read, so "I moved to Berlin" supersedes "I live in
Paris"."""
from __future__ import annotations

import re
from dataclasses import dataclass

from gateway.text import has_han

from .clauses import (FILLERS_EN, FILLERS_ZH, HYPOTHETICAL_EN, HYPOTHETICAL_ZH, JOKING, QUOTES, REPORTED_EN,
                      REPORTED_ZH, TAG_QUESTION, is_question, split_clauses, split_sentences, strip_end)
from .person import neutral
from .statement_rules import RELATIVE_EN, RELATIVE_ZH, known_statement, sentence_en, sentence_zh

CATEGORIES = ("identity", "preference", "health", "relationship", "work", "schedule", "other")


@dataclass(frozen=True)
class Statement:
    content: str      # the neutral form in the person's language: "The user …" / "用户…"
    category: str
    priority: int
    explicit: bool    # said with "remember …" / "记住…"


_REMEMBER_EN = re.compile(
    r"^(?:please\s+|(?P<polite>(?:can|could|will|would) you(?: please)?\s+))?"
    r"(?:remember|don't forget|do not forget|keep in mind|make a note|memorize|memorise)"
    r"(?:\s+(?:this|that|the fact))?(?:\s+that)?\s*[:,]?\s*(?P<rest>.*)$", re.IGNORECASE)
_REMEMBER_ZH = re.compile(
    r"^(?:请|麻烦)?(?:你)?(?:帮我|给我)?(?:记住|记着|记一下|记下来|记下|别忘了|不要忘了|不要忘记|别忘记)(?:这个|这件事|一下)?[：:，,]?\s*"
    r"(?P<rest>.*)$")
_REMINDER_EN = re.compile(r"^(?:to|when|me|us|where|how|what|why|it|this|that|tomorrow|tonight|today|next|later)\b",
                          re.IGNORECASE)
_REMINDER_ZH = re.compile(r"^(?:要|去|提醒|明天|今天|后天|今晚|明晚|下周|下个|下午|晚上|早上|待会|一会|这个|那个|你)")

_KEYWORDS = [
    ("health", re.compile(r"allerg|medicat|medicine|asthma|diabet|pill|doctor|blood|surgery|过敏|药|病|医生|血", re.I)),
    ("relationship", re.compile(rf"\b(?:{RELATIVE_EN})s?\b|{RELATIVE_ZH}", re.I)),
    ("work", re.compile(r"\b(?:job|work|office|employer|company|project|colleague|boss)\b|工作|公司|项目|上班|同事", re.I)),
    ("schedule", re.compile(r"\b(?:every|daily|weekly|monthly|mondays?|tuesdays?|wednesdays?|thursdays?|fridays?|"
                            r"saturdays?|sundays?|mornings|evenings|weekends)\b|每天|每周|每个|周[一二三四五六日末]|星期", re.I)),
    ("preference", re.compile(r"\b(?:like|love|prefer|hate|favou?rite|enjoy)\b|喜欢|爱|讨厌|偏好|最好", re.I)),
]


def _category_of(text: str) -> str:
    for category, pattern in _KEYWORDS:
        if pattern.search(text):
            return category
    return "other"


def _explicit(rest: str) -> tuple[str, str, int] | None:
    """What follows "remember (that)" / "记住": a known statement, or else the words as said
    (first person, not a reminder or a pronoun)."""
    rest = strip_end(rest)
    found = known_statement(rest)
    if found is not None:
        content, category, priority = found
        return content, category, max(priority, 7)
    chinese = has_han(rest)
    if len(rest) < (2 if chinese else 6) or len(rest) > 300:
        return None
    if (_REMINDER_ZH if chinese else _REMINDER_EN).match(rest):
        return None
    if not chinese and re.match(r"^(?:you|your)\b", rest, re.IGNORECASE):
        return None
    return (sentence_zh(rest) if chinese else sentence_en(rest)), _category_of(rest), 7


_ABOUT_SELF = re.compile(r"\b(?:i|i'm|im|i've|i'd|i'll|me|my|mine|myself|we|we're|our|ours|us)\b|我|咱|俺|本人",
                         re.IGNORECASE)


def speaks_of_self(text: str) -> bool:
    """Whether the person says anything about themself at all: a cheap test before a model is
    asked ("write a poem about the sea" teaches nothing about them)."""
    return bool(_ABOUT_SELF.search(text.replace("’", "'")))


def explicit_statements(text: str, limit: int = 5) -> list[Statement]:
    """The statements a person's message makes about themself, in order, at most `limit`,
    each once."""
    found: list[Statement] = []
    seen: set[str] = set()
    for sentence in split_sentences(text):
        chinese = has_han(sentence)
        if (HYPOTHETICAL_ZH if chinese else HYPOTHETICAL_EN).search(sentence):
            continue
        if QUOTES.search(sentence) or (REPORTED_ZH if chinese else REPORTED_EN).search(sentence):
            continue
        if JOKING.search(sentence):
            continue
        question = sentence.rstrip().endswith(("?", "？"))
        clauses = split_clauses(sentence)
        if question and clauses and TAG_QUESTION.match(strip_end(clauses[-1]) + "?"):
            continue  # "I live in Paris, right?": the whole sentence is asked
        explicit = False
        for index, clause in enumerate(clauses):
            clause = (FILLERS_ZH if has_han(clause) else FILLERS_EN).sub("", clause).strip()
            remember = (_REMEMBER_ZH if has_han(clause) else _REMEMBER_EN).match(clause)
            asked = is_question(clause, question and index == len(clauses) - 1)
            if asked and not (remember is not None and remember.groupdict().get("polite")):
                continue  # "can you remember that …?" is a request, every other question is not told
            if remember is not None:
                explicit = True  # "remember that …" covers the rest of the sentence
                rest = remember["rest"].strip()
                if not rest:
                    continue
                statement = _explicit(rest)
            elif explicit:
                statement = _explicit(clause)
            else:
                statement = known_statement(clause)
            if statement is None:
                continue
            content, category, priority = statement
            content = neutral(content)
            key = content.casefold()
            if key in seen:
                continue
            seen.add(key)
            found.append(Statement(content, category, priority, explicit))
            if len(found) >= limit:
                return found
    return found
