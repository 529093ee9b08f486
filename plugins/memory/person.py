"""The grammatical person of memories (docs/memory.md, "A memory").

Memories are stored in a neutral form whoever said them and however: "The user is allergic to
peanuts." / "用户对花生过敏。" (`neutral`), and shown to the model in the second person, as the
assistant would say them to the person: "You are allergic to peanuts." / "你对花生过敏。"
(`second_person`). Both are rules over the sentence's start and its pronouns — short statements
about oneself, the shape memories have; a text in neither shape is left as it is."""
from __future__ import annotations

import re

from gateway.text import has_han

from .rules import RELATIONS

_ADVERBS = ("really", "also", "still", "now", "currently", "usually", "often", "always", "never", "only",
            "sometimes", "mostly", "just", "recently", "absolutely", "totally", "no longer", "actually")
_ADVERB = "|".join(sorted((a.replace(" ", r"\s+") for a in _ADVERBS), key=len, reverse=True))
_MODALS = {"can", "could", "will", "would", "should", "must", "may", "might", "shall", "did", "had", "was",
           "used", "can't", "gave", "went", "got", "made", "took", "came", "saw", "ran", "ate", "drank",
           "bought", "left", "met", "grew", "began", "became", "broke", "chose", "drove", "fell", "felt", "found",
           "flew", "forgot", "heard", "kept", "knew", "lost", "paid", "quit", "said", "sent", "sold", "spent",
           "stood", "swam", "taught", "thought", "told", "understood", "woke", "won", "wrote", "were", "cannot", "won't", "wouldn't", "couldn't", "shouldn't", "didn't", "wasn't", "hadn't"}
_AUXILIARY_EN = [  # first person → the user, at the start of a sentence
    (r"i\s+am\b|i'm\b|im\b", "is"), (r"i've\b|i\s+have\b", "has"), (r"i'd\b", "would"),
    (r"i'll\b", "will"), (r"i\s+don't\b", "doesn't"), (r"i\s+do\s+not\b", "does not"),
    (r"i\s+do\b", "does"), (r"i\s+was\b", "was"),
]
_RELATIVES_ZH = "|".join(sorted((word for word in RELATIONS if not word.isascii()), key=len, reverse=True))



def _third(verb: str) -> str:
    lower = verb.lower()
    if lower in _MODALS or lower.endswith("ed"):
        return verb
    if lower == "have":
        return "has"
    if lower == "do":
        return "does"
    if re.search(r"[^aeiou]y$", lower):
        return verb[:-1] + "ies"
    if re.search(r"(?:s|sh|ch|x|z|o)$", lower):
        return verb + "es"
    return verb + "s"


def _base(verb: str) -> str:
    lower = verb.lower()
    if lower == "has":
        return "have"
    if lower == "does":
        return "do"
    if lower.endswith("ies") and len(lower) > 4:
        return verb[:-3] + "y"
    if re.search(r"(?:sses|shes|ches|xes|zes|oes)$", lower):
        return verb[:-2]
    if lower.endswith("s") and not lower.endswith("ss"):
        return verb[:-1]
    return verb


def _finish(text: str, stop: str) -> str:
    text = text.strip()
    if not text:
        return text
    if text[-1] not in ".!?。！？":
        text += stop
    return text


def _pronouns_en(rest: str, mine: str, me: str, myself: str, i: str) -> str:
    rest = re.sub(r"\bmy\b", mine, rest, flags=re.IGNORECASE)
    rest = re.sub(r"\bmine\b", "theirs" if mine == "their" else "yours", rest, flags=re.IGNORECASE)
    rest = re.sub(r"\bmyself\b", myself, rest, flags=re.IGNORECASE)
    rest = re.sub(r"\bme\b", me, rest, flags=re.IGNORECASE)
    rest = re.sub(r"\bI'm\b", f"{i} is" if i == "the user" else f"{i} are", rest)
    return re.sub(r"\bI\b", i, rest)


