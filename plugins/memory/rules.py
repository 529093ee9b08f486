"""When two memories of one person say the same thing, and when a new one contradicts an old one.
Pure functions over text, so the rules are tested without a service (docs/memory.md, "Merging
and superseding").

- A *slot* is a fact a person has one value of: their name, where they live, where they work,
  their job, age, birthday, the name of their wife / husband / partner / mother / father / boss,
  "my favourite X". `slots(text)` finds them in English and Chinese, first person ("my name is",
  "我叫") or third ("the user's name is", as a model writes extracted facts). Two memories with
  the same slot and different values contradict each other; the same slot and value say the
  same thing.
- A *negation flip*: the same words with and without a negation ("I like tea" / "I don't like
  tea", "我喜欢猫" / "我不喜欢猫") contradict each other.
- *Guards* keep near-identical embeddings of different facts apart: different relatives ("my son
  is allergic" / "my daughter is allergic"), different numbers ("two children" / "three"), a
  negation flip, or a slot conflict are never merged, however close their vectors are.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from gateway.text import HAN, HAN_RANGES

# Relatives and people a fact may be about; a fact about one is not a fact about another.
RELATIONS = {
    "sister": "sister", "sisters": "sister", "brother": "brother", "brothers": "brother",
    "wife": "wife", "husband": "husband", "partner": "partner", "girlfriend": "girlfriend",
    "boyfriend": "boyfriend", "mother": "mother", "mom": "mother", "mum": "mother",
    "father": "father", "dad": "father", "son": "son", "sons": "son", "daughter": "daughter",
    "daughters": "daughter", "child": "child", "children": "child", "kid": "child", "kids": "child",
    "friend": "friend", "friends": "friend", "boss": "boss", "colleague": "colleague",
    "grandmother": "grandmother", "grandma": "grandmother", "grandfather": "grandfather",
    "grandpa": "grandfather", "aunt": "aunt", "uncle": "uncle", "cousin": "cousin",
    "dog": "dog", "cat": "cat",
    "妹妹": "sister", "姐姐": "sister", "哥哥": "brother", "弟弟": "brother", "妻子": "wife",
    "老婆": "wife", "太太": "wife", "丈夫": "husband", "老公": "husband", "先生": "husband",
    "男朋友": "boyfriend", "女朋友": "girlfriend", "妈妈": "mother", "母亲": "mother",
    "爸爸": "father", "父亲": "father", "儿子": "son", "女儿": "daughter", "孩子": "child",
    "朋友": "friend", "老板": "boss", "同事": "colleague", "奶奶": "grandmother",
    "外婆": "grandmother", "爷爷": "grandfather", "外公": "grandfather", "阿姨": "aunt",
    "叔叔": "uncle", "狗": "dog", "猫": "cat",
}
# Relatives a person has one of: their name is a slot. (Several sisters may each have a name,
# so "my sister is called Mia" adds a memory rather than renaming Lena.)
UNIQUE_RELATIONS = {"wife", "husband", "partner", "girlfriend", "boyfriend", "mother", "father", "boss"}

NUMBER_WORDS = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
                "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
                "零": "0", "一": "1", "两": "2", "二": "2", "三": "3", "四": "4", "五": "5", "六": "6",
                "七": "7", "八": "8", "九": "9", "十": "10"}
NEGATIONS_EN = {"not", "no", "never", "dislike", "dislikes", "hate", "hates"}
# "dislike" and "hate" flip "like" / "love": their stems are compared below without them.
NEGATION_STEMS = {"dislike": "like", "dislikes": "likes", "hate": "love", "hates": "loves"}
NEGATIONS_ZH = ("没有", "不", "没", "别", "非", "无")
# Words that change neither the fact nor its polarity ("I do not like" = "I don't like").
FILLERS = {"do", "does", "did", "really", "very", "much", "quite", "also", "still", "now", "currently",
           "actually", "the", "a", "an", "that", "remember", "please", "user", "i", "my", "me",
           "is", "am", "are", "m", "s", "t", "re", "ve", "d", "ll"}
FILLERS_ZH = set("的了很也还都在是我用户请真非常")

_VALUE_END = re.compile(r"\s(?:and|but|with|because|since|so|who|which|while|for)\s|[,.;!?，。；！？、\n(（]")
_EN_WORDS = re.compile(r"[a-z0-9]+")


def normalise(text: str) -> str:
    """NFKC, lower case, "n't" spelt out, one space between words, no trailing punctuation."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    text = re.sub(r"\bcan't\b", "can not", text)
    text = re.sub(r"\bwon't\b", "will not", text)
    text = re.sub(r"n't\b", " not", text)
    return re.sub(r"\s+", " ", text).strip().rstrip(".!?。！？;；")


