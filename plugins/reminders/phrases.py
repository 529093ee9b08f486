"""Reading a reminder out of what a person says, in English or Chinese, without a model.

Two steps. `read_request(text)` splits the sentence into what to be reminded of, the words that
say when, and the repeat ("remind me to call mom tomorrow at 9am" → "call mom", "tomorrow at
9am"; "每天早上七点提醒我吃药" → "吃药", "早上七点", daily). `resolve_when(when, now, zone)` turns
the words into an instant on the clocks of the person's zone.

The dates are read by dateparser (relative days, weekdays, dates, "in 20 minutes", "20分钟后").
Measured, it does not read Chinese numerals ("二十分钟后", "九点"), clock times written with 点
("9点", "9点半"), the Chinese parts of the day (早上, 下午, 今晚), "下周五", "半小时后", an English
hour with no am/pm ("at 6") nor "tonight": this module rewrites exactly those into forms it reads
(numerals through cn2an, times as 24-hour HH:MM) and nothing else."""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from gateway.schedule import Repeat, localize, next_occurrence
from gateway.text import language_of


# ---------------------------------------------------------------- Chinese

_ZH_NUM = r"[零〇一二两三四五六七八九十百\d]+"
_ZH_WEEKDAY = r"[一二三四五六日天1-7]"
_ZH_PERIOD = r"(?:早上|早晨|上午|中午|下午|傍晚|晚上|夜里|凌晨|今早|今晚|明早|明晚|早|晚)"
_ZH_CLOCK = rf"(?:{_ZH_PERIOD})?(?:{_ZH_NUM}|\d{{1,2}}:\d{{2}})(?:点|时|:)(?:钟)?(?:半|一刻|三刻|{_ZH_NUM}分?)?"
_ZH_REPEAT = [
    (re.compile(r"每个?工作日|工作日每天|每逢工作日|周一到周五每天|(?:每个?)?周一至周五|(?:每个?)?周一到周五"), "weekdays"),
    (re.compile(rf"每个?(?:周|星期|礼拜){_ZH_WEEKDAY}"), "weekly"),
    (re.compile(r"每个?(?:周|星期|礼拜)"), "weekly"),
    (re.compile(rf"每个?月(?:{_ZH_NUM}(?:号|日))?"), "monthly"),
    (re.compile(r"每天|每日|天天|每晚|每早|每天早上|每天晚上"), "daily"),
]
_ZH_WHEN = [
    rf"{_ZH_NUM}个?半?(?:分钟|分|小时|个小时|钟头|个钟头|天|周|星期|个星期)(?:之后|以后|后)",
    r"半(?:个)?(?:小时|钟头)(?:之后|以后|后)",
    r"一刻钟(?:之后|以后|后)",
    rf"(?:{_ZH_NUM}年)?{_ZH_NUM}月{_ZH_NUM}(?:号|日)",
    rf"{_ZH_NUM}(?:号|日)",
    rf"(?:这|下下|下|本)?个?(?:周|星期|礼拜){_ZH_WEEKDAY}",
    r"大后天|后天|明天|今天|今日|明日|今晚|明晚|明早|今早",
    _ZH_CLOCK,
    _ZH_PERIOD,
]
_ZH_WHEN_RE = re.compile("|".join(f"(?:{pattern})" for pattern in _ZH_WHEN))
_ZH_ASK = re.compile(r"(?:请|麻烦|帮我|记得|到时候|到时)?(?:提醒我|提醒一下我|叫我|通知我|提醒)(?:一下)?(?:要|该)?")
_ZH_TRIM = " \t，,。.!！?？：:；;、的在到时"

# ---------------------------------------------------------------- English

_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
               "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
               "thirty": 30, "forty": 40, "forty-five": 45, "fifty": 50, "sixty": 60, "ninety": 90}
_EN_NUM = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|" \
          r"forty-five|forty|fifty|sixty|ninety|a couple of|a few)"
_EN_DAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_EN_MONTHS = r"(?:january|february|march|april|may|june|july|august|september|october|november|december|" \
             r"jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
