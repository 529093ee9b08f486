"""The known shapes of a statement about oneself, in English and Chinese, each read into a short
first-person sentence with its category and priority (docs/memory.md, "Learning from
conversations"): the clause must begin with one, and its value must be a value (no pronoun, no
pointing into the conversation, not too long)."""
from __future__ import annotations

import re
from typing import Callable

from gateway.text import HAN_RANGES, has_han

from .clauses import FILLERS_EN, FILLERS_ZH, QUOTES, strip_end

_NEGATION_EN = re.compile(r"\b(?:not|never|no|no longer|nobody|none|neither|nor|don't|doesn't|didn't|isn't|"
                          r"aren't|wasn't|weren't|won't|can't|cannot|nothing)\b|n't\b", re.IGNORECASE)
_NEGATION_ZH = re.compile(r"[不没别非无未]")
_PRONOUNS_EN = {"it", "that", "this", "these", "those", "you", "your", "yours", "him", "her", "them", "they",
                "what", "how", "when", "where", "why", "who", "which", "whatever", "something", "anything",
                "everything", "nothing", "one", "the idea", "the way", "so", "too", "very", "much", "here",
                "there"}
# Words pointing into the conversation ("I prefer the second one", "I like to think so"), not a fact.
_POINTING_EN = re.compile(
    r"^(?:the\s+(?:first|second|third|last|other|former|latter|next|previous|same|above|below|\w+\s+one)\b|"
    r"to\s+(?:think|know|hear|see|ask|say|believe|imagine)\b|.*\b(?:one|ones)$)", re.IGNORECASE)
_NAME_STOP_EN = {"later", "back", "tomorrow", "tonight", "today", "now", "soon", "sometime", "again", "please",
                 "maybe", "whenever", "when", "if", "at", "on", "in", "a", "an", "the", "crazy", "old",
                 "anytime", "asap", "up", "out", "over", "by", "after", "before", "first", "once", "any",
                 "not", "no", "never", "just", "on", "it", "that", "this", "you", "me", "him", "her"}
_TRAILING_EN = re.compile(
    r"(?:[\s,]+(?:too|as well|now|these days|though|btw|lol|haha|anyway|by the way|at the moment|currently|"
    r"actually|really|then|ok|okay|please|recently|lately|a while ago|(?:last|this) (?:year|month|week|summer|"
    r"spring|autumn|fall|winter)|(?:a few|a couple of|two|three|\d+) (?:days|weeks|months|years) ago|in \d{4}))+$",
    re.IGNORECASE)
_PRONOUNS_ZH = ("你", "他", "她", "它", "这", "那", "人家", "什么", "谁", "哪", "了", "过", "着", "一下", "第",
                "上面", "下面", "前面", "后面", "刚才", "前者", "后者")
_TRAILING_ZH = re.compile(r"[了啊呀呢吧哦喔嘛啦的]+$")
_NAME_EN = re.compile(r"^[A-Za-z][A-Za-z'\-]*(?:\s+[A-Za-z][A-Za-z'\-]*){0,2}$")
_NAME_ZH = re.compile(f"^[{HAN_RANGES}A-Za-z·]{{1,8}}$")


def _trimmed_en(raw: str) -> str:
    return strip_end(_TRAILING_EN.sub("", strip_end(raw)))


def _value_en(raw: str, max_words: int = 6) -> str | None:
    value = _trimmed_en(raw)
    if not value or _NEGATION_EN.search(value) or QUOTES.search(value):
        return None
    words = value.split()
    if len(words) > max_words or len(value) > 80:
        return None
    first = words[0].lower()
    if first in _PRONOUNS_EN or " ".join(w.lower() for w in words[:2]) in _PRONOUNS_EN:
        return None
    if _POINTING_EN.match(value):
        return None
    return value


def _name_en(raw: str, require_capital: bool = False) -> str | None:
    value = _trimmed_en(raw)
    if not _NAME_EN.match(value) or any(w.lower() in _NAME_STOP_EN for w in value.split()):
        return None
    if require_capital and not value[0].isupper():
        return None
    return " ".join(w[:1].upper() + w[1:] for w in value.split()) if value.islower() else value


def _value_zh(raw: str, max_chars: int = 15) -> str | None:
    value = _TRAILING_ZH.sub("", strip_end(re.split(r"[，,；;：:]", raw, maxsplit=1)[0])).strip()
    if not value or len(value) > max_chars or _NEGATION_ZH.search(value) or QUOTES.search(value):
        return None
    if value.startswith(_PRONOUNS_ZH):
        return None
    return value


