"""Text that UTF-8 can carry. JSON may hold half of a surrogate pair as an escape (`"\\ud800"`,
what a client that cuts an emoji in two sends); Python decodes it into a str that PostgreSQL,
a WebSocket frame and every UTF-8 encoder refuse. Such halves become U+FFFD where JSON comes in."""
from __future__ import annotations

import json
import re
from typing import Any

import orjson


def may_hold_lone_surrogates(raw: str | bytes) -> bool:
    """Whether JSON text can decode to half a surrogate pair, or to NUL (which PostgreSQL text
    cannot hold): only an escape makes either (raw UTF-8 cannot encode a half; a raw NUL is not
    valid JSON text inside a string). Cheap enough to ask of every frame."""
    if isinstance(raw, bytes):
        return b"\\ud" in raw or b"\\uD" in raw or b"\\u0000" in raw
    return "\\ud" in raw or "\\uD" in raw or "\\u0000" in raw


def without_lone_surrogates(value: Any) -> Any:
    """`value` (decoded JSON) with every half of a surrogate pair and every NUL, in keys too,
    replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace").replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {without_lone_surrogates(key): without_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    return value


def dumps_text(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False)`, compact: every frame of a reply and every stored
    message is encoded, and orjson does it several times faster. Whatever orjson refuses (keys
    that are not strings, an integer past 64 bits, half of a surrogate pair) json encodes, or
    refuses, as before. NaN and the infinities become null (json wrote `NaN`, which is not JSON
    and which PostgreSQL's jsonb refuses)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# Deeper JSON than this is refused: nothing the services take nests nearly as deep, and every
# recursive reader after the parser (schemas, encoders, PostgreSQL) would fail on a deep one.
MAX_JSON_DEPTH = 64


def loads_utf8_safe(raw: str | bytes) -> Any:
    """`json.loads(raw)`, with halves of surrogate pairs replaced when the text escapes any. Bytes
    are decoded first, as json does (UTF-8, or UTF-16/32 by their first bytes), so that the check
    reads the text the parser reads. JSON nested deeper than MAX_JSON_DEPTH, or with an integer
    longer than Python converts (4,300 digits), raises JSONDecodeError like any bad JSON."""
    if isinstance(raw, bytes):
        raw = raw.decode(json.detect_encoding(raw))  # strict: an encoded half of a pair is refused
    elif not may_hold_lone_surrogates(raw) and raw.count("[") + raw.count("{") <= MAX_JSON_DEPTH:
        # The usual text (a chat frame, each event of a streamed reply): orjson reads it several
        # times faster. Whatever it refuses (NaN, an integer past 64 bits, a raw lone surrogate)
        # json reads, or refuses, as before.
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    try:
        value = json.loads(raw)
    except RecursionError:
        raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", raw, 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError as error:  # int() refusing a number of too many digits
        raise json.JSONDecodeError(f"a number is too long ({error})", raw, 0) from None
    # Counting brackets runs at C speed; only text that could nest deep is walked.
    if raw.count("[") + raw.count("{") > MAX_JSON_DEPTH and _depth(value) > MAX_JSON_DEPTH:
        raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", raw, 0)
    return without_lone_surrogates(value) if may_hold_lone_surrogates(raw) else value


def _depth(value: Any) -> int:
    """How deep containers nest in decoded JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item if isinstance(child, (dict, list)))
    return deepest


# Han characters (CJK unified ideographs, extension A, compatibility, and the supplementary
# planes' extensions): what marks a text as Chinese for every guess of a language here.
HAN_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
HAN = re.compile(f"[{HAN_RANGES}]")
# Scripts written without spaces between words, in which a character is about a word: kana, Han
# and Hangul (a token, for an estimate; a larger unit, for a chunk's size).
UNSPACED_SCRIPT_RANGES = f"\u3040-\u30ff{HAN_RANGES}\uac00-\ud7af"


def has_han(text: str) -> bool:
    return HAN.search(text) is not None


def language_of(text: str) -> str:
    """`zh` for a text with a Han character, else `en`: the two languages the assistant speaks."""
    return "zh" if has_han(text) else "en"