_EN_REPEAT = [
    (re.compile(r"\b(?:every|each)\s+(?:weekday|work\s*day|working\s+day)s?\b|\bon\s+weekdays\b|"
                r"\bevery\s+day\s+except\s+(?:the\s+)?weekends?\b|\b(?:monday|mon)\s+(?:to|through|-)\s+(?:friday|fri)\b",
                re.I), "weekdays"),
    (re.compile(rf"\b(?:every|each)\s+{_EN_DAYS}\b|\bweekly\b|\b(?:every|each)\s+week\b|\bon\s+{_EN_DAYS}s\b", re.I),
     "weekly"),
    (re.compile(r"\bmonthly\b|\b(?:every|each)\s+month\b", re.I), "monthly"),
    (re.compile(r"\bdaily\b|\b(?:every|each)\s+(?:day|morning|evening|night|afternoon)\b|\beveryday\b", re.I), "daily"),
]
_EN_CLOCK = r"\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.|o'?clock)?"
_EN_WHEN = [
    rf"\bin\s+{_EN_NUM}\s+(?:and\s+a\s+half\s+)?(?:minutes?|mins?|hours?|hrs?|days?|weeks?)(?:\s+and\s+{_EN_NUM}\s+minutes?)?\b",
    r"\bin\s+(?:half\s+an\s+hour|an\s+hour\s+and\s+a\s+half|a\s+quarter\s+of\s+an\s+hour)\b",
    r"\b(?:the\s+)?day\s+after\s+tomorrow\b",
    r"\b(?:today|tonight|tomorrow|this\s+(?:morning|afternoon|evening))\b(?:\s+(?:morning|afternoon|evening|night))?",
    rf"\b(?:on\s+|next\s+|this\s+)?{_EN_DAYS}\b",
    rf"\b(?:on\s+)?(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_EN_MONTHS}\b",
    rf"\b(?:on\s+)?{_EN_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?\b",
    r"\b(?:on\s+)?\d{4}-\d{2}-\d{2}\b",
    r"\b(?:on\s+)?the\s+\d{1,2}(?:st|nd|rd|th)\b",
    rf"\b(?:at|by|around)\s+(?:{_EN_CLOCK}|noon|midnight)",
    r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)",
    r"\b\d{1,2}:\d{2}\b",
    r"\b(?:at\s+)?(?:noon|midnight)\b",
    r"\b(?:in\s+the\s+)?(?:morning|afternoon|evening)\b",
]
_EN_WHEN_RE = re.compile("|".join(f"(?:{pattern})" for pattern in _EN_WHEN), re.I)
_EN_ASK = re.compile(r"\b(?:please\s+)?(?:can\s+you\s+|could\s+you\s+)?(?:set\s+(?:a|an)\s+reminder|remind\s+me)"
                     r"(?:\s+(?:to|that|about|of))?\b", re.I)
_EN_TRIM = " \t,.;:!?"


@dataclass(frozen=True)
class ReminderWords:
    title: str
    when: str
    repeat_type: str
    language: str

    def arguments(self) -> dict:
        found = {"title": self.title, "when": self.when, "repeat_type": self.repeat_type}
        return {key: value for key, value in found.items() if value and value != "none"}



def read_request(text: str) -> ReminderWords:
    """What to be reminded of, when, and how it repeats, as said (nothing resolved yet)."""
    language = language_of(text)
    if language == "zh":
        return _read(text, _ZH_REPEAT, _ZH_WHEN_RE, _ZH_ASK, _ZH_TRIM, "", language)
    return _read(text, _EN_REPEAT, _EN_WHEN_RE, _EN_ASK, _EN_TRIM, " ", language)


def _read(text: str, repeats: list[tuple[re.Pattern, str]], when_re: re.Pattern, ask: re.Pattern, trim: str,
          joiner: str, language: str) -> ReminderWords:
    rest = " ".join(text.split())
    repeat_type = "none"
    repeat_words = ""
    for pattern, kind in repeats:
        found = pattern.search(rest)
        if found:
            repeat_type, repeat_words = kind, found.group(0)
            rest = rest[:found.start()] + " " + rest[found.end():]
            break
    pieces = []
    for found in when_re.finditer(rest):
        pieces.append(found.group(0).strip())
    title_text = when_re.sub(" ", rest)
    title_text = ask.sub(" ", title_text, count=1)
    title = " ".join(title_text.split()).strip(trim)
    if language == "zh":
        title = title.replace(" ", "").strip(trim)
        title = re.sub(r"^(?:我要|要|该|我)", "", title) or title
        title = re.sub(r"(?:了|吧|哦|啊)$", "", title) or title
    else:
        title = re.sub(r"^(?:(?:to|that|about|of|for)\s+)+", "", title, flags=re.I)
    when = joiner.join(pieces)
    # A weekly or monthly repeat names its day: the first occurrence is that day.
    if repeat_type in ("weekly", "monthly") and repeat_words:
        day = re.sub(r"^(?:every|each|on)\s+|^每个?", "", repeat_words, flags=re.I)
        if repeat_type == "weekly" and re.search(_EN_DAYS + "|" + _ZH_WEEKDAY + "$", day, re.I):
            when = f"{day.rstrip('s')}{joiner}{when}".strip() if language == "en" else f"{day}{when}"
        if repeat_type == "monthly" and re.search(r"\d|[号日]", day):
            when = f"{day.replace('月', '')}{when}"
    return ReminderWords(title, when.strip(), repeat_type, language)


