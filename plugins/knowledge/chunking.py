"""Cutting a document's text into passages that an answer can cite.

Each chunk is an exact span of the document's `raw_content` (`text == raw[start:end]`), so a
client can highlight it. Cuts follow the text's structure, coarsest first: Markdown headings
(every chunk keeps the path of headings above it; a chunk never spans two sections), then
paragraphs (blank lines), then sentences (`.!?` before a space, `。！？；` with no space, as
Chinese writes them) and line ends, and only for one over-long sentence a hard cut (at a space
when there is one). When a paragraph is cut between two chunks, the second repeats up to
`overlap` units of whole sentences from the end of the first, so a fact cut at the boundary is
whole in one of them.

Sizes are in *units*: one per character, three per CJK character. A CJK character is about one
token of a multilingual embedding model where an English word of five letters is one or two, and
those models read at most 512 tokens: 800 units is about 200 English tokens or 270 Chinese.

Pure functions on strings; the plugin runs them in an executor (a 1 MB text takes ~0.2 s)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

DEFAULT_MAX_UNITS = 800
DEFAULT_MIN_UNITS = 500
DEFAULT_OVERLAP_UNITS = 120

# Han ideographs (with extension A and compatibility forms), kana, hangul, CJK punctuation.
CJK = re.compile(r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
# Where a sentence ends: Western punctuation (with closing quotes or brackets) before white
# space, CJK full stops with or without it, or a line end (a line of a PDF, a list item).
_SENTENCE_END = re.compile(
    r"[.!?…]+[\"'”’)\]]*[ \t]+|[。！？；…]+[”’」』）\]]*[ \t]*|\n")
_SPACE = re.compile(r"\s")


@dataclass(frozen=True)
class Chunk:
    text: str
    start: int                       # offsets into the document's raw_content, in characters
    end: int
    heading_path: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class _Piece:
    start: int
    end: int
    units: int
    opens_paragraph: bool


def units(text: str) -> int:
    """The size measure of this module: characters, CJK ones counting three."""
    return len(text) + 2 * len(CJK.findall(text))


def looks_like_markdown(text: str) -> bool:
    """Whether a note typed as plain text uses Markdown headings or code fences."""
    fenced = False
    for line in text[:200_000].splitlines():
        if _FENCE.match(line):
            return True
        if not fenced and _ATX_HEADING.match(line):
            return True
    return False


def chunk_text(text: str, *, markdown: bool = True, max_units: int = DEFAULT_MAX_UNITS,
               min_units: int = DEFAULT_MIN_UNITS, overlap_units: int = DEFAULT_OVERLAP_UNITS) -> list[Chunk]:
    """The chunks of `text`, in order. With `markdown`, ATX headings (`# Title`) outside code
    fences start sections and make the heading path."""
    if max_units < 50:
        raise ValueError("max_units must be at least 50")
    min_units = min(min_units, max_units)
    overlap_units = max(0, min(overlap_units, max_units // 2))
    chunks: list[Chunk] = []
    for path, start, end in _sections(text, markdown):
        pieces = _pieces(text, start, end, max_units)
        chunks.extend(_pack(text, pieces, path, max_units, min_units, overlap_units))
    return chunks


def _sections(text: str, markdown: bool) -> list[tuple[tuple[str, ...], int, int]]:
    """(heading path, start, end) of each section; the heading's own line begins its section."""
    if not markdown:
        return [((), 0, len(text))]
    sections: list[tuple[tuple[str, ...], int, int]] = []
    stack: list[tuple[int, str]] = []
    section_start = 0
    section_path: tuple[str, ...] = ()
    fence: str | None = None
    offset = 0
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        fence_match = _FENCE.match(bare)
        if fence_match:
            marker = fence_match.group(1)
            fence = None if fence == marker else (fence or marker)
        elif fence is None and (heading := _ATX_HEADING.match(bare)):
            sections.append((section_path, section_start, offset))
            level, title = len(heading.group(1)), heading.group(2).strip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            section_start, section_path = offset, tuple(title for _, title in stack)
        offset += len(line)
    sections.append((section_path, section_start, len(text)))
    return [(path, start, end) for path, start, end in sections if end > start]