def _value(raw: str) -> str:
    """A slot's value: up to the first clause boundary, without articles or spaces around it."""
    cut = _VALUE_END.search(raw)
    value = (raw[:cut.start()] if cut else raw).strip()
    value = re.sub(r"^(?:the|a|an|in|at|on)\s+", "", value)
    value = re.sub(r"\s+(?:now|currently|these days|at the moment)$", "", value)
    value = re.sub(r"[了啊呢吧呀]+$", "", value)
    value = value.replace("favorite", "favourite").replace("color", "colour")
    return re.sub(r"\s+", " ", value).strip(" '\"")


# (slot key or a function of the match, pattern on normalised text). "{V}" is the value.
_V = r"(?P<v>[^,.;!?，。；！？\n]{1,60})"
_ZV = r"(?P<v>[^,.;!?，。；！？、\s]{1,24}?)"
_SUBJECT_I = r"(?:i|the user|user)"
_SUBJECT_MY = r"(?:my|the user's|user's|his|her)"
_RELATION_EN = "|".join(sorted((k for k, v in RELATIONS.items() if v in UNIQUE_RELATIONS and k.isascii()),
                               key=len, reverse=True))
_RELATION_ZH = "|".join(sorted((k for k, v in RELATIONS.items() if v in UNIQUE_RELATIONS and not k.isascii()),
                               key=len, reverse=True))
_ZH_END = r"(?=[，。；！？,.;!?\s]|$)"
_ZH_I = "(?:我|用户)"  # the person, as they say it or in the neutral form
SLOT_PATTERNS: list[tuple[str, re.Pattern]] = [(key, re.compile(pattern)) for key, pattern in [
    ("name", rf"\b(?:{_SUBJECT_MY} name is|i am called|i'm called|call me|the user is called|"
             rf"user is called)\s+{_V}"),
    ("home", rf"\b(?:{_SUBJECT_I} (?:live|lives|am living|is living|reside|resides) in|i'm living in|"
             rf"{_SUBJECT_I} (?:moved|has moved|have moved) to)\s+{_V}"),
    ("workplace", rf"\b{_SUBJECT_I} (?:work|works) (?:at|for)\s+{_V}"),
    ("job", rf"\b(?:{_SUBJECT_I} (?:work|works) as|{_SUBJECT_MY} (?:job|profession|occupation) is)\s+{_V}"),
    ("age", r"\b(?:i am|i'm|the user is|user is)\s+(?P<v>\d{1,3})\s+years?\s+old"),
    ("birthday", rf"\b(?:{_SUBJECT_MY} birthday is(?: on)?|{_SUBJECT_I} (?:was|were) born on)\s+{_V}"),
    ("name_of:{K}", rf"\b{_SUBJECT_MY} (?P<k>{_RELATION_EN})(?:'s name is| is called| is named| name is)\s+{_V}"),
    ("favourite:{K}", rf"\b{_SUBJECT_MY} (?:favourite|favorite) (?P<k>[a-z][a-z ]{{1,20}}?) is\s+{_V}"),
    ("name", rf"(?:{_ZH_I}(?:叫|名叫|的名字是|的名字叫|名字叫|名字是)){_ZV}{_ZH_END}"),
    ("home", rf"{_ZH_I}(?:现在|目前)?(?:住在|家在|搬到了|搬到){_ZV}{_ZH_END}"),
    ("workplace", r"(?:我|用户)在(?P<v>[^,.;!?，。；！？、\s]{1,24}?)(?:工作|上班)"),
    ("job", rf"{_ZH_I}(?:的职业是|的工作是|是一名){_ZV}{_ZH_END}"),
    ("age", r"(?:我|用户)(?:今年)?(?P<v>\d{1,3})岁"),
    ("birthday", rf"{_ZH_I}的?生日[是在]{_ZV}{_ZH_END}"),
    ("name_of:{K}", rf"(?:我|用户)的?(?P<k>{_RELATION_ZH})(?:叫|名叫|的名字是|的名字叫){_ZV}{_ZH_END}"),
    ("favourite:{K}", rf"(?:我|用户)最喜欢的(?P<k>[^，。,.\s是]{{1,8}})是{_ZV}{_ZH_END}"),
]]


@dataclass(frozen=True)
class Slot:
    key: str      # "name", "home", "name_of:wife", "favourite:colour"...
    value: str    # normalised
    span: tuple[int, int]


