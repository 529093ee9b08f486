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
from typing import Callable

from gateway.text import has_han

from .person import neutral

CATEGORIES = ("identity", "preference", "health", "relationship", "work", "schedule", "other")


@dataclass(frozen=True)
class Statement:
    content: str      # the neutral form in the person's language: "The user …" / "用户…"
    category: str
    priority: int
    explicit: bool    # said with "remember …" / "记住…"


# ---------------------------------------------------------------- clauses

_QUOTES = re.compile(r"[\"“”„「」『』«»]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；;])|\n+")
# A comma (or "and"/"but") starts a new clause only where a new statement follows it, so that
# "I'm allergic to peanuts, shellfish and eggs" and "I live in Paris, France" stay whole.
_NEXT_EN = (r"(?:(?:and|but|so|also|plus|btw|oh)\s+)*(?:i|i'm|im|i've|i'd|my|we|you|he|she|it|they|remember|"
            r"please|what|what's|who|where|how|why|when|which|do|does|can|could|would|will|is|are)\b")
_SPLIT_EN = re.compile(rf"(?:\s*[,;:]\s*|\s+(?:and|but|so|plus)\s+)(?={_NEXT_EN})", re.IGNORECASE)
_SPLIT_ZH = re.compile(r"[，,；;：:]\s*(?=(?:而且|并且|但是|不过|还有|另外|所以|也|还)?[我你他她它请记别])|"
                       r"(?:而且|并且|但是|不过|还有|另外)(?=我)")

_FILLERS_EN = re.compile(
    r"^(?:(?:oh|well|so|also|and|but|btw|by the way|actually|hi|hey|hello|ok|okay|fyi|yes|yeah|"
    r"just so you know|for your information|for the record|for what it's worth|anyway|plus)\b[\s,:!.-]*)+",
    re.IGNORECASE)
_FILLERS_ZH = re.compile(r"^(?:(?:对了|顺便说一下|顺便说|顺便提一下|其实|另外|还有|而且|并且|但是|不过|所以|嗯|哦|噢|好的|你好|是的|对)[，,\s]*)+")

_QUESTION_EN = re.compile(
    r"^(?:what|who|whom|whose|where|when|why|how|which|do|does|did|is|are|am|was|were|can|could|would|"
    r"will|shall|should|may|have|has)\b", re.IGNORECASE)
_QUESTION_ZH = re.compile(r"什么|谁|哪|怎么|为什么|为何|几|多少|是不是|有没有|对不对|好不好|[吗么呢嘛]\s*$")
_TAG_QUESTION = re.compile(
    r"^(?:right|correct|true|ok|okay|yes|no|eh|isn't it|aren't i|don't i|didn't i|am i|do i|is it|"
    r"对吧|是吧|对吗|是吗|对不对|是不是|好吗|好吧|行吗)\W*$", re.IGNORECASE)
_HYPOTHETICAL_EN = re.compile(
    r"\b(?:if|suppose|supposing|imagine|imagining|assume|assuming|pretend|pretending|hypothetically|"
    r"wish|let's say|what if|in a story|role-?play|for example|e\.g)\b", re.IGNORECASE)
_HYPOTHETICAL_ZH = re.compile(r"如果|假如|假设|要是|万一|假若|倘若|想象|比如|例如|的话|举个例子|扮演|假装")
_REPORTED_EN = re.compile(r"\b(?:said|says|saying|told|tells|asked|asks|wrote|writes|quote|quoted|"
                          r"according to)\b", re.IGNORECASE)
_REPORTED_ZH = re.compile(r"(?<!小)说(?!明)|告诉|问我|写道|写着|引用|据说|听说")
_JOKING = re.compile(r"\b(?:lol|lmao|rofl|haha+|hehe+|jk|just kidding|kidding)\b|😂|🤣|😜|哈哈|开玩笑|逗你", re.IGNORECASE)
_NEGATION_EN = re.compile(r"\b(?:not|never|no|no longer|nobody|none|neither|nor|don't|doesn't|didn't|isn't|"
                          r"aren't|wasn't|weren't|won't|can't|cannot|nothing)\b|n't\b", re.IGNORECASE)
_NEGATION_ZH = re.compile(r"[不没别非无未]")



def _sentences(text: str) -> list[str]:
    text = text.replace("’", "'").replace("‘", "'")
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _clauses(sentence: str) -> list[str]:
    parts = _SPLIT_ZH.split(sentence) if has_han(sentence) else _SPLIT_EN.split(sentence)
    return [p.strip() for p in parts if p and p.strip()]


def _strip_end(text: str) -> str:
    return text.strip().rstrip(".!?。！？;；,，:：~～…").strip()


def _is_question(clause: str, last_of_question: bool) -> bool:
    if last_of_question:
        return True
    bare = _strip_end(clause)
    return bool(_QUESTION_ZH.search(bare) if has_han(bare) else _QUESTION_EN.match(bare))


# ---------------------------------------------------------------- values

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
_NAME_ZH = re.compile(r"^[\u3400-\u9fffA-Za-z·]{1,8}$")


def _trimmed_en(raw: str) -> str:
    return _strip_end(_TRAILING_EN.sub("", _strip_end(raw)))


def _value_en(raw: str, max_words: int = 6) -> str | None:
    value = _trimmed_en(raw)
    if not value or _NEGATION_EN.search(value) or _QUOTES.search(value):
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
    value = _TRAILING_ZH.sub("", _strip_end(re.split(r"[，,；;：:]", raw, maxsplit=1)[0])).strip()
    if not value or len(value) > max_chars or _NEGATION_ZH.search(value) or _QUOTES.search(value):
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


