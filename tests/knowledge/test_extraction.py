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
    # (min_units 0: every section a chunk of its own, however small)
    paths = [chunk.heading_path for chunk in chunk_text(extracted.text, min_units=0)]
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


def test_a_word_file_that_inflates_too_far_is_refused_before_it_is_parsed():
    """The issue's DOCX: word/document.xml inflates a thousandfold, past what one part may."""
    bomb = samples.docx_bomb(64 * 1024 * 1024)
    assert len(bomb) < 300_000
    with pytest.raises(extraction.DocumentTooComplex, match="word/document.xml"):
        extraction.extract(bomb, extraction.DOCX)
    # Within the size of a part but beyond the ratio allowed.
    with pytest.raises(extraction.DocumentTooComplex, match="times its packed size"):
        extraction.extract(samples.docx_bomb(8 * 1024 * 1024), extraction.DOCX)
    # The parts' total.
    with pytest.raises(extraction.DocumentTooComplex, match="together"):
        extraction.extract(samples.docx_bytes(), extraction.DOCX, limits=extraction.Limits(max_unpacked_bytes=4096))


def test_an_archive_that_declares_less_than_it_inflates_is_read_no_further():
    """The directory may lie: what inflating gives is bounded by what was declared and checked."""
    liar = samples.docx_bomb(64 * 1024 * 1024, declared_bytes=1024 * 1024)
    with pytest.raises(extraction.UnreadableDocument, match="CRC"):
        extraction.extract(liar, extraction.DOCX)


def test_a_content_stream_shared_by_pages_is_parsed_once():
    """The issue's PDF (15 pages drawing one content stream, 2 MB there, 500 KB here). Counted
    once it is within the content a PDF may hold (1 MiB here), and every page has its sentence;
    fifteen copies of it are not."""
    limits = extraction.Limits(max_pdf_content_bytes=1024 * 1024)
    shared = samples.shared_stream_pdf(pages=15, filler_bytes=500_000)
    assert len(shared) < 10_000
    text = extraction.extract(shared, extraction.PDF, limits=limits).text
    assert text.count("Only this sentence is text on every page.") == 15
    copies = samples.shared_stream_pdf(pages=15, filler_bytes=500_000, shared=False)
    with pytest.raises(extraction.DocumentTooComplex, match="bytes of content"):
        extraction.extract(copies, extraction.PDF, limits=limits)


def test_a_page_whose_contents_is_no_stream_has_no_text_and_the_others_are_read():
    pdf = samples.shared_stream_pdf(pages=2, filler_bytes=100, shared=False)
    pdf = pdf.replace(b"/Contents 4 0 R", b"/Contents 3 0 R", 1)  # the font's dictionary
    assert extraction.extract(pdf, extraction.PDF).text == "Only this sentence is text on every page."
