"""A document's text from its bytes, by type, through maintained libraries: pypdf for PDF,
python-docx for Word (.docx), trafilatura (a readability-style main-content extractor) for web
pages. Headings come out as Markdown (`# Title`), so the chunker keeps their path.

Blocking and CPU-bound: the plugin calls `extract` in an executor."""
from __future__ import annotations

import codecs
import io
import logging
import re
from dataclasses import dataclass

from .chunking import looks_like_markdown

log = logging.getLogger("plugins.knowledge")

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


def extract(data: bytes, content_type: str, *, charset: str | None = None) -> Extracted:
    """The text of `data` of MIME type `content_type`; raises UnsupportedDocumentType or
    UnreadableDocument."""
    kind = base_type(content_type)
    if kind == PDF:
        return _pdf(data)
    if kind == DOCX:
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


def _pdf(data: bytes) -> Extracted:
    import pypdf

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableDocument("the PDF is encrypted with a password")
        pages = [page.extract_text() or "" for page in reader.pages]
        metadata = reader.metadata
        title = str(metadata.get("/Title") or "").strip() if metadata is not None else ""
    except UnreadableDocument:
        raise
    except Exception as error:  # a malformed file raises pypdf's errors and plain ones (KeyError...) alike
        raise UnreadableDocument(f"the PDF cannot be read: {error}") from None
    # One paragraph break between pages, so that no chunk runs across a page end unnoticed.
    return Extracted(clean("\n\n".join(page.strip() for page in pages)), PDF, False, title)


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
    except Exception as error:  # lxml's parser errors on hostile markup
        raise UnreadableDocument(f"the page cannot be read: {error}") from None
    title = (metadata.title or "").strip() if metadata is not None else ""
    return Extracted(clean(text), "text/html", True, title)
