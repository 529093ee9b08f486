"""Image work with Pillow: header checks at upload, thumbnails, and the measurements of an
image analysis. Every function here blocks (decoding, resizing) and is run in an executor.

Hostile images are refused before they are decoded: Pillow's decompression-bomb limit
(`Image.MAX_IMAGE_PIXELS`) is checked on the header's dimensions, so a small file that would
decode to gigabytes is a clean error, not a hang or an out-of-memory."""
from __future__ import annotations

import io
import struct
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, Mapping, cast

if TYPE_CHECKING:  # Pillow is imported by the first image's work: an idle service is smaller without it
    from PIL import Image

THUMBNAIL_SIDE = 300
VISION_PREVIEW_SIDE = 1024
ORIENTATION_TAG = 0x0112
# EXIF orientation: the `Image.Transpose` that puts it upright.
_TRANSPOSE = {2: "FLIP_LEFT_RIGHT", 3: "ROTATE_180", 4: "FLIP_TOP_BOTTOM", 5: "TRANSPOSE", 6: "ROTATE_270",
              7: "TRANSVERSE", 8: "ROTATE_90"}
# What a corrupt or truncated file makes Pillow raise while opening or decoding.
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, struct.error, IndexError, KeyError)


class ImageRejected(Exception):
    """An image that cannot be used; `reason` is `too_many_pixels` or `invalid_image`."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def max_pixels() -> int:
    from PIL import Image

    return int(Image.MAX_IMAGE_PIXELS or 89_478_485)


def open_image(source: IO[bytes]) -> Image.Image:
    """Open (header only) and refuse bombs before any pixel is decoded."""
    from PIL import Image

    try:
        image = Image.open(source)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise ImageRejected("too_many_pixels", f"The image is too large to decode safely: {error}") from None
    except _DECODE_ERRORS as error:
        raise ImageRejected("invalid_image", f"The image cannot be read: {error}") from None
    width, height = image.size
    if width <= 0 or height <= 0:
        raise ImageRejected("invalid_image", "The image has no pixels.")
    if width * height > max_pixels():
        raise ImageRejected("too_many_pixels",
                            f"The image is {width}x{height} pixels, more than the {max_pixels()} "
                            f"pixels allowed (a possible decompression bomb).")
    return image


def probe_header(head: bytes, complete: bool) -> tuple[int, int] | None:
    """(width, height) from the first bytes of an upload. ImageRejected for a bomb, or for a
    file that ends without a readable header; None when the header lies beyond `head`."""
    try:
        with open_image(io.BytesIO(head)) as image:
            return image.size
    except ImageRejected as error:
        if error.reason == "invalid_image" and not complete:
            return None
        raise


def _oriented_size(size: tuple[int, int], orientation: int) -> tuple[int, int]:
    return (size[1], size[0]) if orientation in (5, 6, 7, 8) else size


def _orientation(image: Image.Image) -> int:
    try:
        value = image.getexif().get(ORIENTATION_TAG, 1)
    except _DECODE_ERRORS:
        return 1
    return value if isinstance(value, int) and value in range(1, 9) else 1


def _flatten(image: Image.Image) -> Image.Image:
    """RGB on white: JPEG has no alpha, and a transparent logo should not turn black."""
    from PIL import Image

    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGB", rgba.size, (255, 255, 255))
        background.paste(rgba, mask=rgba.getchannel("A"))
        return background
    return image.convert("RGB") if image.mode != "RGB" else image


def make_thumbnail(source: IO[bytes], side: int = THUMBNAIL_SIDE) -> bytes:
    """A JPEG of at most side x side, upright per EXIF. For a JPEG, `thumbnail` asks the
    decoder for a reduced scale (draft) first, so a 12-megapixel photo is never decoded whole."""
    from PIL import Image

    with open_image(source) as image:
        orientation = _orientation(image)
        try:
            image.thumbnail((side, side), Image.Resampling.LANCZOS, reducing_gap=2.0)
            result = _flatten(image)
        except _DECODE_ERRORS as error:
            raise ImageRejected("invalid_image", f"The image cannot be decoded: {error}") from None
        if orientation in _TRANSPOSE:
            result = result.transpose(Image.Transpose[_TRANSPOSE[orientation]])
        output = io.BytesIO()
        result.save(output, "JPEG", quality=85, optimize=True)
        return output.getvalue()


# ------------------------------------------------------------------ analysis

_COLOUR_NAMES = {
    "black": (0, 0, 0), "dark grey": (64, 64, 64), "grey": (128, 128, 128),
    "light grey": (192, 192, 192), "white": (255, 255, 255), "red": (220, 30, 30),
    "dark red": (128, 0, 0), "orange": (255, 140, 0), "brown": (120, 72, 30),
    "beige": (225, 205, 165), "yellow": (250, 220, 40), "olive": (128, 128, 0),
    "green": (40, 170, 60), "dark green": (0, 90, 30), "teal": (0, 128, 128),
    "cyan": (0, 200, 220), "sky blue": (135, 195, 235), "blue": (30, 80, 220),
    "navy": (0, 0, 110), "purple": (120, 40, 150), "pink": (240, 150, 190),
}
_SKIPPED_EXIF = {0x8769, 0x8825, 0xA005, 0x927C, 0x9286, 0x02BC, 0x83BB, 0x8773, 0x9C9B, 0x9C9C,
                 0x9C9D, 0x9C9E, 0x9C9F, 0xC4A5, 0x0201, 0x0202}


def colour_name(hex_colour: str) -> str:
    red, green, blue = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return min(_COLOUR_NAMES, key=lambda name: sum((a - b) ** 2 for a, b in
                                                    zip(_COLOUR_NAMES[name], (red, green, blue))))


def top_colours(image: Image.Image, count: int = 6) -> list[dict]:
    """The dominant colours of a small copy, as hex and percent of the pixels (sum about 100)."""
    from PIL import Image

    small = _flatten(image.copy())
    small.thumbnail((96, 96), Image.Resampling.BILINEAR)
    quantized = small.quantize(colors=count, method=Image.Quantize.MEDIANCUT)
    palette = quantized.getpalette() or []
    # Largest first; a colour within a few steps of a larger one (compression noise) joins it.
    # A "P" image's colours are (pixel count, palette index) pairs.
    colours = cast("list[tuple[int, int]]", quantized.getcolors(count * 4) or [])
    found = sorted(((pixels, tuple(palette[index * 3:index * 3 + 3])) for pixels, index in colours),
                   reverse=True)
    merged: list[list] = []
    for pixels, rgb in found:
        for entry in merged:
            if sum((a - b) ** 2 for a, b in zip(entry[1], rgb)) <= 24 ** 2:
                entry[0] += pixels
                break
        else:
            merged.append([pixels, rgb])
    all_pixels = sum(pixels for pixels, _ in merged) or 1
    merged.sort(key=lambda entry: -entry[0])
    return [{"hex": "#{:02x}{:02x}{:02x}".format(*rgb), "percent": round(100 * pixels / all_pixels, 1)}
            for pixels, rgb in merged if 1000 * pixels >= all_pixels]


def _readable(tag_name: str, value: Any) -> str | int | float | list | None:
    """EXIF values as JSON a person can read; None for what is binary or meaningless."""
    if isinstance(value, bytes):
        stripped = value.rstrip(b"\x00")
        if not stripped or len(stripped) > 256 or any(b < 32 or b > 126 for b in stripped):
            return None
        return stripped.decode("ascii")
    if isinstance(value, str):
        value = value.replace("\x00", "").strip()
        return value[:256] or None
    if hasattr(value, "numerator") and hasattr(value, "denominator") and not isinstance(value, int):
        if not value.denominator:
            return None
        if tag_name == "ExposureTime" and 0 < value < 1:
            return f"1/{round(value.denominator / value.numerator)}" if value.numerator else None
        return round(float(value), 4)
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, tuple) and 0 < len(value) <= 16:
        items = [_readable(tag_name, item) for item in value]
        return None if any(item is None for item in items) else items
    return None


def readable_exif(image: Image.Image) -> dict:
    from PIL import ExifTags

    try:
        exif = image.getexif()
        sources: list[tuple[Mapping[int, Any], dict[int, str]]] = [(exif, ExifTags.TAGS)]
        sub_ifd = exif.get_ifd(ExifTags.IFD.Exif)
        if sub_ifd:
            sources.append((sub_ifd, ExifTags.TAGS))
    except _DECODE_ERRORS:
        return {}
    readable: dict = {}
    for tags, names in sources:
        for tag, value in tags.items():
            if tag in _SKIPPED_EXIF or not isinstance(tag, int):
                continue
            name = names.get(tag, f"Tag0x{tag:04X}")
            converted = _readable(name, value)
            if converted is not None:
                readable[name] = converted
    return readable


def _size_text(size: int) -> str:
    for unit, factor in (("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f} {unit}"
    return f"{size} bytes"


def _taken_at(exif: dict) -> str:
    stamp = exif.get("DateTimeOriginal") or exif.get("DateTime")
    if not isinstance(stamp, str):
        return ""
    try:
        moment = datetime.strptime(stamp[:19], "%Y:%m:%d %H:%M:%S")
    except ValueError:
        return ""
    return f"{moment.day} {moment:%B %Y} at {moment:%H:%M}"


def local_description(result: dict, frames: int = 1) -> str:
    """A description built only from what was measured, for when no vision model answers."""
    width, height = result["width"], result["height"]
    shape = "square" if width == height else ("landscape" if width > height else "portrait")
    kind = "animated GIF" if frames > 1 else f"{result['format']} image"
    megapixels = width * height / 1_000_000
    parts = [f"A {shape} {kind}, {width} × {height} pixels "
             f"({megapixels:.1f} megapixels, {_size_text(result['file_size'])})"
             + (f", {frames} frames" if frames > 1 else "") + "."]
    named: list[tuple[str, float]] = []
    for colour in result["top_colors"]:
        name = colour_name(colour["hex"])
        if colour["percent"] >= 5 and name not in [known for known, _ in named]:
            named.append((name, colour["percent"]))
        if len(named) == 3:
            break
    if named:
        listed = [f"{name} ({percent:.0f}%)" for name, percent in named]
        joined = listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " and " + listed[-1]
        parts.append(f"Dominant colours: {joined}.")
    exif = result["exif"]
    make = str(exif.get("Make") or "").strip()
    model = str(exif.get("Model") or "").strip()
    # "Canon" + "Canon EOS 80D" reads as "Canon EOS 80D", not "Canon Canon EOS 80D".
    if make and model.lower().startswith(make.lower()):
        camera = model
    else:
        camera = " ".join(part for part in (make, model) if part)
    taken = _taken_at(exif)
    if camera and taken:
        parts.append(f"Taken with a {camera} on {taken}.")
    elif camera:
        parts.append(f"Taken with a {camera}.")
    elif taken:
        parts.append(f"Taken on {taken}.")
    return " ".join(parts)


def analyze_image(source: IO[bytes], file_size: int, preview: bool = False) -> tuple[dict, bytes | None]:
    """The measured part of an analysis result and, when asked, a JPEG preview (at most
    VISION_PREVIEW_SIDE) to hand a vision model instead of the full-size original."""
    from PIL import Image

    with open_image(source) as image:
        image_format = (image.format or "unknown").upper()
        orientation = _orientation(image)
        width, height = _oriented_size(image.size, orientation)
        exif = readable_exif(image)
        frames = int(getattr(image, "n_frames", 1) or 1)
        try:
            image.draft("RGB", (VISION_PREVIEW_SIDE, VISION_PREVIEW_SIDE))
            image.load()
            colours = top_colours(image)
            preview_bytes = None
            if preview:
                copy = _flatten(image.copy())
                copy.thumbnail((VISION_PREVIEW_SIDE, VISION_PREVIEW_SIDE), Image.Resampling.LANCZOS)
                if orientation in _TRANSPOSE:
                    copy = copy.transpose(Image.Transpose[_TRANSPOSE[orientation]])
                output = io.BytesIO()
                copy.save(output, "JPEG", quality=85)
                preview_bytes = output.getvalue()
        except _DECODE_ERRORS as error:
            raise ImageRejected("invalid_image", f"The image cannot be decoded: {error}") from None
    result = {"format": image_format, "width": width, "height": height, "file_size": file_size,
              "top_colors": colours, "exif": exif}
    result["description"] = local_description(result, frames)
    return result, preview_bytes


# ------------------------------------------------------------------ placeholders

_PLACEHOLDER_KINDS = {
    "image": ("IMG", "#6a5acd"), "pdf": ("PDF", "#d32f2f"), "document": ("DOC", "#1565c0"),
    "text": ("TXT", "#546e7a"), "audio": ("AUDIO", "#8e24aa"), "video": ("VIDEO", "#ef6c00"),
    "svg": ("SVG", "#00897b"), "file": ("FILE", "#757575"),
}


def placeholder_kind(mime_type: str) -> str:
    if mime_type == "image/svg+xml":
        return "svg"
    if mime_type == "application/pdf":
        return "pdf"
    if mime_type.startswith("application/") and "word" in mime_type:
        return "document"
    for prefix in ("image", "text", "audio", "video"):
        if mime_type.startswith(prefix + "/"):
            return prefix
    return "file"


def placeholder_svg(mime_type: str) -> bytes:
    """A static icon per kind of file; nothing from the file or its name goes into it."""
    label, colour = _PLACEHOLDER_KINDS[placeholder_kind(mime_type)]
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="300" height="300" viewBox="0 0 300 300">'
        '<rect width="300" height="300" rx="24" fill="#f5f5f5"/>'
        '<path d="M95 50h80l50 50v150H95z" fill="#ffffff" stroke="#bdbdbd" stroke-width="6"/>'
        '<path d="M175 50v50h50" fill="none" stroke="#bdbdbd" stroke-width="6"/>'
        f'<rect x="70" y="160" width="160" height="56" rx="8" fill="{colour}"/>'
        '<text x="150" y="198" font-family="sans-serif" font-size="30" font-weight="bold" '
        f'fill="#ffffff" text-anchor="middle">{label}</text></svg>'
    ).encode("utf-8")
