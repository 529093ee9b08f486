"""How the offline agent reads a request about the devices, in English and Chinese: which room,
which kind of device (or which reading), and what to do ("turn on the living room light",
"set the bedroom AC to 24 degrees", "is the front door locked?", "打开客厅的灯",
"把卧室空调调到24度", "窗帘拉开一半"). The words name rooms and kinds; the device tools
(assistant.py) find the person's device they mean among their devices."""
from __future__ import annotations

import re
import unicodedata

from gateway.text import HAN

# Room words -> the simulated home's room ids. A room the tables do not know (a real device's)
# is still found by its names, which the tools compare too.
ROOM_WORDS: dict[str, str] = {
    "living room": "living_room", "livingroom": "living_room", "lounge": "living_room", "sitting room": "living_room",
    "客厅": "living_room", "起居室": "living_room",
    "bedroom": "bedroom", "bed room": "bedroom", "卧室": "bedroom", "主卧": "bedroom", "睡房": "bedroom",
    "kitchen": "kitchen", "厨房": "kitchen", "bathroom": "bathroom", "卫生间": "bathroom", "浴室": "bathroom",
    "study": "study", "书房": "study", "hallway": "hallway", "走廊": "hallway", "玄关": "entrance",
}

# Kind words -> device types; longest first when read from text.
TYPE_WORDS: dict[str, str] = {
    "air conditioner": "air_conditioner", "air conditioning": "air_conditioner", "aircon": "air_conditioner",
    "a/c": "air_conditioner", "ac": "air_conditioner", "空调": "air_conditioner", "冷气": "air_conditioner",
    "light": "light", "lights": "light", "lamp": "light", "lamps": "light", "灯": "light", "电灯": "light",
    "灯光": "light",
    "curtain": "curtain", "curtains": "curtain", "blinds": "curtain", "drapes": "curtain", "窗帘": "curtain",
    "door lock": "lock", "front door": "lock", "door": "lock", "lock": "lock", "门锁": "lock", "门": "lock",
    "锁": "lock",
    "thermometer": "temperature_sensor", "temperature sensor": "temperature_sensor", "温度计": "temperature_sensor",
    "温度传感器": "temperature_sensor",
    "humidity sensor": "humidity_sensor", "hygrometer": "humidity_sensor", "湿度计": "humidity_sensor",
    "湿度传感器": "humidity_sensor",
}

# The property a reading names -> the device type that reports it.
READING_WORDS: dict[str, str] = {
    "temperature": "temperature", "how warm": "temperature", "how hot": "temperature", "how cold": "temperature",
    "温度": "temperature", "多少度": "temperature", "几度": "temperature", "冷不冷": "temperature",
    "热不热": "temperature", "有多热": "temperature", "有多冷": "temperature",
    "humidity": "humidity", "how humid": "humidity", "湿度": "humidity", "潮湿": "humidity",
    "locked": "locked", "unlocked": "locked", "锁了": "locked", "锁上了": "locked", "锁好了": "locked",
    "锁着": "locked", "上锁": "locked",
}
PROPERTY_TYPES = {"temperature": "temperature_sensor", "humidity": "humidity_sensor", "locked": "lock",
                  "position": "curtain", "brightness": "light", "color_temp": "light",
                  "target_temperature": "air_conditioner", "mode": "air_conditioner", "fan": "air_conditioner"}

AC_MODES = {"cool": "cool", "cooling": "cool", "制冷": "cool", "冷风": "cool", "heat": "heat", "heating": "heat",
            "制热": "heat", "暖风": "heat", "fan only": "fan", "送风": "fan", "dry": "dry", "dehumidify": "dry",
            "除湿": "dry", "auto": "auto", "automatic": "auto", "自动": "auto"}
FAN_SPEEDS = {"high": "high", "medium": "medium", "low": "low", "auto": "auto",
              "高": "high", "中": "medium", "低": "low", "自动": "auto"}

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}



def normalize(text: str) -> str:
    """Lower case, NFKC (full-width digits and signs), `_`/`-` as spaces, single spaces."""
    text = unicodedata.normalize("NFKC", text).lower().replace("’", "'")
    return " ".join(re.sub(r"[_\-]+", " ", text).split())