def _name_zh(raw: str) -> str | None:
    value = _value_zh(raw, 8)
    return value if value is not None and _NAME_ZH.match(value) else None


def without_full_stop(text: str) -> str:
    """Memories are stored without a final full stop, as the memory tools write them: the same
    fact said twice is then the same text, whichever wrote it."""
    return text[:-1].rstrip() if text.endswith((".", "。")) else text


def sentence_en(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!")) else ".")


def sentence_zh(text: str) -> str:
    return text.strip() + ("" if text.endswith("。") else "。")


Rule = tuple[re.Pattern, Callable[[re.Match], "tuple[str, str, int] | None"]]

_RELATIVES_EN = ("best friend", "girlfriend", "boyfriend", "grandmother", "grandfather", "roommate", "colleague",
                 "daughter", "husband", "partner", "brother", "sister", "mother", "father", "cousin", "friend",
                 "grandma", "grandpa", "uncle", "aunt", "wife", "boss", "baby", "son", "mom", "mum", "dad", "dog",
                 "cat", "kid")
RELATIVE_EN = "|".join(_RELATIVES_EN)
_RELATIVES_ZH = ("男朋友", "女朋友", "妹妹", "姐姐", "哥哥", "弟弟", "妻子", "老婆", "太太", "丈夫", "老公", "妈妈",
                 "母亲", "爸爸", "父亲", "儿子", "女儿", "孩子", "朋友", "老板", "同事", "奶奶", "外婆", "爷爷",
                 "外公", "阿姨", "叔叔", "宝宝", "室友", "狗", "猫", "小狗", "小猫")
RELATIVE_ZH = "|".join(sorted(_RELATIVES_ZH, key=len, reverse=True))
_DIET_PREFERENCE = {"vegetarian", "vegan", "pescatarian", "pescetarian", "halal", "kosher", "teetotal",
                    "teetotaler", "teetotaller"}
_DIET_HEALTH = {"lactose intolerant", "gluten intolerant", "diabetic", "coeliac", "celiac", "epileptic",
                "asthmatic"}
_NOT_PLACES = {"the", "a", "an", "fear", "hope", "denial", "peace", "dread", "luxury", "poverty", "harmony", "sin",
               "misery", "sync", "comfort", "silence", "hell", "heaven", "pain", "terror", "shame", "constant"}
_DIETS = "|".join(sorted(_DIET_PREFERENCE | _DIET_HEALTH, key=len, reverse=True))
_I_AM = r"(?:i'm|im|i am)"


def _name(match: re.Match) -> tuple[str, str, int] | None:
    name = _name_en(match["v"])
    return (f"My name is {name}.", "identity", 8) if name else None


def _call_me(match: re.Match) -> tuple[str, str, int] | None:
    name = _name_en(match["v"], require_capital=True)
    return (f"Call me {name}.", "identity", 8) if name else None


def _allergy(match: re.Match) -> tuple[str, str, int] | None:
    value = _value_en(match["v"], 8)
    return (f"I'm allergic to {value}.", "health", 9) if value else None


def _allergy_noun(match: re.Match) -> tuple[str, str, int] | None:
    value = _value_en(match["v"], 3)
    return (f"I'm allergic to {value}.", "health", 9) if value else None


def _diet(match: re.Match) -> tuple[str, str, int] | None:
    value = match["v"].lower()
    if value in _DIET_HEALTH:
        return f"I'm {value}.", "health", 8
    return f"I'm {value}.", "preference", 7


def _dont_consume(match: re.Match) -> tuple[str, str, int] | None:
    value = _value_en(match["v"], 4)
    return (f"I don't {match['verb'].lower()} {value}.", "preference", 7) if value else None


def _relative(match: re.Match) -> tuple[str, str, int] | None:
    name = _name_en(match["v"])
    return (f"My {match['k'].lower()} is called {name}.", "relationship", 7) if name else None


def _relative_have(match: re.Match) -> tuple[str, str, int] | None:
    name = _name_en(match["v"], require_capital=True)
    return (f"My {match['k'].lower()} is called {name}.", "relationship", 7) if name else None


def _home(match: re.Match) -> tuple[str, str, int] | None:
    value = _value_en(match["v"], 5)
    if value is None:
        return None
    # A place has a name ("a village near Lyon"); "I live in fear", "in the moment" are idioms.
    if not any(word[:1].isupper() for word in value.split()):
        words = value.lower().split()
        if len(words) > 2 or words[0] in _NOT_PLACES:
            return None
        value = " ".join(word.capitalize() for word in words)
    return f"I live in {value}.", "identity", 7


def _job(match: re.Match) -> tuple[str, str, int] | None:
    value = _value_en(match["v"], 6)
    return (f"I work as {value}.", "work", 6) if value else None


def _workplace(match: re.Match) -> tuple[str, str, int] | None:
    value = _value_en(match["v"], 6)
    return (f"I work {match['prep'].lower()} {value}.", "work", 6) if value else None


def _like(match: re.Match) -> tuple[str, str, int] | None:
    value = _value_en(match["v"], 6)
    verb = re.sub(r"\s+", " ", match["verb"].lower()).replace("do not", "don't").replace("cannot", "can't")
    return (f"I {verb} {value}.", "preference", 5) if value else None


def _favourite(match: re.Match) -> tuple[str, str, int] | None:
    value = _value_en(match["v"], 5)
    thing = match["k"].lower().strip()
    return (f"My favourite {thing} is {value}.", "preference", 5) if value else None


def _birthday(match: re.Match) -> tuple[str, str, int] | None:
    value = _value_en(match["v"], 4)
    return (f"My birthday is {value}.", "identity", 7) if value else None


def _age(match: re.Match) -> tuple[str, str, int] | None:
    return f"I'm {match['v']} years old.", "identity", 5


RULES_EN: list[Rule] = [(re.compile(pattern, re.IGNORECASE), build) for pattern, build in [
    (r"^(?:my name is|my name's|i'm called|i am called)\s+(?P<v>.+)$", _name),
    (r"^(?:you can |please )?call me\s+(?P<v>.+)$", _call_me),
    (rf"^{_I_AM}\s+(?:also\s+|very\s+|severely\s+|highly\s+|really\s+|quite\s+|deathly\s+)?"
     r"allergic\s+to\s+(?P<v>.+)$", _allergy),
    (r"^i\s+have\s+(?:an?\s+|a severe\s+|a bad\s+)?allergy\s+to\s+(?P<v>.+)$", _allergy),
    (r"^i\s+have\s+(?:an?\s+|a severe\s+|a bad\s+)?(?P<v>[a-z]+(?:\s+[a-z]+)?)\s+allergy$", _allergy_noun),
    (rf"^{_I_AM}\s+(?:an?\s+)?(?:strict\s+|also\s+)?(?P<v>{_DIETS})$", _diet),
    (r"^i\s+(?:don't|do not|never)\s+(?P<verb>eat|drink)\s+(?P<v>.+)$", _dont_consume),
    (rf"^my\s+(?P<k>{RELATIVE_EN})(?:'s name is|\s+is called|\s+is named|\s+name is|'s called)\s+(?P<v>.+)$",
     _relative),
    (rf"^(?:i have|i've got|i got)\s+(?:a|an|one)\s+(?P<k>{RELATIVE_EN})\s+(?:called|named)\s+(?P<v>.+)$",
     _relative_have),
    (r"^i\s+(?:currently\s+|now\s+|still\s+)?(?:live|am living|'m living)\s+in\s+(?P<v>.+)$", _home),
    (r"^i'm\s+living\s+in\s+(?P<v>.+)$", _home),
    (r"^(?:i|i've|i have)\s+(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated)\s+to\s+(?P<v>.+)$", _home),
    (r"^i\s+(?:currently\s+|now\s+)?work\s+as\s+(?P<v>.+)$", _job),
    (r"^my\s+(?:job|profession|occupation)\s+is\s+(?P<v>.+)$", _job),
    (r"^i\s+(?:currently\s+|now\s+)?work\s+(?P<prep>at|for)\s+(?P<v>.+)$", _workplace),
    (r"^i\s+(?:really\s+|absolutely\s+|also\s+|totally\s+)?(?P<verb>like|love|enjoy|adore|prefer|hate|dislike|"
     r"can't stand|cannot stand|don't like|do not like)\s+(?P<v>.+)$", _like),
    (r"^my\s+(?:favourite|favorite)\s+(?P<k>[a-z][a-z ]{1,20}?)\s+is\s+(?P<v>.+)$", _favourite),
    (r"^my\s+birthday\s+is\s+(?:on\s+)?(?P<v>.+)$", _birthday),
    (rf"^{_I_AM}\s+(?P<v>\d{{1,3}})\s+years?\s+old$", _age),
]]


def _zh(template: str, category: str, priority: int,
        value: Callable[[str], str | None] = _value_zh) -> Callable[[re.Match], tuple[str, str, int] | None]:
    def build(match: re.Match) -> tuple[str, str, int] | None:
        found = value(match["v"])
        if found is None:
            return None
        groups = {key: text for key, text in match.groupdict().items() if text is not None}
        return template.format(**{**groups, "v": found}), category, priority
    return build


def _home_zh(raw: str) -> str | None:
    value = _value_zh(raw)
    # A hotel or a friend's place is a stay, not a home.
    return None if value is None or re.search(r"酒店|宾馆|旅馆|民宿|朋友家|医院", value) else value


def _zh_as_said(category: str, priority: int) -> Callable[[re.Match], tuple[str, str, int] | None]:
    def build(match: re.Match) -> tuple[str, str, int] | None:
        return sentence_zh(strip_end(match.group(0))), category, priority
    return build


RULES_ZH: list[Rule] = [(re.compile(pattern), build) for pattern, build in [
    (r"^我(?:叫|名叫|的名字是|的名字叫|名字叫|名字是)(?P<v>.+)$", _zh("我叫{v}。", "identity", 8, _name_zh)),
    (r"^(?:你可以|请|以后|你以后)叫我(?P<v>.+?)(?:就行了?|就好了?|吧)?$", _zh("我叫{v}。", "identity", 8, _name_zh)),
    (r"^我(?:对)(?P<v>.+?)(?:严重|非常|特别|有点|很)?过敏$", _zh("我对{v}过敏。", "health", 9)),
    (r"^我有(?P<v>.+?)过敏(?:症)?$", _zh("我对{v}过敏。", "health", 9)),
    (r"^我(?:是)?(?:一个|一名|个)?(?:素食者|素食主义者|吃素的|纯素食者)$", _zh_as_said("preference", 7)),
    (r"^我(?:只)?吃素$", _zh_as_said("preference", 7)),
    (r"^我(?:从来)?不(?P<verb>吃|喝)(?P<v>.+)$", _zh("我不{verb}{v}。", "preference", 7)),
    (rf"^我(?:的)?(?P<k>{RELATIVE_ZH})(?:叫|名叫|的名字是|的名字叫|名字叫)(?P<v>.+)$",
     _zh("我{k}叫{v}。", "relationship", 7, _name_zh)),
    (rf"^我有(?:一个|一位|一只|一条|个|只|条)(?P<k>{RELATIVE_ZH})(?:叫|名叫)(?P<v>.+)$",
     _zh("我{k}叫{v}。", "relationship", 7, _name_zh)),
    (r"^我(?:现在|目前)?(?:住在|家在|居住在)(?P<v>.+)$", _zh("我住在{v}。", "identity", 7, _home_zh)),
    (r"^我(?:最近|刚|刚刚|已经)?搬(?:家)?到了?(?P<v>.+?)(?:来|去)?$", _zh("我住在{v}。", "identity", 7, _home_zh)),
    (r"^我(?:现在|目前)?在(?P<v>.+?)(?:工作|上班)$", _zh("我在{v}工作。", "work", 6)),
    (r"^我(?:的职业|的工作)是(?P<v>.+)$", _zh("我的职业是{v}。", "work", 6)),
    (r"^我是一(?:名|位)(?P<v>.+)$", _zh("我是一名{v}。", "work", 6)),
    (r"^我最喜欢的(?P<k>[^，。是]{1,8})是(?P<v>.+)$", _zh("我最喜欢的{k}是{v}。", "preference", 5)),
    (r"^我(?:也|很|非常|特别|真的|超|最|挺)?(?P<verb>喜欢|爱吃|爱喝|爱看|爱听|爱玩|讨厌|不喜欢|不爱吃|不爱喝|受不了)(?P<v>.+)$",
     _zh("我{verb}{v}。", "preference", 5)),
    (r"^我(?:的)?生日(?:是|在)(?P<v>.+)$", _zh("我的生日是{v}。", "identity", 7)),
    (r"^我今年(?P<v>\d{1,3}|[一二三四五六七八九十]{1,3})岁$", _zh("我今年{v}岁。", "identity", 5)),
]]


def known_statement(clause: str) -> tuple[str, str, int] | None:
    """The clause as a stored sentence, with its category and priority, when it is one of the
    known statements."""
    chinese = has_han(clause)
    clause = (FILLERS_ZH if chinese else FILLERS_EN).sub("", clause).strip()
    bare = strip_end(clause)
    for pattern, build in RULES_ZH if chinese else RULES_EN:
        match = pattern.match(bare)
        if match:
            found = build(match)
            if found is not None:
                return found
    return None
