"""Draws the web app's PNG icons (static/icons/) with Pillow from static/icon.svg's design: a
white speech bubble on the accent blue. The PNGs are committed; run this again only when the
design changes: `python -m plugins.frontend.icons`."""
from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

ICONS = Path(__file__).parent / "static" / "icons"
BLUE = (47, 111, 222, 255)
WHITE = (255, 255, 255, 255)
SUPERSAMPLE = 4


def draw(size: int, *, full_bleed: bool, inset: float = 0.0) -> Image.Image:
    """The icon at `size` px. `full_bleed`: a square background (maskable icons, iOS, which
    round the corners themselves), else icon.svg's rounded square. `inset`: the share of each
    side left around the bubble (a maskable icon keeps its picture within the middle 80%)."""
    big = size * SUPERSAMPLE
    image = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    pen = ImageDraw.Draw(image)
    if full_bleed:
        pen.rectangle((0, 0, big, big), fill=BLUE)
    else:
        pen.rounded_rectangle((0, 0, big - 1, big - 1), radius=big * 14 / 64, fill=BLUE)
    # icon.svg's 64-unit grid: the bubble's body 12..52 × 20..42 (corner radius 4), its tail
    # from (20,42) down to (20,50) and back to (30,42).
    scale = big * (1 - 2 * inset) / 64
    offset = big * inset

    def at(x: float, y: float) -> tuple[float, float]:
        return offset + x * scale, offset + y * scale

    pen.rounded_rectangle((*at(12, 20), *at(52, 42)), radius=4 * scale, fill=WHITE)
    pen.polygon([at(20, 41), at(20, 50), at(30, 41)], fill=WHITE)
    return image.resize((size, size), Image.Resampling.LANCZOS)


def main() -> None:
    ICONS.mkdir(exist_ok=True)
    draw(192, full_bleed=False).save(ICONS / "icon-192.png", optimize=True)
    draw(512, full_bleed=False).save(ICONS / "icon-512.png", optimize=True)
    draw(512, full_bleed=True, inset=0.12).save(ICONS / "icon-maskable-512.png", optimize=True)
    draw(180, full_bleed=True, inset=0.04).convert("RGB").save(ICONS / "apple-touch-icon.png", optimize=True)


if __name__ == "__main__":
    main()