def slots(text: str) -> list[Slot]:
    """The slots `text` states, one per key (the first statement of each)."""
    text = normalise(text)
    found: dict[str, Slot] = {}
    taken: list[tuple[int, int]] = []
    for key, pattern in SLOT_PATTERNS:
        for match in pattern.finditer(text):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue
            raw = match.group("v")
            cut = _VALUE_END.search(raw)
            end = match.start("v") + cut.start() if cut else match.end()
            value = _value(raw)
            if not value:
                continue
            if "{K}" in key:
                subject = match.group("k").strip()
                subject = RELATIONS.get(subject, subject)
                subject = subject.replace("favorite", "favourite").replace("color", "colour")
                key = key.replace("{K}", subject)
            found.setdefault(key, Slot(key, value, (match.start(), end)))
            taken.append((match.start(), end))
    return list(found.values())


def slot_statement(text: str) -> Slot | None:
    """The one slot `text` is about, when it states exactly one and little else (at most three
    other word or two other Chinese characters): only such a memory may be replaced whole by a
    newer value, since nothing else it says would be lost."""
    found = slots(text)
    if len(found) != 1:
        return None
    slot = found[0]
    text = normalise(text)
    rest = text[:slot.span[0]] + " " + text[slot.span[1]:]
    words = [w for w in _EN_WORDS.findall(rest) if w not in FILLERS and w not in {"and", "now", "currently"}]
    chinese = [c for c in HAN.findall(rest) if c not in FILLERS_ZH and c not in "现目前"]
    return slot if len(words) <= 1 and len(chinese) <= 2 else None


def _terms(text: str) -> list[str]:
    """Words (English) and characters (Chinese) in order, fillers left out."""
    text = normalise(text)
    terms: list[str] = []
    for piece in re.findall(f"[a-z0-9']+|[{HAN_RANGES}]", text):
        for word in piece.split("'"):
            if word and word not in FILLERS and word not in FILLERS_ZH:
                terms.append(word)
    return terms


def _polarity_free(text: str) -> tuple[tuple[str, ...], int]:
    """The text's terms without negations, and how many negations it had."""
    normalised = normalise(text)
    negations = 0
    for word in NEGATIONS_ZH:
        negations += normalised.count(word)
        normalised = normalised.replace(word, " ")
    terms = []
    for term in _terms(normalised):
        if term in NEGATIONS_EN:
            negations += 1
            if term in NEGATION_STEMS:
                terms.append(_verb_base(NEGATION_STEMS[term]))
            continue
        terms.append(_verb_base(term))
    return tuple(terms), negations


def _verb_base(word: str) -> str:
    """"likes" → "like", "goes" → "go": the neutral form's "The user likes tea" and "The user
    doesn't like tea" are the same words but for the negation."""
    if len(word) <= 3 or not word.isascii():
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if re.search(r"(?:sh|ch|x|z|o|ss)es$", word):
        return word[:-2]
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def negation_flip(old: str, new: str) -> bool:
    """The same statement, negated in one of the two ("I like tea" / "I don't like tea")."""
    old_terms, old_negations = _polarity_free(old)
    new_terms, new_negations = _polarity_free(new)
    return bool(old_terms) and old_terms == new_terms and (old_negations % 2) != (new_negations % 2)


def relations(text: str) -> set[str]:
    """The people (and pets) a text is about, by their relation to the person."""
    normalised = normalise(text)
    found = {RELATIONS[word] for word in _EN_WORDS.findall(normalised) if word in RELATIONS}
    for word, relation in RELATIONS.items():
        if not word.isascii() and word in normalised:
            found.add(relation)
    return found


def numbers(text: str) -> set[str]:
    normalised = normalise(text)
    found = set(re.findall(r"\d+", normalised))
    found |= {NUMBER_WORDS[w] for w in _EN_WORDS.findall(normalised) if w in NUMBER_WORDS}
    found |= {NUMBER_WORDS[c] for c in normalised if c in NUMBER_WORDS and not c.isascii()}
    return found


def same_words(a: str, b: str) -> bool:
    """Equal once case, width, punctuation and fillers are set aside."""
    return _terms(a) == _terms(b)


def may_merge(old: str, new: str) -> bool:
    """Nothing says these are different facts (the guards); their embeddings decide the rest."""
    if negation_flip(old, new) or relations(old) != relations(new) or numbers(old) != numbers(new):
        return False
    old_slots = {slot.key: slot.value for slot in slots(old)}
    return all(old_slots.get(slot.key, slot.value) == slot.value for slot in slots(new))
