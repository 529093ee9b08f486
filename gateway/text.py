"""Text that UTF-8 can carry. JSON may hold half of a surrogate pair as an escape (`"\\ud800"`,
what a client that cuts an emoji in two sends); Python decodes it into a str that PostgreSQL,
a WebSocket frame and every UTF-8 encoder refuse. Such halves become U+FFFD where JSON comes in."""
from __future__ import annotations

import json
from typing import Any


def may_hold_lone_surrogates(raw: str | bytes) -> bool:
    """Whether JSON text can decode to half a surrogate pair: only an escape of one makes it
    (raw UTF-8 cannot encode one). Cheap enough to ask of every frame."""
    if isinstance(raw, bytes):
        return b"\\ud" in raw or b"\\uD" in raw
    return "\\ud" in raw or "\\uD" in raw


def without_lone_surrogates(value: Any) -> Any:
    """`value` (decoded JSON) with every half of a surrogate pair, in keys too, replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {without_lone_surrogates(key): without_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    return value


def loads_utf8_safe(raw: str | bytes) -> Any:
    """`json.loads(raw)`, with halves of surrogate pairs replaced when the text escapes any. Bytes
    are decoded first, as json does (UTF-8, or UTF-16/32 by their first bytes), so that the check
    reads the text the parser reads."""
    if isinstance(raw, bytes):
        raw = raw.decode(json.detect_encoding(raw))  # strict: an encoded half of a pair is refused
    value = json.loads(raw)
    return without_lone_surrogates(value) if may_hold_lone_surrogates(raw) else value