# ---------------------------------------------------------------- resolving "when"

class NotUnderstood(ValueError):
    """The words say no time we can read."""


@dataclass
class _Reading:
    """A phrase rewritten for dateparser, and what the words said besides."""
    phrase: str
    day_named: bool        # a day, date or offset was said: a past result is not moved on
    monthly_day: bool      # only a day of the month ("5号", "the 5th"): a past one is next month's
    timed: bool            # a time of day or an offset was said; a day alone is at DEFAULT_HOUR
    extra_days: int = 0
    offset: bool = False   # "in 20 minutes": added to the instant, not to the wall clock


DEFAULT_HOUR = 9


_EVENING = ("下午", "傍晚", "晚上", "夜里", "今晚", "明晚", "晚")
_MORNING = ("凌晨", "早上", "早晨", "上午", "今早", "明早", "早")
_ZH_CLOCK_PARTS = re.compile(
    rf"(?P<period>{_ZH_PERIOD})?(?P<hour>{_ZH_NUM})(?:点|时)钟?(?P<minute>半|一刻|三刻|{_ZH_NUM}分?)?")
_ZH_DEFAULT_HOURS = {"早上": 8, "早晨": 8, "上午": 9, "中午": 12, "下午": 15, "傍晚": 18, "晚上": 20, "夜里": 22,
                     "凌晨": 6, "今早": 8, "明早": 8, "今晚": 20, "明晚": 20, "早": 8, "晚": 20}
_ZH_WEEKDAY_DIGITS = {"1": "一", "2": "二", "3": "三", "4": "四", "5": "五", "6": "六", "7": "日", "天": "日"}
_ZH_UNITS = {"分": "分钟", "钟头": "小时", "个钟头": "小时", "个小时": "小时", "星期": "周", "个星期": "周"}


def _zh_number(text: str) -> int:
    if text.isdigit():
        return int(text)
    import cn2an

    return int(cn2an.cn2an(text, "smart"))


def _zh_clock(match: re.Match) -> str:
    period = match.group("period") or ""
    hour = _zh_number(match.group("hour"))
    minute_words = match.group("minute") or ""
    minute = {"半": 30, "一刻": 15, "三刻": 45}.get(minute_words)
    if minute is None:
        minute = _zh_number(minute_words.rstrip("分")) if minute_words else 0
    if period in _EVENING and hour < 12:
        hour += 12
    elif period == "中午" and hour < 6:
        hour += 12
    elif period in _MORNING and hour == 12:
        hour = 0
    # The period word stays: the day words (今晚, 明早) it may be part of are read next.
    return f"{period} {hour}:{minute:02d} "


