"""Review of a finished reply: one text that mixes formats becomes several `review_messages`,
each with its own type, so clients render each part the right way and never split a code
block or a Markdown table into spoken sentences.

A pure function of the text (no I/O, no state), see `review_reply`. The rules, in order:

1. Fenced code blocks (```lang ... ```, also ~~~) are `code` with `metadata.language`
   (`text` when the fence names none). An unclosed fence runs to the end of the reply.
2. `<action>...</action>` anywhere in the remaining text is `action` narration (the tag may
   sit inside a sentence; the text around it stays where it was).
3. Legacy action forms, accepted when a whole paragraph is wrapped in them: `【...】`,
   `（...）` (full-width parentheses) and `[[...]]`.
4. `<search_result url="...">...</search_result>` (internal search summaries) never reaches a
   client as such: it becomes `markdown` when it contains Markdown, `chat` otherwise, keeping
   `metadata.url`.
5. Every other run of text between those parts is `markdown` when any of it uses Markdown
   syntax (headings, lists, tables, quotes, emphasis, links, inline code), otherwise `chat`.
   A Markdown run is never split.

`delay_ms` is a reading pause a client may wait before showing the part: 0 for the first, then
300 ms plus 15 ms per character of the previous part, at most 2000 ms.
"""
from __future__ import annotations

import re
from typing import Iterator

CHAT, ACTION, MARKDOWN, CODE, SEARCH_RESULT = "chat", "action", "markdown", "code", "search_result"

_FENCE = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$", re.MULTILINE)
_TAGGED = re.compile(
    r"<action>(?P<action>.*?)</action>"
    r"|<search_result(?:\s+url\s*=\s*[\"'](?P<url>[^\"']*)[\"'])?\s*>(?P<search>.*?)</search_result>",
    re.DOTALL | re.IGNORECASE)
_STRAY_TAG = re.compile(r"</?(?:action|search_result)\b[^>]*>", re.IGNORECASE)
_LEGACY_ACTION = re.compile(r"^(?:【(?P<a>[^【】]+)】|（(?P<b>[^（）]+)）|\[\[(?P<c>[^\[\]]+)\]\])$", re.DOTALL)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_MARKDOWN_LINE = re.compile(
    r"^[ \t]{0,3}(?:#{1,6}[ \t]+\S|[-*+][ \t]+\S|\d{1,3}[.)][ \t]+\S|>[ \t]?\S|\|.*\||(?:-{3,}|\*{3,}|_{3,})[ \t]*$)",
    re.MULTILINE)
_MARKDOWN_INLINE = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__|`[^`\n]+`|!?\[[^\]\n]+\]\([^)\s]+\)|~~[^~\n]+~~")

FIRST_DELAY_MS = 0
BASE_DELAY_MS = 300
DELAY_PER_CHARACTER_MS = 15
MAX_DELAY_MS = 2000


def looks_like_markdown(text: str) -> bool:
    return bool(_MARKDOWN_LINE.search(text) or _MARKDOWN_INLINE.search(text))


def _split_code(text: str) -> Iterator[tuple[str, str, dict]]:
    """(type, content, metadata) with fenced code blocks cut out; other text as `prose`."""
    position = 0
    while True:
        opening = _FENCE.search(text, position)
        if opening is None:
            break
        fence = opening.group("fence")
        closing = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        body_start = opening.end() + 1 if opening.end() < len(text) else opening.end()
        end_match = closing.search(text, body_start)
        body_end = end_match.start() if end_match else len(text)
        yield "prose", text[position:opening.start()], {}
        language = (opening.group("info").strip().split() or ["text"])[0].lower()
        yield CODE, text[body_start:body_end].rstrip("\n"), {"language": language}
        position = end_match.end() if end_match else len(text)
    yield "prose", text[position:], {}


def _split_tags(text: str) -> Iterator[tuple[str, str, dict]]:
    """Action and search-result tags cut out of prose; the rest stays `prose`."""
    position = 0
    for match in _TAGGED.finditer(text):
        yield "prose", text[position:match.start()], {}
        if match.group("action") is not None:
            yield ACTION, match.group("action"), {}
        else:
            url = match.group("url")
            yield SEARCH_RESULT, match.group("search"), ({"url": url} if url else {})
        position = match.end()
    yield "prose", text[position:], {}


def _split_prose(text: str) -> Iterator[tuple[str, str, dict]]:
    """Legacy action paragraphs cut out; each remaining run is markdown or chat as a whole."""
    run: list[str] = []

    def flush() -> Iterator[tuple[str, str, dict]]:
        joined = "\n\n".join(run).strip()
        run.clear()
        if joined:
            yield (MARKDOWN if looks_like_markdown(joined) else CHAT), joined, {}

    for paragraph in _PARAGRAPH_BREAK.split(text):
        stripped = paragraph.strip()
        legacy = _LEGACY_ACTION.match(stripped) if stripped else None
        if legacy:
            yield from flush()
            yield ACTION, next(group for group in legacy.groups() if group), {}
        elif stripped:
            run.append(stripped)
    yield from flush()


def _convert_search_result(content: str, metadata: dict) -> tuple[str, str, dict]:
    kind = MARKDOWN if looks_like_markdown(content) else CHAT
    return kind, content, {"url": metadata["url"]} if metadata.get("url") else {}


def _delay(previous: str | None) -> int:
    if previous is None:
        return FIRST_DELAY_MS
    return min(MAX_DELAY_MS, BASE_DELAY_MS + DELAY_PER_CHARACTER_MS * len(previous))


def review_reply(text: str) -> list[dict]:
    """The reply as review messages `{type, content, delay_ms, metadata}`, in reply order."""
    parts: list[tuple[str, str, dict]] = []
    for kind, content, metadata in _split_code(text or ""):
        if kind == CODE:
            if content.strip():
                parts.append((CODE, content, metadata))
            continue
        for tag_kind, tag_content, tag_metadata in _split_tags(content):
            if tag_kind == ACTION:
                cleaned = " ".join(_STRAY_TAG.sub("", tag_content).split())
                if cleaned:
                    parts.append((ACTION, cleaned, {}))
            elif tag_kind == SEARCH_RESULT:
                cleaned = _STRAY_TAG.sub("", tag_content).strip()
                if cleaned:
                    parts.append(_convert_search_result(cleaned, tag_metadata))
            else:
                for prose_kind, prose, prose_metadata in _split_prose(_STRAY_TAG.sub("", tag_content)):
                    if prose_kind == ACTION:
                        prose = " ".join(prose.split())
                    parts.append((prose_kind, prose, prose_metadata))
    messages: list[dict] = []
    previous: str | None = None
    for kind, content, metadata in parts:
        messages.append({"type": kind, "content": content, "delay_ms": _delay(previous), "metadata": metadata})
        previous = content
    return messages


# Stored messages carry one of the spec's four stored types; role follows the type.
def stored_role(review_type: str) -> str:
    return "action" if review_type == ACTION else "assistant"
