"""Chunking follows the text's structure and keeps exact offsets."""
import time

import pytest

from plugins.knowledge.chunking import chunk_text, looks_like_markdown, units

MARKDOWN = """# Garden

A short introduction to the garden.

## Tomatoes

""" + " ".join(f"Tomato sentence {i} is about sun and water." for i in range(40)) + """

## Beans

Beans climb poles.

```
# a comment in code, not a heading
print("beans")
```

# 番茄

""" + "".join(f"这是第{i}句，番茄需要阳光和水分。" for i in range(60))


def check_offsets(text, chunks):
    for chunk in chunks:
        assert text[chunk.start:chunk.end] == chunk.text
        assert chunk.text == chunk.text.strip() and chunk.text


def test_headings_make_sections_and_paths():
    chunks = chunk_text(MARKDOWN)
    check_offsets(MARKDOWN, chunks)
    paths = [chunk.heading_path for chunk in chunks]
    assert paths[0] == ("Garden",)
    assert ("Garden", "Tomatoes") in paths and ("Garden", "Beans") in paths and ("番茄",) in paths
    # A heading inside a code fence is code.
    assert not any("a comment in code" in part for path in paths for part in path)
    beans = [chunk for chunk in chunks if chunk.heading_path == ("Garden", "Beans")]
    assert len(beans) == 1 and 'print("beans")' in beans[0].text
    # No chunk spans two sections.
    assert all(chunk.text.count("\n## ") == 0 for chunk in chunks)


def test_sizes_overlap_and_sentence_boundaries():
    chunks = chunk_text(MARKDOWN, max_units=300, min_units=200, overlap_units=60)
    check_offsets(MARKDOWN, chunks)
    tomatoes = [chunk for chunk in chunks if chunk.heading_path == ("Garden", "Tomatoes")]
    assert len(tomatoes) > 3
    for chunk in chunks:
        assert units(chunk.text) <= 300
    for before, after in zip(tomatoes, tomatoes[1:]):
        assert after.start < before.end, "consecutive chunks of a section overlap"
        assert after.text.startswith("Tomato sentence"), "and the overlap is whole sentences"
        assert before.text.endswith("water."), "chunks end at a sentence end"


def test_chinese_without_spaces_is_cut_at_full_stops():
    text = "".join(f"第{i}句话讲的是番茄需要阳光和水分！" for i in range(200))
    chunks = chunk_text(text, markdown=False)
    check_offsets(text, chunks)
    assert len(chunks) > 5
    for chunk in chunks:
        assert units(chunk.text) <= 800
        assert chunk.text.endswith("！")
    # A CJK character counts three: a chunk holds about 800 / 3 of them.
    assert max(len(chunk.text) for chunk in chunks) < 300


def test_one_endless_sentence_is_cut_hard_at_spaces_or_anywhere():
    english = "word " * 2000
    chinese = "番" * 3000
    for text in (english, chinese):
        chunks = chunk_text(text, markdown=False)
        check_offsets(text, chunks)
        assert all(units(chunk.text) <= 800 for chunk in chunks)
        assert sum(len(chunk.text) for chunk in chunks) >= len(text.strip()) - len(chunks)
    assert all(chunk.text.endswith("word") for chunk in chunk_text(english, markdown=False))


def test_paragraphs_end_chunks_once_they_are_big_enough():
    paragraph = "This paragraph has a few sentences in it. " * 14  # about 600 characters
    text = "\n\n".join([paragraph.strip()] * 4)
    chunks = chunk_text(text, markdown=False)
    check_offsets(text, chunks)
    assert len(chunks) == 4
    assert all(chunk.text == paragraph.strip() or chunk.text.endswith("in it.") for chunk in chunks)


def test_plain_text_keeps_hash_lines_and_markdown_is_recognised():
    assert looks_like_markdown("# Title\n\nbody")
    assert not looks_like_markdown("no headings here\n#hashtag")
    chunks = chunk_text("# not a heading in plain text\nbody", markdown=False)
    assert chunks[0].heading_path == ()


def test_empty_and_blank_text_have_no_chunks():
    assert chunk_text("") == []
    assert chunk_text(" \n\n \t\n") == []


def test_a_megabyte_is_chunked_quickly():
    text = ("A sentence of ordinary prose about nothing much. " * 20 + "\n\n") * 1100
    assert len(text) > 1_000_000
    started = time.perf_counter()
    chunks = chunk_text(text)
    assert time.perf_counter() - started < 5
    assert len(chunks) > 1000


def test_refuses_tiny_limits():
    with pytest.raises(ValueError):
        chunk_text("text", max_units=10)


def test_tiny_sections_share_chunks_as_prose_does():
    """200 KB of one-line sections made 28,571 chunks (prose of that size makes about 300)."""
    text = "# h\nx\n\n" * (200_000 // 7)
    chunks = chunk_text(text)
    check_offsets(text, chunks)
    prose = ("A sentence of ordinary prose about nothing much at all. " * 8 + "\n\n") * (200_000 // 450)
    assert len(chunks) < 1.5 * len(chunk_text(prose))
    assert all(chunk.heading_path == ("h",) for chunk in chunks)
    assert all(units(chunk.text) <= 800 for chunk in chunks)


def test_small_sections_in_a_row_share_a_chunk_under_their_common_headings():
    text = ("# Bicycle\n\nPump the tyres.\n\n## Chain\n\nOil it monthly.\n\n## Brakes\n\nCheck the pads.\n\n"
            "# Car\n\nWash it.")
    chunks = chunk_text(text)
    check_offsets(text, chunks)
    assert [chunk.text for chunk in chunks] == [text]
    assert chunks[0].heading_path == ()
    bicycle = text[:text.index("# Car")]
    assert chunk_text(bicycle)[0].heading_path == ("Bicycle",)
    # min_units 0: no chunk spans two sections, however small (nor two paragraphs).
    assert list(dict.fromkeys(chunk.heading_path for chunk in chunk_text(text, min_units=0))) == [
        ("Bicycle",), ("Bicycle", "Chain"), ("Bicycle", "Brakes"), ("Car",)]
    # A section as large as a chunk stays alone; small ones beside it share.
    large = "## Long\n\n" + "A sentence that fills the section. " * 30
    text = "# Top\n\nintro\n\n" + large + "\n\n## A\n\na\n\n## B\n\nb"
    chunks = chunk_text(text)
    check_offsets(text, chunks)
    assert chunks[0].text == "# Top\n\nintro" and chunks[0].heading_path == ("Top",)
    assert len(chunks) > 3 and all(chunk.heading_path == ("Top", "Long") for chunk in chunks[1:-1])
    assert chunks[-1].text == "## A\n\na\n\n## B\n\nb" and chunks[-1].heading_path == ("Top",)


def test_line_ends_and_control_characters_are_read_as_white_space_and_kept():
    text = "# Title\r\n\r\nFirst\x07 line.\r\nSecond line.\r\n\r\n\r\n## Next\rAnother\x0c paragraph.\r\n"
    chunks = chunk_text(text, min_units=0)
    check_offsets(text, chunks)
    assert [(chunk.text, chunk.heading_path) for chunk in chunks] == [
        ("# Title", ("Title",)), ("First\x07 line.\r\nSecond line.", ("Title",)),
        ("## Next\rAnother\x0c paragraph.", ("Title", "Next"))]