def _normalize_zh(when: str, now: datetime) -> _Reading:
    text = re.sub(r"(?:之后|以后)", "后", when)
    text = re.sub(rf"({_ZH_NUM})个半(?:小时|钟头)后", lambda m: f"{_zh_number(m.group(1)) * 60 + 30}分钟后", text)
    text = re.sub(r"半(?:个)?(?:小时|钟头)后", "30分钟后", text)
    text = text.replace("一刻钟后", "15分钟后")
    text = re.sub(rf"({_ZH_NUM})(个小时|个钟头|个星期|分钟|分|小时|钟头|天|周|星期)后",
                  lambda m: f"{_zh_number(m.group(1))}{_ZH_UNITS.get(m.group(2), m.group(2))}后", text)
    relative = "后" in text and not re.search(r"大?后天", text)
    timed = relative
    if _ZH_CLOCK_PARTS.search(text):
        text = _ZH_CLOCK_PARTS.sub(_zh_clock, text, count=1)
        timed = True
    else:
        named = re.search(_ZH_PERIOD, text)
        plain = re.search(r"(\d{1,2}):(\d{2})", text)
        timed = timed or plain is not None or named is not None
        if plain is not None and named is not None and named.group(0) in _EVENING and int(plain.group(1)) < 12:
            text = text[:plain.start()] + f"{int(plain.group(1)) + 12}:{plain.group(2)}" + text[plain.end():]
        elif plain is None and named is not None and not relative:
            text = text.replace(named.group(0), f"{named.group(0)} {_ZH_DEFAULT_HOURS[named.group(0)]}:00 ", 1)
    for word, day in (("今晚", "今天"), ("今早", "今天"), ("明晚", "明天"), ("明早", "明天"), ("今日", "今天"),
                      ("明日", "明天")):
        text = text.replace(word, day)
    text = re.sub(_ZH_PERIOD, " ", text)
    extra_days = 0
    if "大后天" in text:
        text = text.replace("大后天", "后天")
        extra_days += 1
    text = re.sub(rf"(?:周|星期|礼拜)({_ZH_WEEKDAY})",
                  lambda m: "周" + _ZH_WEEKDAY_DIGITS.get(m.group(1), m.group(1)), text)
    next_week = re.search(r"下个?周([一二三四五六日])", text)
    if next_week:
        # "下周五" said on a Tuesday is the Friday after this week's.
        if "一二三四五六日".index(next_week.group(1)) > now.weekday():
            extra_days += 7
        text = text.replace(next_week.group(0), f"周{next_week.group(1)}")
    text = re.sub(r"(?:这|本)个?周([一二三四五六日])", r"周\1", text)
    monthly_day = False
    date = re.search(rf"(?:({_ZH_NUM})年)?({_ZH_NUM})月({_ZH_NUM})(?:号|日)", text)
    if date:
        year = _zh_number(date.group(1)) if date.group(1) else now.year
        text = text.replace(date.group(0), f"{year}年{_zh_number(date.group(2))}月{_zh_number(date.group(3))}日")
        if not date.group(1) and (_zh_number(date.group(2)), _zh_number(date.group(3))) < (now.month, now.day):
            text = text.replace(f"{year}年", f"{year + 1}年", 1)
    else:
        day_of_month = re.search(rf"({_ZH_NUM})(?:号|日)", text)
        if day_of_month:
            text = text.replace(day_of_month.group(0),
                                f"{now.year}年{now.month}月{_zh_number(day_of_month.group(1))}日")
            monthly_day = True
    day_named = relative or bool(re.search(r"今天|明天|后天|周[一二三四五六日]|年", text))
    return _Reading(" ".join(text.split()), day_named, monthly_day, timed, extra_days,
                    offset=relative and not _ZH_CLOCK_PARTS.search(when))


def _normalize_en(when: str, now: datetime, repeating: bool) -> _Reading:
    text = " " + when.lower() + " "
    text = re.sub(r"\ba couple of\b", "2", text)
    text = re.sub(r"\ba few\b", "3", text)
    text = re.sub(r"\bin\s+half\s+an\s+hour\b", "in 30 minutes", text)
    text = re.sub(r"\bin\s+an\s+hour\s+and\s+a\s+half\b", "in 90 minutes", text)
    text = re.sub(r"\bin\s+a\s+quarter\s+of\s+an\s+hour\b", "in 15 minutes", text)
    text = re.sub(r"\bin\s+([a-z0-9-]+)\s+and\s+a\s+half\s+hours?\b",
                  lambda m: f"in {_en_number(m.group(1)) * 60 + 30} minutes", text)
    text = re.sub(r"\bin\s+([a-z-]+)\s+(minutes?|mins?|hours?|hrs?|days?|weeks?)\b",
                  lambda m: f"in {_en_number(m.group(1))} {m.group(2)}", text)
    relative = bool(re.search(r"\bin\s+\d", text))
    period = ""
    for words, name in (("tonight", "evening"), ("this morning", "morning"), ("this afternoon", "afternoon"),
                        ("this evening", "evening")):
        if words in text:
            text = text.replace(words, "today")
            period = name
    named = re.search(r"\b(?:in\s+the\s+)?(morning|afternoon|evening|night)\b", text)
    if named:
        period = period or named.group(1)
        text = text.replace(named.group(0), " ")
    text = re.sub(r"\bnoon\b", "12:00", text)
    text = re.sub(r"\bmidnight\b", "23:59", text)
    text = re.sub(r"\s*\bo'?clock\b", "", text)
    text = text.replace("a.m.", "am").replace("p.m.", "pm")
    monthly_day = False
    day_of_month = re.search(r"\b(?:on\s+)?the\s+(\d{1,2})(?:st|nd|rd|th)\b(?!\s+(?:of\s+)?[a-z]{3})", text)
    if day_of_month:
        text = text.replace(day_of_month.group(0), f" {now.year}-{now.month:02d}-{int(day_of_month.group(1)):02d} ")
        monthly_day = True
    day_named = relative or bool(re.search(rf"\b(?:today|tomorrow|{_EN_DAYS}|{_EN_MONTHS}|\d{{4}}-\d\d-\d\d)\b",
                                           text))
    has_clock = bool(re.search(r"\d:\d\d|\d\s*(?:am|pm)\b", text))
    bare = re.search(r"\b(?:at|by|around)\s+(\d{1,2})\b(?!\s*(?::|am|pm))", text)
    timed = relative or has_clock or bare is not None or bool(period)
    if bare:
        hour = int(bare.group(1))
        if period in ("afternoon", "evening", "night") and hour < 12:
            hour += 12
        elif not period and 1 <= hour <= 11:
            hour = _likely_hour(hour, now, day_named or repeating)
        text = text[:bare.start()] + f" {hour}:00 " + text[bare.end():]
    elif period and not has_clock and not relative:
        text += f" {({'morning': 9, 'afternoon': 15, 'evening': 19, 'night': 21})[period]}:00"
    elif period in ("afternoon", "evening", "night"):
        text = re.sub(r"\b(\d{1,2}):(\d{2})\b(?!\s*(?:am|pm))",
                      lambda m: f"{int(m.group(1)) + 12 if int(m.group(1)) < 12 else m.group(1)}:{m.group(2)}", text)
    text = re.sub(r"\b(?:at|by|around|on)\b", " ", text)
    return _Reading(" ".join(text.split()), day_named, monthly_day, timed,
                    offset=relative and not has_clock and bare is None)


