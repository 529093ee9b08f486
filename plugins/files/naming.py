"""File names as a client sent them are only ever shown back (listing, Content-Disposition);
storage uses server-chosen keys. Still, a shown name must not carry path parts, control or
direction-changing characters, or names Windows reserves, and Unicode is kept."""
from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote, unquote

MAX_NAME_BYTES = 255
FALLBACK_NAME = "file"

_RESERVED = re.compile(r"^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?$", re.IGNORECASE)
_FORBIDDEN = set('<>:"/\\|?*')


def client_filename(raw: str | None) -> str:
    """The name a multipart part carries. Browsers and aiohttp percent-encode what cannot stand
    in a quoted header value (quotes, line breaks, and for aiohttp also slashes and spaces), and
    the server side does not decode it, so it is decoded here, before sanitising."""
    raw = raw or ""
    if "%" not in raw:
        return raw
    try:
        return unquote(raw, errors="strict")
    except UnicodeDecodeError:
        return raw


def sanitize_filename(raw: str | None) -> str:
    name = unicodedata.normalize("NFC", raw or "")
    # Only the last path component, whichever separator the client's system used.
    name = re.split(r"[/\\]", name)[-1]
    cleaned = []
    for character in name:
        category = unicodedata.category(character)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn") or character in _FORBIDDEN:
            continue  # controls, bidi overrides, zero-width marks, unassigned
        cleaned.append(" " if category in ("Zl", "Zp", "Zs") else character)
    name = re.sub(r" {2,}", " ", "".join(cleaned)).strip(" .")
    if not name:
        return FALLBACK_NAME
    if _RESERVED.match(name):
        name = "_" + name
    return _truncate(name)


def _truncate(name: str) -> str:
    """At most MAX_NAME_BYTES of UTF-8, keeping a short extension."""
    if len(name.encode("utf-8")) <= MAX_NAME_BYTES:
        return name
    stem, dot, extension = name.rpartition(".")
    if not dot or len(extension) > 16 or not stem:
        stem, extension = name, ""
    suffix = f".{extension}" if extension else ""
    budget = MAX_NAME_BYTES - len(suffix.encode("utf-8"))
    encoded = stem.encode("utf-8")[:budget]
    return encoded.decode("utf-8", errors="ignore").rstrip(" .") + suffix


def content_disposition(filename: str) -> str:
    """`attachment` with an ASCII fallback and the exact UTF-8 name (RFC 6266 / 5987)."""
    ascii_name = unicodedata.normalize("NFKD", filename).encode("ascii", "ignore").decode("ascii")
    ascii_name = re.sub(r'[^A-Za-z0-9 ._()\-]', "_", ascii_name).strip() or FALLBACK_NAME
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename, safe='')}"