def _sentence_en(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!")) else ".")


def _sentence_zh(text: str) -> str:
    return text.strip() + ("" if text.endswith("。") else "。")


# ---------------------------------------------------------------- the statements

Rule = tuple[re.Pattern, Callable[[re.Match], "tuple[str, str, int] | None"]]

_RELATIVES_EN = ("best friend", "girlfriend", "boyfriend", "grandmother", "grandfather", "roommate", "colleague",
                 "daughter", "husband", "partner", "brother", "sister", "mother", "father", "cousin", "friend",
                 "grandma", "grandpa", "uncle", "aunt", "wife", "boss", "baby", "son", "mom", "mum", "dad", "dog",
                 "cat", "kid")
_RELATIVE_EN = "|".join(_RELATIVES_EN)
_RELATIVES_ZH = ("男朋友", "女朋友", "妹妹", "姐姐", "哥哥", "弟弟", "妻子", "老婆", "太太", "丈夫", "老公", "妈妈",
                 "母亲", "爸爸", "父亲", "儿子", "女儿", "孩子", "朋友", "老板", "同事", "奶奶", "外婆", "爷爷",
                 "外公", "阿姨", "叔叔", "宝宝", "室友", "狗", "猫", "小狗", "小猫")
_RELATIVE_ZH = "|".join(sorted(_RELATIVES_ZH, key=len, reverse=True))
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
    (rf"^my\s+(?P<k>{_RELATIVE_EN})(?:'s name is|\s+is called|\s+is named|\s+name is|'s called)\s+(?P<v>.+)$",
     _relative),
    (rf"^(?:i have|i've got|i got)\s+(?:a|an|one)\s+(?P<k>{_RELATIVE_EN})\s+(?:called|named)\s+(?P<v>.+)$",
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


def _zh(template: str, category: str, priority: int, value: Callable[[str], str | None] = _value_zh):
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


def _zh_as_said(category: str, priority: int):
    def build(match: re.Match) -> tuple[str, str, int] | None:
        return _sentence_zh(_strip_end(match.group(0))), category, priority
    return build


RULES_ZH: list[Rule] = [(re.compile(pattern), build) for pattern, build in [
    (r"^我(?:叫|名叫|的名字是|的名字叫|名字叫|名字是)(?P<v>.+)$", _zh("我叫{v}。", "identity", 8, _name_zh)),
    (r"^(?:你可以|请|以后|你以后)叫我(?P<v>.+?)(?:就行了?|就好了?|吧)?$", _zh("我叫{v}。", "identity", 8, _name_zh)),
    (r"^我(?:对)(?P<v>.+?)(?:严重|非常|特别|有点|很)?过敏$", _zh("我对{v}过敏。", "health", 9)),
    (r"^我有(?P<v>.+?)过敏(?:症)?$", _zh("我对{v}过敏。", "health", 9)),
    (r"^我(?:是)?(?:一个|一名|个)?(?:素食者|素食主义者|吃素的|纯素食者)$", _zh_as_said("preference", 7)),
    (r"^我(?:只)?吃素$", _zh_as_said("preference", 7)),
    (r"^我(?:从来)?不(?P<verb>吃|喝)(?P<v>.+)$", _zh("我不{verb}{v}。", "preference", 7)),
    (rf"^我(?:的)?(?P<k>{_RELATIVE_ZH})(?:叫|名叫|的名字是|的名字叫|名字叫)(?P<v>.+)$",
     _zh("我{k}叫{v}。", "relationship", 7, _name_zh)),
    (rf"^我有(?:一个|一位|一只|一条|个|只|条)(?P<k>{_RELATIVE_ZH})(?:叫|名叫)(?P<v>.+)$",
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
    ("relationship", re.compile(rf"\b(?:{_RELATIVE_EN})s?\b|{_RELATIVE_ZH}", re.I)),
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


def _statement(clause: str) -> tuple[str, str, int] | None:
    """The clause as a stored sentence, with its category and priority, when it is one of the
    known statements."""
    chinese = has_han(clause)
    clause = (_FILLERS_ZH if chinese else _FILLERS_EN).sub("", clause).strip()
    bare = _strip_end(clause)
    for pattern, build in RULES_ZH if chinese else RULES_EN:
        match = pattern.match(bare)
        if match:
            found = build(match)
            if found is not None:
                return found
    return None


def _explicit(rest: str) -> tuple[str, str, int] | None:
    """What follows "remember (that)" / "记住": a known statement, or else the words as said
    (first person, not a reminder or a pronoun)."""
    rest = _strip_end(rest)
    found = _statement(rest)
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
    return (_sentence_zh(rest) if chinese else _sentence_en(rest)), _category_of(rest), 7


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
    for sentence in _sentences(text):
        chinese = has_han(sentence)
        if (_HYPOTHETICAL_ZH if chinese else _HYPOTHETICAL_EN).search(sentence):
            continue
        if _QUOTES.search(sentence) or (_REPORTED_ZH if chinese else _REPORTED_EN).search(sentence):
            continue
        if _JOKING.search(sentence):
            continue
        question = sentence.rstrip().endswith(("?", "？"))
        clauses = _clauses(sentence)
        if question and clauses and _TAG_QUESTION.match(_strip_end(clauses[-1]) + "?"):
            continue  # "I live in Paris, right?": the whole sentence is asked
        explicit = False
        for index, clause in enumerate(clauses):
            clause = (_FILLERS_ZH if has_han(clause) else _FILLERS_EN).sub("", clause).strip()
            remember = (_REMEMBER_ZH if has_han(clause) else _REMEMBER_EN).match(clause)
            asked = _is_question(clause, question and index == len(clauses) - 1)
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
                statement = _statement(clause)
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