def neutral(text: str) -> str:
    """A first-person statement as the neutral form: "I'm allergic to peanuts" → "The user is
    allergic to peanuts.", "My sister is called Lena" → "The user's sister is called Lena.",
    "Call me Bob" → "The user's name is Bob.", "我对花生过敏" → "用户对花生过敏。". A text
    already neutral, or in no person, only gets its final full stop."""
    text = " ".join(text.replace("’", "'").split())
    if not text:
        return text
    if has_han(text):
        if re.match(r"^(?:你可以|请|以后)?叫我", text):
            text = re.sub(r"^(?:你可以|请|以后)?叫我", "用户叫", text)
        text = re.sub(rf"我(?:的)?(?={_RELATIVES_ZH})", "用户的", text)  # 我妹妹 → 用户的妹妹
        return _finish(re.sub(r"我(?!们)", "用户", text), "。")
    body = text
    match = re.match(r"^(?:you can |please )?call me\s+(.+)$", body, re.IGNORECASE)
    if match:
        return _finish(f"The user's name is {match.group(1)}", ".")
    for pattern, verb in _AUXILIARY_EN:
        match = re.match(rf"^(?:{pattern})\s*", body, re.IGNORECASE)
        if match:
            rest = _pronouns_en(body[match.end():], "their", "them", "themself", "the user")
            return _finish(f"The user {verb} {rest}".rstrip(), ".")
    match = re.match(rf"^i\s+((?:(?:{_ADVERB})\s+)*)([A-Za-z'-]+)\b\s*", body, re.IGNORECASE)
    if match:
        adverbs, verb = match.group(1), match.group(2)
        rest = _pronouns_en(body[match.end():], "their", "them", "themself", "the user")
        return _finish(f"The user {adverbs.lower()}{_third(verb)} {rest}".rstrip(), ".")
    match = re.match(r"^my\s+", body, re.IGNORECASE)
    if match:
        rest = _pronouns_en(body[match.end():], "their", "them", "themself", "the user")
        return _finish(f"The user's {rest}", ".")
    return _finish(body[:1].upper() + body[1:], ".")


def second_person(text: str) -> str:
    """A memory as said to the person: "The user is allergic to peanuts." → "You are allergic to
    peanuts.", "The user's sister is called Lena." → "Your sister is called Lena.", "用户对花生过敏。"
    → "你对花生过敏。". A memory still in the first person ("I'm vegetarian") is turned too."""
    text = " ".join(text.split())
    if not text:
        return text
    if has_han(text):
        return re.sub(r"用户|我(?!们)", "你", text)
    if re.match(r"^(?:the user|i|i'm|i've|i'd|my|call me)\b", text, re.IGNORECASE) and \
            not re.match(r"^the user'?s?\b", text, re.IGNORECASE):
        text = neutral(text)
    match = re.match(r"^the user's\s+", text, re.IGNORECASE)
    if match:
        rest = text[match.end():]
    else:
        match = re.match(rf"^the user\s+((?:(?:{_ADVERB})\s+)*)([A-Za-z'-]+)\b", text, re.IGNORECASE)
        if not match:
            return text
        adverbs, verb = match.group(1), match.group(2)
        lower = verb.lower()
        said = {"is": "are", "was": "were", "isn't": "aren't", "wasn't": "weren't", "doesn't": "don't",
                "hasn't": "haven't"}.get(lower) or (verb if lower in _MODALS or lower.endswith("ed") else _base(verb))
        rest = text[match.end():]
        rest = re.sub(r"\bthe user's\b", "your", rest, flags=re.IGNORECASE)
        rest = re.sub(r"\bthe user\b", "you", rest, flags=re.IGNORECASE)
        rest = re.sub(r"\btheir\b", "your", rest)
        rest = re.sub(r"\bthemself\b|\bthemselves\b", "yourself", rest)
        return f"You {adverbs.lower()}{said}{rest}"
    rest = re.sub(r"\bthe user's\b", "your", rest, flags=re.IGNORECASE)
    rest = re.sub(r"\bthe user\b", "you", rest, flags=re.IGNORECASE)
    rest = re.sub(r"\btheir\b", "your", rest)
    return f"Your {rest}"