def _en_number(word: str) -> int:
    if word.isdigit():
        return int(word)
    if word in _EN_NUMBERS:
        return _EN_NUMBERS[word]
    raise NotUnderstood(f"I could not read the number {word!r}")


def _likely_hour(hour: int, now: datetime, day_named: bool) -> int:
    """An hour said without minutes, am or pm: on a named day (or in a repeat) 7-11 are the
    morning and 1-6 the afternoon; otherwise whichever of the two comes first from now ("at 6"
    said at 14:00 is 18:00)."""
    if day_named:
        return hour if hour >= 7 else hour + 12
    if now.replace(hour=hour, minute=0, second=0, microsecond=0) > now:
        return hour
    return hour + 12 if now.replace(hour=hour + 12, minute=0, second=0, microsecond=0) > now else hour


def resolve_when(when: str, now: datetime, zone: ZoneInfo | str, repeat_type: str = "none") -> datetime:
    """The instant (UTC) the words mean, on the clocks of `zone` as they read at `now`; with a
    repeat, its first occurrence from now. NotUnderstood when there is no time to read.
    CPU-bound the first time (dateparser loads its language data): run it in an executor."""
    import dateparser

    if isinstance(zone, str):
        zone = ZoneInfo(zone)
    if not when.strip():
        raise NotUnderstood("no time was given")
    local_now = now.astimezone(zone).replace(tzinfo=None)
    language = language_of(when)
    reading = (_normalize_zh(when, local_now) if language == "zh"
               else _normalize_en(when, local_now, repeating=repeat_type != "none"))
    settings = {"RELATIVE_BASE": local_now, "PREFER_DATES_FROM": "future", "RETURN_AS_TIMEZONE_AWARE": False}
    languages = [language, "en"] if language == "zh" else ["en"]
    wall: datetime | None = (dateparser.parse(reading.phrase, languages=languages, settings=settings)
                             if reading.phrase else None)
    if wall is None:
        raise NotUnderstood(f"I could not read a time in {when!r}")
    if reading.offset and repeat_type == "none":
        # An offset is time that passes, whatever the clocks do meanwhile (a DST change).
        return (now + (wall - local_now)).replace(microsecond=0).astimezone(ZoneInfo("UTC"))
    wall = wall.replace(microsecond=0) + timedelta(days=reading.extra_days)
    if not reading.timed:
        wall = wall.replace(hour=DEFAULT_HOUR, minute=0, second=0)
    if reading.monthly_day and wall <= local_now:
        wall = _next_month(wall)
    elif not reading.day_named and wall <= local_now:
        wall += timedelta(days=1)  # a time of day alone is the next one
    instant = localize(wall, zone)
    if repeat_type != "none":
        first = next_occurrence(Repeat(repeat_type), instant, now - timedelta(seconds=1), zone)
        return first or instant
    return instant


def _next_month(wall: datetime) -> datetime:
    year, month = (wall.year + 1, 1) if wall.month == 12 else (wall.year, wall.month + 1)
    return wall.replace(year=year, month=month)
