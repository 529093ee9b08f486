"""A document's text from its bytes, by type, through maintained libraries: pypdf for PDF,
python-docx for Word (.docx), trafilatura (a readability-style main-content extractor) for web
pages. Headings come out as Markdown (`# Title`), so the chunker keeps their path.

A small file can ask for a lot of work: a Word file is a ZIP archive whose parts may inflate a
thousandfold, and a PDF may draw one huge content stream on every page. `extract` bounds what it
reads itself (`Limits`: every archive part's unpacked size, declared and actually inflated, their
total and their compression ratio; the PDF content it parses, a stream shared by pages parsed
once) and raises DocumentTooComplex beyond; the plugin also runs PDF, Word and HTML extraction in
a child process with CPU-time and memory limits (isolation.py), for whatever these bounds miss.

Blocking and CPU-bound: the plugin calls `extract` in an executor."""
from __future__ import annotations

import codecs
import io
import re
import zipfile
from dataclasses import dataclass
from typing import Any

from .chunking import looks_like_markdown

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PDF = "application/pdf"
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown"})
TEXT_TYPES = frozenset({"application/json", "application/xml", "application/x-ndjson"})
# What `extract` reads, for messages and the documentation.
SUPPORTED = "plain text and other text/* types, JSON, Markdown, HTML, PDF and Word (.docx)"

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BLANK_LINES = re.compile(r"\n{3,}")
_DOCX_HEADING = re.compile(r"^Heading (\d)$")


class UnsupportedDocumentType(Exception):
    """The content's type is not one `extract` reads."""


class UnreadableDocument(Exception):
    """The content claims a supported type but cannot be read (corrupt, encrypted...)."""


class DocumentTooComplex(Exception):
    """Reading the content would take more than the limits allow (an archive that inflates too
    far, too much PDF content, or the child process's CPU time or memory)."""


@dataclass(frozen=True)
class Limits:
    """What one extraction may read (settings `extract_*`, docs/knowledge.md)."""
    max_part_bytes: int = 32 * 1024 * 1024       # one archive part, unpacked
    max_unpacked_bytes: int = 64 * 1024 * 1024   # every part together, unpacked
    max_ratio: int = 200                         # unpacked / packed, for parts above RATIO_FLOOR
    max_pdf_content_bytes: int = 16 * 1024 * 1024  # decoded page content streams, each one once


# Small parts may compress far (an empty XML part of a few hundred bytes to a dozen); only a
# part of at least this size is held to `max_ratio`.
RATIO_FLOOR = 1024 * 1024
MAX_ARCHIVE_PARTS = 10_000


@dataclass(frozen=True)
class Extracted:
    text: str
    content_type: str      # the source's type, as stored on the document
    markdown: bool         # whether headings in `text` are Markdown headings
    title: str = ""        # the document's own title (PDF or Word properties, a page's title)


def base_type(content_type: str) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def supported(content_type: str) -> bool:
    kind = base_type(content_type)
    return (kind.startswith("text/") or kind in TEXT_TYPES or kind in (PDF, DOCX)
            or kind in HTML_TYPES)


def needs_isolation(content_type: str) -> bool:
    """Whether reading the type runs a parser that a small input can keep busy (isolation.py)."""
    kind = base_type(content_type)
    return kind in (PDF, DOCX) or kind in HTML_TYPES


def extract(data: bytes, content_type: str, *, charset: str | None = None,
            limits: Limits = Limits()) -> Extracted:
    """The text of `data` of MIME type `content_type`; raises UnsupportedDocumentType,
    UnreadableDocument or DocumentTooComplex."""
    kind = base_type(content_type)
    if kind == PDF:
        return _pdf(data, limits)
    if kind == DOCX:
        check_archive(data, limits)
        return _docx(data)
    if kind in HTML_TYPES:
        return _html(data, charset)
    if kind.startswith("text/") or kind in TEXT_TYPES:
        text = clean(decode(data, charset))
        markdown = kind in MARKDOWN_TYPES or (kind == "text/plain" and looks_like_markdown(text))
        return Extracted(text, kind, markdown)
    raise UnsupportedDocumentType(f"{kind or 'content without a type'} is not a document type that can be read")


