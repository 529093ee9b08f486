"""Content sniffing and file-name sanitising, on their own."""
import pytest

from plugins.files.naming import MAX_NAME_BYTES, client_filename, content_disposition, sanitize_filename
from plugins.files.sniffing import DOCX, UnsupportedType, sniff
from tests.files import samples


@pytest.mark.parametrize("content, declared, name, expected", [
    (samples.encoded("PNG"), "application/pdf", "report.pdf", "image/png"),
    (samples.encoded("JPEG"), "text/plain", "x.txt", "image/jpeg"),
    (samples.encoded("GIF"), "", "", "image/gif"),
    (samples.encoded("WEBP"), "image/png", "a.png", "image/webp"),
    (samples.SVG_WITH_SCRIPT, "text/plain", "a.txt", "image/svg+xml"),
    (b"<!-- a comment -->\n<svg xmlns='http://www.w3.org/2000/svg'/>", "", "", "image/svg+xml"),
    (samples.PDF, "image/png", "a.png", "application/pdf"),
    (samples.docx(), "application/zip", "a.zip", DOCX),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 64 + "WordDocument".encode("utf-16-le"), "", "",
     "application/msword"),
    ("Plain text, ünïcödé 漢字\n".encode(), "image/png", "a.png", "text/plain"),
    (b"# Title\n\nSome *markdown*.\n", "text/plain", "notes.md", "text/markdown"),
    (b"# Title\n", "text/markdown", "notes", "text/markdown"),
    (samples.MP3, "", "", "audio/mpeg"),
    (b"\xff\xfb\x90\x64" + b"\x00" * 64, "", "", "audio/mpeg"),
    (samples.WAV, "", "", "audio/wav"),
    (samples.OGG, "", "", "audio/ogg"),
    (samples.MP4, "", "", "video/mp4"),
    (samples.WEBM_VIDEO, "", "", "video/webm"),
    (samples.WEBM_AUDIO, "", "", "audio/webm"),
    (samples.WEBM_VIDEO, "audio/webm", "voice.weba", "audio/webm"),
])
def test_types_come_from_the_content(content, declared, name, expected):
    assert sniff(content, declared, name) == expected


@pytest.mark.parametrize("content", [
    samples.ELF, samples.WINDOWS_EXE, b"\xcf\xfa\xed\xfe" + b"\x00" * 64,
    b"", b"\x00\x01\x02\x03binary" * 20, b"PK\x03\x04" + b"\x00" * 60,
    b"<!DOCTYPE html><html><script>alert(1)</script></html>",
    b"\x00\x00\x00\x18ftypM4A \x00\x00\x00\x00" + b"\x00" * 40,
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 200,
])
def test_other_content_is_refused_whatever_it_claims(content):
    with pytest.raises(UnsupportedType):
        sniff(content, "image/png", "innocent.png")


def test_text_cut_inside_a_character_at_the_window_edge_is_still_text():
    text = ("é" * 100).encode()
    assert sniff(text[:-1], "", "") == "text/plain"


@pytest.mark.parametrize("raw, expected", [
    ("../../etc/passwd", "passwd"),
    ("..\\..\\windows\\system32\\cmd.exe", "cmd.exe"),
    ("/absolute/path/photo.jpg", "photo.jpg"),
    ("C:\\Users\\me\\Desktop\\report.pdf", "report.pdf"),
    ("name\x00.png.exe", "name.png.exe"),
    ("line\nbreak\r.txt", "linebreak.txt"),
    ("evil\u202egpj.exe", "evilgpj.exe"),
    ("zero\u200bwidth.txt", "zerowidth.txt"),
    ('a<b>c:d"e|f?g*h.txt', "abcdefgh.txt"),
    ("CON", "_CON"),
    ("con.txt", "_con.txt"),
    ("LPT1.log", "_LPT1.log"),
    ("nul", "_nul"),
    ("...", "file"),
    ("   ", "file"),
    ("", "file"),
    (None, "file"),
    (". hidden .", "hidden"),
    ("tabs\tand  spaces.txt", "tabsand spaces.txt"),
    ("Фото отпуска 2023.jpg", "Фото отпуска 2023.jpg"),
    ("写真.png", "写真.png"),
    ("Cafe\u0301.txt", "Café.txt"),
    ("emoji 🎉.md", "emoji 🎉.md"),
])
def test_filename_attacks(raw, expected):
    assert sanitize_filename(raw) == expected


def test_long_names_are_cut_to_255_bytes_keeping_the_extension():
    name = sanitize_filename("ж" * 300 + ".pdf")
    assert name.endswith(".pdf")
    assert len(name.encode()) <= MAX_NAME_BYTES
    assert set(name[:-4]) == {"ж"}


def test_content_disposition_carries_an_ascii_fallback_and_the_exact_name():
    header = content_disposition('Фото "1".jpg')
    assert header.startswith("attachment; filename=\"")
    assert "filename*=UTF-8''%D0%A4%D0%BE%D1%82%D0%BE%20%221%22.jpg" in header
    fallback = header.split('filename="')[1].split('"')[0]
    assert fallback.isascii() and fallback.endswith(".jpg")


@pytest.mark.parametrize("raw, expected", [
    ("..%2F..%2Fetc%2Fpasswd", "passwd"),
    ("holiday%20photo.jpg", "holiday photo.jpg"),
    ("%D0%A4%D0%BE%D1%82%D0%BE.jpg", "Фото.jpg"),
    ("100%.txt", "100%.txt"),
    ("bad%FFbyte.txt", "bad%FFbyte.txt"),
])
def test_percent_encoded_part_names_are_decoded_before_sanitising(raw, expected):
    assert sanitize_filename(client_filename(raw)) == expected