def _pieces(text: str, start: int, end: int, max_units: int) -> list[_Piece]:
    """The section cut at every sentence end and line end: the places a chunk may end."""
    pieces: list[_Piece] = []
    for paragraph_start, paragraph_end in _paragraphs(text, start, end):
        opens = True
        position = paragraph_start
        for match in _SENTENCE_END.finditer(text, paragraph_start, paragraph_end):
            if match.end() > position:
                opens = not _add_piece(pieces, text, position, match.end(), opens, max_units) and opens
                position = match.end()
        if position < paragraph_end:
            _add_piece(pieces, text, position, paragraph_end, opens, max_units)
    return pieces


def _paragraphs(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans, position = [], start
    for match in _PARAGRAPH_BREAK.finditer(text, start, end):
        spans.append((position, match.start()))
        position = match.end()
    spans.append((position, end))
    return [(a, b) for a, b in spans if text[a:b].strip()]


def _add_piece(pieces: list[_Piece], text: str, start: int, end: int, opens_paragraph: bool,
               max_units: int) -> bool:
    """One sentence, or for a sentence longer than a chunk, parts of it cut at spaces. False when
    the span holds nothing but white space."""
    if not text[start:end].strip():
        return False
    size = units(text[start:end])
    if size <= max_units:
        pieces.append(_Piece(start, end, size, opens_paragraph))
        return True
    while start < end:
        cut = _hard_cut(text, start, end, max_units)
        if text[start:cut].strip():
            pieces.append(_Piece(start, cut, units(text[start:cut]), opens_paragraph))
            opens_paragraph = False
        start = cut
    return True


def _hard_cut(text: str, start: int, end: int, max_units: int) -> int:
    """The end of the longest prefix of text[start:end] within max_units (all of it when it
    fits), moved back to just after a space in its last fifth when there is one (Chinese has
    none: the cut stays)."""
    budget, position = max_units, start
    while position < end:
        budget -= 3 if CJK.match(text, position) else 1
        if budget < 0:
            break
        position += 1
    if position >= end:
        return end
    position = max(position, start + 1)
    floor = start + (position - start) * 4 // 5
    for back in range(position - 1, floor, -1):
        if _SPACE.match(text, back):
            return back + 1
    return position


def _pack(text: str, pieces: list[_Piece], path: tuple[str, ...], max_units: int, min_units: int,
          overlap_units: int) -> list[Chunk]:
    """Pieces joined into chunks of at most max_units, ending at a paragraph's end once a chunk
    holds min_units; a chunk that cuts a paragraph is followed by one starting with its last
    whole sentences (up to overlap_units)."""
    chunks: list[Chunk] = []
    first, fresh = 0, 0  # the chunk's first piece; the first piece no chunk has held yet
    while fresh < len(pieces):
        index, size = first, 0
        while index < len(pieces):
            piece = pieces[index]
            if index > fresh and (size + piece.units > max_units
                                  or (piece.opens_paragraph and size >= min_units)):
                break
            size += piece.units
            index += 1
        chunks.append(_chunk(text, pieces[first].start, pieces[index - 1].end, path))
        fresh = index
        # When a paragraph was cut, the next chunk opens with whole sentences of this one's end,
        # as long as the sentence after them still fits beside them.
        back, shared = index, 0
        cut_inside_paragraph = index < len(pieces) and not pieces[index].opens_paragraph
        while cut_inside_paragraph and back - 1 > first and shared + pieces[back - 1].units <= overlap_units:
            back -= 1
            shared += pieces[back].units
        while back < index and index < len(pieces) and shared + pieces[index].units > max_units:
            shared -= pieces[back].units
            back += 1
        first = back
    return [chunk for chunk in chunks if chunk.text]


def _chunk(text: str, start: int, end: int, path: tuple[str, ...]) -> Chunk:
    raw = text[start:end]
    stripped_start = len(raw) - len(raw.lstrip())
    stripped_end = len(raw.rstrip())
    return Chunk(raw[stripped_start:stripped_end], start + stripped_start, start + stripped_end, path)