def chinese_number(text: str) -> float | None:
    """二十四 -> 24, 三十 -> 30, 十八 -> 18, 一百 -> 100, 二十四点五 -> 24.5 (0-999)."""
    whole, _, fraction = text.partition("点")
    total, current = 0, 0
    if not whole:
        return None
    for char in whole:
        if char in _DIGITS:
            current = _DIGITS[char]
        elif char == "十":
            total += (current or 1) * 10
            current = 0
        elif char == "百":
            total += (current or 1) * 100
            current = 0
        else:
            return None
    value: float = total + current
    if fraction:
        if any(char not in _DIGITS for char in fraction):
            return None
        value += float("0." + "".join(str(_DIGITS[char]) for char in fraction))
    return value


_ZH_NUMBER = "[零〇一二两三四五六七八九十百点]+"
_NUMBER = rf"(\d+(?:\.\d+)?|{_ZH_NUMBER})"


def _number(raw: str) -> float | None:
    try:
        return float(raw)
    except ValueError:
        return chinese_number(raw)


def _tidy(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def find_word(text: str, table: dict[str, str]) -> tuple[str, str] | None:
    """The longest word of `table` in `text` (whole words for English), and what it stands for."""
    for word in sorted(table, key=len, reverse=True):
        if HAN.search(word):
            if word in text:
                return word, table[word]
        elif re.search(rf"(?<![a-z]){re.escape(word)}(?![a-z])", text):
            return word, table[word]
    return None


def room_in(text: str) -> str | None:
    """The room word the person said (as said: the tools match it against the rooms' names too)."""
    found = find_word(normalize(text), {word: word for word in ROOM_WORDS})
    return found[0] if found else None


def type_in(text: str) -> str | None:
    found = find_word(normalize(text), TYPE_WORDS)
    return found[1] if found else None


def _percent(text: str) -> float | None:
    """A share the person named: 30%, 30 percent, 百分之三十, 一半 / half (50), fully / 全部 (100)."""
    match = re.search(r"(\d+(?:\.\d+)?)\s*(?:%|percent|per cent)", text) or re.search(rf"百分之{_NUMBER}", text)
    if match:
        return _number(match.group(1))
    if re.search(r"一半|half", text):
        return 50
    if re.search(r"全部|完全|fully|all the way|totally", text):
        return 100
    return None


def _degrees(text: str) -> float | None:
    match = re.search(rf"{_NUMBER}\s*(?:°\s*c?|degrees?|度|℃|celsius)", text)
    if match:
        return _number(match.group(1))
    match = re.search(r"(?:to|at)\s+(\d+(?:\.\d+)?)\s*$", text)  # "set the AC to 24"
    return float(match.group(1)) if match else None


def _switch(text: str, kind: str | None) -> bool | None:
    """On (True) or off (False), when the person asked to switch something."""
    if kind == "lock":
        if re.search(r"unlock|解锁|开锁|打开门锁|把门打开|打开门|open the (?:front )?door", text):
            return False
        if re.search(r"\block\b|锁上|锁门|上锁|锁好|关门|把门关上", text):
            return True
        return None
    if re.search(r"\b(?:turn|switch|power)\s+off\b|\b(?:turn|switch|power)\b.*\boff\b|关闭|关掉|关上|关了|关灯|"
                 r"熄灭|^关|把.*关", text):
        return False
    if re.search(r"\b(?:turn|switch|power)\s+on\b|\b(?:turn|switch|power)\b.*\bon\b|打开|开启|开灯|开一下|启动|"
                 r"^开|把.*开", text):
        return True
    return None


# Words that put an operation off (a reminder, a schedule, a condition): the device tools act now,
# so such a request gets no action from them rather than a wrong one at once ("remind me to turn
# on the living room light at 7" must not switch it on now).
_DEFERRED = re.compile(
    r"\bremind|\btomorrow\b|\btonight\b|\bevery (?:day|night|morning|evening|week|month|hour|\d+|\w+day)\b|"
    r"\bwhen(?:ever)?\b|\bif\b|\blater\b|\bafter\b|"
    r"\bin \d+ (?:seconds?|minutes?|hours?|days?)\b|\bat \d{1,2}(?::\d\d|\s*(?:am|pm|o'clock)\b)|"
    r"提醒|明天|每天|每周|以后|之后|分钟后|小时后|点钟|如果|的时候|当.{1,30}时")


def deferred(text: str) -> bool:
    """Whether the words ask for the operation later or on a condition, not now."""
    return _DEFERRED.search(normalize(text)) is not None


def parse_operation(text: str) -> dict:
    """Arguments of `operate_device`: {room?, type?, action, value | property+value | properties};
    no action for words that put it off (`deferred`)."""
    said = normalize(text)
    if deferred(said):
        return {}
    kind = type_in(said)
    room = room_in(said)
    properties: dict = {}
    degrees, percent = _degrees(said), _percent(said)
    if kind is None and degrees is not None:
        kind = "air_conditioner"
    if kind == "curtain":
        if percent is not None:
            properties["position"] = percent
        elif re.search(r"\bclose|\bshut|\bdraw\b|关上|拉上|合上|关闭|关", said):
            properties["position"] = 0
        elif re.search(r"\bopen|拉开|打开|开", said):
            properties["position"] = 100
    elif kind == "light":
        kelvin = re.search(r"(\d{4})\s*k\b|色温\D*(\d{4})", said)
        if kelvin:
            properties["color_temp"] = int(kelvin.group(1) or kelvin.group(2))
        number = percent
        if number is None and not kelvin:
            bare = re.search(rf"(?:to|到|为|成)\s*{_NUMBER}(?!\s*(?:k\b|度|°|degree))", said)
            number = _number(bare.group(1)) if bare else None
        if number is not None:
            properties["brightness"] = number
        elif re.search(r"\bdim|调暗", said):
            properties["brightness"] = 30
        elif re.search(r"brighten|调亮|最亮", said):
            properties["brightness"] = 100
    elif kind == "air_conditioner":
        if degrees is not None:
            properties["target_temperature"] = degrees
        mode = find_word(said, AC_MODES)
        if mode and not re.search(r"fan speed|风速|风量", said):
            properties["mode"] = mode[1]
        fan = re.search(r"(?:fan(?: speed)?(?: to)?|风速|风量)\s*(?:调到|调成|设为|to)?\s*(high|medium|low|auto|高|中|低|自动)",
                        said)
        if fan:
            properties["fan"] = FAN_SPEEDS[fan.group(1)]
    switch = _switch(said, kind)
    arguments: dict = {}
    if room:
        arguments["room"] = room
    if kind:
        arguments["type"] = kind
    if re.search(r"\ball\b|\bevery\b|\b(?:lights|lamps)\b|所有|全部的|都", said):
        arguments["all"] = True  # "all the lights", "the lights", "把灯都关了": each one that fits
    properties = {name: _tidy(value) if isinstance(value, float) else value for name, value in properties.items()}
    if properties:
        if switch is True and kind in ("light", "air_conditioner"):
            properties = {"on": True, **properties}
        if len(properties) == 1:
            (name, value), = properties.items()
            return {**arguments, "action": "set", "property": name, "value": value}
        return {**arguments, "action": "set", "properties": properties}
    if switch is not None:
        return {**arguments, "action": "switch", "value": switch}
    return arguments  # no action: the offline agent asks for one


def parse_reading(text: str) -> dict:
    """Arguments of `read_device`: {room?, type?, property?}."""
    said = normalize(text)
    arguments: dict = {}
    room = room_in(said)
    if room:
        arguments["room"] = room
    reading = find_word(said, READING_WORDS)
    kind = type_in(said)
    if reading:
        # A temperature or humidity is read from whatever reports it in the room (its sensor, else
        # its air conditioner): the kind only when the person named one.
        arguments["property"] = reading[1]
        if reading[1] == "locked":
            kind = "lock"
    elif kind == "light" or kind == "air_conditioner":
        arguments["property"] = "on"
    elif kind == "curtain":
        arguments["property"] = "position"
    elif kind == "lock":
        arguments["property"] = "locked"
    if kind:
        arguments["type"] = kind
    return arguments


def parse_listing(text: str) -> dict:
    """Arguments of `list_devices`: {room?, type?}."""
    said = normalize(text)
    arguments: dict = {}
    room = room_in(said)
    if room:
        arguments["room"] = room
    kind = find_word(said, {word: kind for word, kind in TYPE_WORDS.items() if len(word) > 1 or HAN.search(word)})
    if kind and kind[0] not in ("门", "锁"):
        arguments["type"] = kind[1]
    return arguments
