"""Text from real PDF, Word, HTML and text documents."""
import pytest

from plugins.knowledge import extraction
from plugins.knowledge.chunking import chunk_text

from . import samples


def test_pdf_pages_in_english_and_chinese():
    extracted = extraction.extract(samples.pdf_bytes(), "application/pdf")
    assert samples.PDF_ENGLISH in extracted.text
    assert samples.PDF_CHINESE in extracted.text
    assert extracted.title == "Kestrel mission brief"
    assert extracted.content_type == "application/pdf" and not extracted.markdown
    # Pages are paragraphs of their own.
    assert "\n\n" + samples.PDF_CHINESE in extracted.text


def test_docx_headings_become_markdown_and_tables_rows():
    extracted = extraction.extract(samples.docx_bytes(), extraction.DOCX)
    assert extracted.markdown and extracted.title == "House rules"
    assert "# Kitchen\n\nWash the dishes straight after dinner." in extracted.text
    assert "## Weekend\n\n周末要打扫厨房和阳台。" in extracted.text
    assert "Monday | Bins out" in extracted.text
    paths = [chunk.heading_path for chunk in chunk_text(extracted.text)]
    assert ("Kitchen", "Weekend") in paths


def test_html_main_text_without_navigation_or_footer():
    extracted = extraction.extract(samples.ARTICLE_HTML.encode(), "text/html; charset=utf-8")
    assert "two hundred and twelve steps" in extracted.text
    assert "## Supplies" in extracted.text
    for boilerplate in ("Log in", "cookies", "All rights reserved"):
        assert boilerplate not in extracted.text
    assert "Lighthouse keeping" in extracted.title


def test_text_types_decode_and_clean():
    extracted = extraction.extract("\ufeffline one\r\nline\x00 two\n\n\n\nend".encode("utf-8"), "text/plain")
    assert extracted.text == "line one\nline two\n\nend"
    assert not extracted.markdown
    assert extraction.extract(b"# Title\n\nbody", "text/plain").markdown
    assert extraction.extract(b"plain", "text/markdown").markdown
    assert extraction.extract('{"a": 1}'.encode(), "application/json").text == '{"a": 1}'
    assert extraction.extract("caf\xe9".encode("latin-1"), "text/plain", charset="latin-1").text == "café"
    assert extraction.extract("日本".encode("utf-16"), "text/plain").text == "日本"


@pytest.mark.parametrize("content_type", ["image/png", "application/msword", "audio/mpeg", ""])
def test_other_types_are_unsupported(content_type):
    assert not extraction.supported(content_type)
    with pytest.raises(extraction.UnsupportedDocumentType):
        extraction.extract(samples.PNG, content_type)


@pytest.mark.parametrize("content_type", ["application/pdf", extraction.DOCX])
def test_corrupt_documents_are_unreadable(content_type):
    with pytest.raises(extraction.UnreadableDocument):
        extraction.extract(b"%PDF-1.4 this is not really a PDF" if "pdf" in content_type else b"PK\x03\x04 nope",
                           content_type)