def decode(data: bytes, charset: str | None = None) -> str:
    """Text bytes: by their byte-order mark, else the declared charset, else UTF-8; bytes that
    do not decode become U+FFFD."""
    for bom, encoding in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                          (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            return data[len(bom):].decode(encoding, errors="replace")
    if charset:
        try:
            return data.decode(charset, errors="replace")
        except LookupError:
            pass
    return data.decode("utf-8", errors="replace")


def clean(text: str) -> str:
    """Line ends as `\\n`, no control characters (PostgreSQL text holds no NUL), at most one blank
    line in a row, no white space around the whole."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    return _BLANK_LINES.sub("\n\n", text).strip()


def check_archive(data: bytes, limits: Limits) -> None:
    """Refuse a ZIP archive (a Word file) whose parts unpack beyond the limits, before any library
    unpacks it: first by the sizes its directory declares, then by what inflating every part
    really gives, since a directory can lie."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        parts = archive.infolist()
    except Exception as error:  # zipfile raises BadZipFile, and ValueError or OSError on some damage
        raise UnreadableDocument(f"the archive cannot be read: {error}") from None
    if len(parts) > MAX_ARCHIVE_PARTS:
        raise DocumentTooComplex(f"the archive holds {len(parts)} parts, more than {MAX_ARCHIVE_PARTS}")
    declared = 0
    for part in parts:
        _check_part_size(part.filename, part.file_size, limits)
        if part.file_size >= RATIO_FLOOR and part.file_size > limits.max_ratio * max(part.compress_size, 1):
            raise DocumentTooComplex(f"its part {part.filename} unpacks {part.file_size // max(part.compress_size, 1)} "
                                     f"times its packed size, more than {limits.max_ratio}")
        declared += part.file_size
    _check_total(declared, limits)
    unpacked = 0
    try:
        for part in parts:
            part_bytes = 0
            with archive.open(part) as member:
                while block := member.read(1024 * 1024):
                    part_bytes += len(block)
                    unpacked += len(block)
                    _check_part_size(part.filename, part_bytes, limits)
                    _check_total(unpacked, limits)
    except DocumentTooComplex:
        raise
    except Exception as error:  # a checksum that does not match, a damaged stream, an encrypted part
        raise UnreadableDocument(f"the archive cannot be read: {error}") from None


def _check_part_size(name: str, size: int, limits: Limits) -> None:
    if size > limits.max_part_bytes:
        raise DocumentTooComplex(f"its part {name} unpacks to more than {limits.max_part_bytes} bytes")


def _check_total(size: int, limits: Limits) -> None:
    if size > limits.max_unpacked_bytes:
        raise DocumentTooComplex(f"its parts unpack to more than {limits.max_unpacked_bytes} bytes together")


def _pdf(data: bytes, limits: Limits) -> Extracted:
    import pypdf

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableDocument("the PDF is encrypted with a password")
        pages = _pdf_pages_text(reader, limits)
        metadata = reader.metadata
        title = str(metadata.get("/Title") or "").strip() if metadata is not None else ""
    except (UnreadableDocument, DocumentTooComplex, MemoryError):
        raise
    except Exception as error:  # a malformed file raises pypdf's errors and plain ones (KeyError...) alike
        raise UnreadableDocument(f"the PDF cannot be read: {error}") from None
    # One paragraph break between pages, so that no chunk runs across a page end unnoticed.
    return Extracted(clean("\n\n".join(page.strip() for page in pages)), PDF, False, title)


def _pdf_pages_text(reader: Any, limits: Limits) -> list[str]:
    """Each page's text. Pages that draw the same content stream share one parse of it (pypdf
    parses a page's stream anew for every page), and pages with the same stream and resources
    share their text. The decoded content to parse, each stream counted once, is bounded before
    any is parsed."""
    from pypdf.generic import ContentStream, NameObject

    streams: dict[Any, Any] = {}
    content_bytes = 0
    pages = []  # (page, its content stream's key, its text's key), keys taken before any page changes
    for page in reader.pages:
        contents = page.get("/Contents")
        key = None if contents is None else _pdf_object_key(contents)
        if key is not None and key not in streams:
            try:
                stream = ContentStream(contents.get_object(), reader, "bytes")
            except (AttributeError, KeyError, TypeError):  # not a stream: a page without text, as pypdf reads it
                key = None
            else:
                streams[key] = stream
                content_bytes += len(stream.get_data())
                if content_bytes > limits.max_pdf_content_bytes:
                    raise DocumentTooComplex(f"its pages hold more than {limits.max_pdf_content_bytes} bytes "
                                             "of content")
        pages.append((page, key, (key, _pdf_object_key(page.get("/Resources")))))
    texts: dict[Any, str] = {}
    result = []
    for page, contents_key, text_key in pages:
        if contents_key is None:
            result.append("")
        else:
            if text_key not in texts:
                # pypdf takes a content stream it is given as it is, parsed once, instead of parsing
                # the page's stream again.
                page[NameObject("/Contents")] = streams[contents_key]
                texts[text_key] = page.extract_text() or ""
            result.append(texts[text_key])
    return result


def _pdf_object_key(value: Any) -> Any:
    """What identifies a page's /Contents or /Resources across pages: the indirect objects it
    names, else the very object (one the pages share, or the page's own)."""
    from pypdf.generic import ArrayObject, IndirectObject

    if isinstance(value, IndirectObject):
        return (value.idnum, value.generation)
    if isinstance(value, ArrayObject) and value and all(isinstance(item, IndirectObject) for item in value):
        return tuple((item.idnum, item.generation) for item in value)
    return ("object", id(value))


def _docx(data: bytes) -> Extracted:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
        blocks = []
        for block in document.iter_inner_content():
            if isinstance(block, Paragraph):
                text = block.text.strip()
                if not text:
                    continue
                style = block.style.name if block.style is not None else ""
                heading = _DOCX_HEADING.match(style or "")
                if heading:
                    text = "#" * min(6, max(1, int(heading.group(1)))) + " " + text
                elif style == "Title":
                    text = "# " + text
                blocks.append(text)
            elif isinstance(block, Table):
                rows = [" | ".join(cell.text.strip() for cell in row.cells) for row in block.rows]
                blocks.append("\n".join(row for row in rows if row.strip(" |")))
        title = (document.core_properties.title or "").strip()
    except MemoryError:
        raise
    except Exception as error:  # a broken ZIP or XML raises zipfile's, lxml's or python-docx's own errors
        raise UnreadableDocument(f"the Word document cannot be read: {error}") from None
    return Extracted(clean("\n\n".join(blocks)), DOCX, True, title)


def _html(data: bytes, charset: str | None) -> Extracted:
    import trafilatura

    page = decode(data, charset) if charset else data
    try:
        # Markdown keeps the page's headings; favor_recall keeps short pages whole.
        text = trafilatura.extract(page, output_format="markdown", include_comments=False, include_tables=True,
                                   favor_recall=True, with_metadata=False) or ""
        metadata = trafilatura.extract_metadata(page)
    except MemoryError:
        raise
    except Exception as error:  # lxml's parser errors on hostile markup
        raise UnreadableDocument(f"the page cannot be read: {error}") from None
    title = (metadata.title or "").strip() if metadata is not None else ""
    return Extracted(clean(text), "text/html", True, title)
