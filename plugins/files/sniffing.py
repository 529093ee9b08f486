"""The type of an upload, decided from its first bytes (magic numbers), never from the client's
header alone: a PNG named `.pdf` is a PNG, and an executable named `.png` is refused.

The client's declared type and file name are consulted only to choose between types that share
one container and cannot be told apart from the first bytes (WebM audio or video, plain text or
Markdown)."""
from __future__ import annotations

import codecs
import re

# How many leading bytes the upload keeps in memory for sniffing and the image header check.
SNIFF_BYTES = 512 * 1024

ALLOWED_TYPES = frozenset({
    "image/jpeg", "image/png", "image/gif", "image/webp", "image/svg+xml",
    "application/pdf", "application/msword",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "text/plain", "text/markdown",
    "audio/mpeg", "audio/wav", "audio/ogg", "audio/webm",
    "video/mp4", "video/webm",
})

RASTER_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

_EXECUTABLES = (
    (b"MZ", "a Windows executable"),
    (b"\x7fELF", "an ELF executable"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xce\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xca\xfe\xba\xbe", "a Mach-O universal binary or Java class"),
    (b"\x00asm", "a WebAssembly module"),
)

_MP4_BRANDS = {b"isom", b"iso2", b"iso3", b"iso4", b"iso5", b"iso6", b"mp41", b"mp42", b"avc1",
               b"M4V ", b"M4VH", b"M4VP", b"dash", b"mmp4", b"MSNV", b"qt  "}

_SVG_PROLOGUE = re.compile(
    rb"^(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*)*"
    rb"(?:<!DOCTYPE[^>]*>\s*)?(?:<!--.*?-->\s*)*<svg[\s>]",
    re.IGNORECASE | re.DOTALL)
_HTML_START = re.compile(rb"^(?:\xef\xbb\xbf)?\s*<(?:!doctype\s+html|html|head|body|script)[\s>]",
                         re.IGNORECASE)
_MARKDOWN_NAMES = (".md", ".markdown", ".mdown", ".mkd")


class UnsupportedType(Exception):
    """The content is not one of the allowed types; the message says what it looked like."""


def sniff(head: bytes, declared_type: str = "", filename: str = "") -> str:
    """The MIME type of content starting with `head`, one of ALLOWED_TYPES, or UnsupportedType."""
    declared_type = (declared_type or "").split(";")[0].strip().lower()
    lowered_name = (filename or "").lower()
    if not head:
        raise UnsupportedType("the file is empty")
    for magic, what in _EXECUTABLES:
        if head.startswith(magic):
            raise UnsupportedType(f"the content is {what}")
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        # OLE2 compound file; of its kinds only the Word document is allowed.
        if "W\x00o\x00r\x00d\x00D\x00o\x00c\x00u\x00m\x00e\x00n\x00t".encode("latin-1") in head:
            return "application/msword"
        raise UnsupportedType("the content is an OLE2 compound file that is not a Word document")
    if head.startswith(b"PK\x03\x04"):
        # A Word document is a ZIP whose small entries ([Content_Types].xml, word/...) come first.
        if b"word/" in head and b"[Content_Types].xml" in head:
            return DOCX
        raise UnsupportedType("the content is a ZIP archive that is not a Word document")
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        if b"webm" not in head[:64]:
            raise UnsupportedType("the content is a Matroska file that is not WebM")
        wants_audio = declared_type.startswith("audio/") or lowered_name.endswith((".weba", ".opus"))
        has_video_track = b"\x86\x85V_VP" in head or b"\x86\x85V_AV1" in head
        return "audio/webm" if wants_audio or not has_video_track else "video/webm"
    if len(head) >= 12 and head[4:8] == b"ftyp":
        if head[8:12] in _MP4_BRANDS:
            return "video/mp4"
        raise UnsupportedType(f"the content is an ISO media file of brand {head[8:12]!r}, not MP4 video")
    if head.startswith(b"ID3") or _is_mpeg_audio_frame(head):
        return "audio/mpeg"
    if _SVG_PROLOGUE.match(head[:4096]):
        return "image/svg+xml"
    if _is_text(head):
        if _HTML_START.match(head[:1024]):
            raise UnsupportedType("the content is HTML")
        if declared_type == "text/markdown" or lowered_name.endswith(_MARKDOWN_NAMES):
            return "text/markdown"
        return "text/plain"
    raise UnsupportedType("the content is not one of the allowed types")


def _is_mpeg_audio_frame(head: bytes) -> bool:
    """An MPEG audio frame header: 11 sync bits, a defined version, layer, bitrate and rate."""
    if len(head) < 4 or head[0] != 0xFF or head[1] & 0xE0 != 0xE0:
        return False
    version = (head[1] >> 3) & 0x3
    layer = (head[1] >> 1) & 0x3
    bitrate = head[2] >> 4
    sample_rate = (head[2] >> 2) & 0x3
    return version != 1 and layer != 0 and bitrate not in (0, 15) and sample_rate != 3


def _is_text(head: bytes) -> bool:
    """UTF-8 (or UTF-16 with a byte-order mark) without NUL bytes and few control characters."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            text = head[:len(head) - len(head) % 2].decode("utf-16")
        except UnicodeDecodeError:
            return False
    else:
        if b"\x00" in head:
            return False
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            # final=False: a character cut at the end of the sniffed window is not an error.
            text = decoder.decode(head, final=False)
        except UnicodeDecodeError:
            return False
    controls = sum(1 for character in text if ord(character) < 32 and character not in "\t\n\r\f\x1b")
    return controls <= max(1, len(text) // 1000)
