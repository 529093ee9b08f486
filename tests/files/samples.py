"""Test files made on the spot with Pillow and the standard library: photos with real EXIF
(written with Pillow's Exif API), a decompression bomb, truncated images, documents."""
from __future__ import annotations

import io
import struct
import zipfile
import zlib

from PIL import Image, ImageDraw

MAKE, MODEL = 0x010F, 0x0110
ORIENTATION = 0x0112
DATE_TIME_ORIGINAL = 0x9003
EXPOSURE_TIME, F_NUMBER = 0x829A, 0x829D


def scene(width: int, height: int) -> Image.Image:
    """Sky over grass with a red square: three clear dominant colours."""
    image = Image.new("RGB", (width, height), (135, 195, 235))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, height // 2, width, height), fill=(20, 110, 40))
    draw.rectangle((width // 10, height // 10, width // 4, height // 4), fill=(220, 30, 30))
    return image


def photo_jpeg(width: int = 1200, height: int = 800, orientation: int = 1, make: str = "Canon",
               model: str = "Canon EOS 80D", taken: str = "2023:05:01 14:22:10", quality: int = 90) -> bytes:
    exif = Image.Exif()
    exif[MAKE] = make
    exif[MODEL] = model
    exif[ORIENTATION] = orientation
    details = exif.get_ifd(0x8769)
    details[DATE_TIME_ORIGINAL] = taken
    from PIL.TiffImagePlugin import IFDRational
    details[EXPOSURE_TIME] = IFDRational(1, 250)
    details[F_NUMBER] = IFDRational(28, 10)
    output = io.BytesIO()
    scene(width, height).save(output, "JPEG", quality=quality, exif=exif)
    return output.getvalue()


def encoded(image_format: str, size: tuple[int, int] = (64, 48), **options) -> bytes:
    output = io.BytesIO()
    image = scene(*size)
    if image_format == "GIF":
        image = image.convert("P")
    image.save(output, image_format, **options)
    return output.getvalue()


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def bomb_png(side: int = 20_000) -> bytes:
    """A valid 1-bit PNG of side x side pixels (400 megapixels for the default) that is only a
    few tens of kilobytes: what a decompression bomb looks like."""
    row = b"\x00" + b"\x00" * ((side + 7) // 8)
    compressor = zlib.compressobj(9)
    parts = [compressor.compress(row) for _ in range(side)]
    parts.append(compressor.flush())
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", b"".join(parts))
            + png_chunk(b"IEND", b""))


def docx() -> bytes:
    output = io.BytesIO()
    with zipfile.ZipFile(output, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("_rels/.rels", "<Relationships/>")
        archive.writestr("word/document.xml", "<w:document/>")
    return output.getvalue()


ELF = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 120
WINDOWS_EXE = b"MZ\x90\x00\x03\x00\x00\x00" + b"\x00" * 120
PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
SVG_WITH_SCRIPT = (b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
                   b'<script>alert(document.cookie)</script></svg>')
MP3 = b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x64" + b"\x00" * 200
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 100
OGG = b"OggS\x00\x02" + b"\x00" * 100
MP4 = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + b"\x00" * 64
WEBM_VIDEO = (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\x82\x84webm" + b"\x00" * 20
              + b"\x86\x85V_VP8" + b"\x00" * 40)
WEBM_AUDIO = b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\x82\x84webm" + b"\x00" * 20 + b"\x86\x86A_OPUS"
