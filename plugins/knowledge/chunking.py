"""Cutting a document's text into passages that an answer can cite.

Each chunk is an exact span of the document's `raw_content` (`text == raw[start:end]`), so a
client can highlight it. The text is kept as sent; cuts are found in a normalised copy of the
same length (`normalised`: line ends and control characters as white space). Cuts follow the
text's structure, coarsest first: Markdown headings (every chunk keeps the path of headings
above it; small sections in a row share a chunk until it holds `min_units`, under the headings
they have in common, so a page of one-line sections is not a chunk per line), then
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

from gateway.text import UNSPACED_SCRIPT_RANGES

DEFAULT_MAX_UNITS = 800
DEFAULT_MIN_UNITS = 500
DEFAULT_OVERLAP_UNITS = 120

# Kana, Han, Hangul, and CJK punctuation and full-width forms.
CJK = re.compile(f"[{UNSPACED_SCRIPT_RANGES}\u3000-\u303f\uff00-\uffef]")
_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
# Where a sentence ends: Western punctuation (with closing quotes or brackets) before white
# space, CJK full stops with or without it, or a line end (a line of a PDF, a list item).
_SENTENCE_END = re.compile(
    r"[.!?…]+[\"'”’)\]]*[ \t]+|[。！？；…]+[”’」』）\]]*[ \t]*|\n")
_SPACE = re.compile(r"\s")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_LONE_CR = re.compile(r"\r(?!\n)")


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


def normalised(text: str) -> str:
    """`text` with the same length, as the chunker reads it: a line end of `\r\n` as ` \n`, a
    lone `\r` as `\n`, control characters as spaces."""
    if "\r" in text:
        text = _LONE_CR.sub("\n", text.replace("\r\n", " \n"))
    return _CONTROL.sub(" ", text)


def chunk_text(text: str, *, markdown: bool = True, max_units: int = DEFAULT_MAX_UNITS,
               min_units: int = DEFAULT_MIN_UNITS, overlap_units: int = DEFAULT_OVERLAP_UNITS) -> list[Chunk]:
    """The chunks of `text`, in order. With `markdown`, ATX headings (`# Title`) outside code
    fences start sections and make the heading path."""
    if max_units < 50:
        raise ValueError("max_units must be at least 50")
    min_units = min(min_units, max_units)
    overlap_units = max(0, min(overlap_units, max_units // 2))
    view = normalised(text)
    chunks: list[Chunk] = []
    for group in _grouped(view, _sections(view, markdown), max_units, min_units):
        if len(group) > 1:
            chunk = _chunk(text, view, group[0][1], group[-1][2], _common_prefix([path for path, _, _ in group]))
            if chunk.text:
                chunks.append(chunk)
            continue
        path, start, end = group[0]
        pieces = _pieces(view, start, end, max_units)
        chunks.extend(_pack(text, view, pieces, path, max_units, min_units, overlap_units))
    return chunks


_Section = tuple[tuple[str, ...], int, int]


def _grouped(view: str, sections: list[_Section], max_units: int, min_units: int) -> list[list[_Section]]:
    """Sections in runs that share a chunk: a section smaller than min_units takes the sections
    after it while the run stays below min_units and all of it fits in one chunk."""
    groups: list[list[_Section]] = []
    size = 0
    for section in sections:
        section_units = units(view[section[1]:section[2]])
        if groups and size < min_units and size + section_units <= max_units:
            groups[-1].append(section)
            size += section_units
        else:
            groups.append([section])
            size = section_units
    return groups


def _common_prefix(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    prefix = paths[0]
    for path in paths[1:]:
        length = 0
        while length < min(len(prefix), len(path)) and prefix[length] == path[length]:
            length += 1
        prefix = prefix[:length]
    return prefix


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


def _pack(text: str, view: str, pieces: list[_Piece], path: tuple[str, ...], max_units: int, min_units: int,
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
        chunks.append(_chunk(text, view, pieces[first].start, pieces[index - 1].end, path))
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


def _chunk(text: str, view: str, start: int, end: int, path: tuple[str, ...]) -> Chunk:
    """The span without the white space at its ends (as the normalised copy has it), cut from
    the text as sent."""
    seen = view[start:end]
    stripped_start = start + len(seen) - len(seen.lstrip())
    stripped_end = start + len(seen.rstrip())
    return Chunk(text[stripped_start:stripped_end], stripped_start, stripped_end, path)
