"""A couplet drawn as a 春联 to print: one SVG, the single drawing the API and the page share.

Two vertical red strips, the upper line (上联) on the RIGHT and the lower line (下联) on the
LEFT, each read top to bottom, and the 横批 across the top, read right to left (the
traditional order) or left to right. Lengths are millimetres: the strips are ``STRIP_MM``
(1.2 m) tall, so a picture rendered at 300 dpi prints them at full size; the SVG's
``width``/``height`` say so in ``mm`` and its ``viewBox`` is in millimetres too.

Punctuation is not written on a scroll (a printed 春联 has none): only the Han characters
are drawn, each as its own ``<text>`` centred in its cell. Every text that goes in is
escaped (``xml.sax.saxutils``), so a caller that passed anything at all still gets a
well-formed picture with no markup of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from xml.sax.saxutils import escape, quoteattr

from data.text import is_punct

BannerOrder = Literal["rtl", "ltr"]

STRIP_MM = 1200.0  # the strips' height: about 1.2 m, the common size for a front door
MARGIN_MM = 60.0  # empty red above the first and below the last character of a strip
MAX_CHAR_MM = 170.0  # the largest character, for short lines
MIN_STRIP_MM = 100.0  # the narrowest strip, for long lines
PAD_MM = 20.0  # around the whole picture
MAX_WIDTH_MM = 900.0  # the widest banner: keeps a 300 dpi PNG under a browser canvas's 268 M pixels
PRINT_DPI = 300  # the page renders its PNG at this resolution (the SVG's data-print-dpi)

RED = "#c0161e"
GOLD = "#d9a52b"
INK = "#1b1410"
# Brush (楷/行) faces first, then serif (宋/明), then whatever CJK face the reader has.
FONT_FAMILY = (
    "'Ma Shan Zheng', 'LXGW WenKai', 'STKaiti', 'KaiTi', '楷体', 'AR PL UKai CN', 'AR PL UKai', "
    "'Noto Serif CJK SC', 'Source Han Serif SC', 'Songti SC', 'SimSun', 'AR PL UMing CN', "
    "'Noto Sans CJK SC', serif"
)


@dataclass(frozen=True)
class Glyph:
    """One character and the centre of its cell, in millimetres."""

    ch: str
    x: float
    y: float


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Layout:
    """Where everything goes. ``right``/``left`` are the upper/lower strips; the banner's
    glyphs are listed in reading order (the first character first, whatever the direction)."""

    width: float
    height: float
    char_size: float
    right: Box
    left: Box
    upper: list[Glyph]
    lower: list[Glyph]
    banner_box: Box | None
    banner: list[Glyph]
    banner_size: float


def drawn(line: str) -> str:
    """The characters a scroll shows: the line without its punctuation (or spaces)."""
    return "".join(ch for ch in line if not (is_punct(ch) or ch.isspace()))


def layout(upper: str, lower: str, banner: str = "", order: BannerOrder = "rtl") -> Layout:
    """The geometry for a couplet: its strips share one pitch, set by the longer line."""
    up, low, top = drawn(upper), drawn(lower), drawn(banner)
    n = max(len(up), len(low), 1)
    pitch = (STRIP_MM - 2 * MARGIN_MM) / n
    size = min(0.8 * pitch, MAX_CHAR_MM)
    strip_w = max(1.4 * size, MIN_STRIP_MM)
    banner_size = min(size, 0.72 * strip_w)
    if top:  # a long banner takes smaller characters rather than a wider picture
        banner_size = min(banner_size, (MAX_WIDTH_MM - 0.8 * strip_w) / (1.2 * len(top)))
    banner_pitch = 1.2 * banner_size
    banner_w = len(top) * banner_pitch + 0.8 * strip_w if top else 0.0
    inner_w = max(banner_w, 3.5 * strip_w)  # strips at the banner's ends, a door's width apart
    width = inner_w + 2 * PAD_MM
    strip_top = PAD_MM + (1.3 * strip_w if top else 0.0)
    height = strip_top + STRIP_MM + PAD_MM
    right = Box(width - PAD_MM - strip_w, strip_top, strip_w, STRIP_MM)
    left = Box(PAD_MM, strip_top, strip_w, STRIP_MM)

    def column(text: str, box: Box) -> list[Glyph]:
        cx = box.x + box.width / 2
        return [Glyph(ch, cx, box.y + MARGIN_MM + (i + 0.5) * pitch) for i, ch in enumerate(text)]

    banner_box = None
    glyphs: list[Glyph] = []
    if top:
        banner_box = Box((width - banner_w) / 2, PAD_MM, banner_w, strip_w)
        cx, cy = width / 2, PAD_MM + strip_w / 2
        sign = -1.0 if order == "rtl" else 1.0
        glyphs = [
            Glyph(ch, cx + sign * (i - (len(top) - 1) / 2) * banner_pitch, cy) for i, ch in enumerate(top)
        ]
    return Layout(
        width=width,
        height=height,
        char_size=size,
        right=right,
        left=left,
        upper=column(up, right),
        lower=column(low, left),
        banner_box=banner_box,
        banner=glyphs,
        banner_size=banner_size,
    )


def _n(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _paper(box: Box) -> str:
    inset = min(box.width, box.height) * 0.06
    return (
        f'<rect class="paper" x="{_n(box.x)}" y="{_n(box.y)}" width="{_n(box.width)}" '
        f'height="{_n(box.height)}" fill="{RED}"/>'
        f'<rect class="border" x="{_n(box.x + inset)}" y="{_n(box.y + inset)}" '
        f'width="{_n(box.width - 2 * inset)}" height="{_n(box.height - 2 * inset)}" fill="none" '
        f'stroke="{GOLD}" stroke-width="{_n(max(inset / 4, 1.0))}"/>'
    )


def _glyphs(glyphs: list[Glyph], size: float) -> str:
    return "".join(
        f'<text class="ch" data-index="{i}" x="{_n(g.x)}" y="{_n(g.y)}" font-size="{_n(size)}">'
        f"{escape(g.ch)}</text>"
        for i, g in enumerate(glyphs)
    )


def scroll_svg(upper: str, lower: str, banner: str = "", order: BannerOrder = "rtl") -> str:
    """The couplet as a standalone SVG document (UTF-8 text), sized for print in millimetres."""
    geo = layout(upper, lower, banner, order)
    title = f"春联 上联：{upper} 下联：{lower}" + (f" 横批：{banner}" if banner else "")
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chunlian" role="img" '
        f'width="{_n(geo.width)}mm" height="{_n(geo.height)}mm" '
        f'viewBox="0 0 {_n(geo.width)} {_n(geo.height)}" '
        f'data-width-mm="{_n(geo.width)}" data-height-mm="{_n(geo.height)}" data-strip-mm="{_n(STRIP_MM)}" '
        f'data-print-dpi="{PRINT_DPI}">',
        f"<title>{escape(title)}</title>",
        f'<g font-family={quoteattr(FONT_FAMILY)} fill="{INK}" text-anchor="middle" '
        f'dominant-baseline="central">',
    ]
    if geo.banner_box is not None:
        parts += [
            f'<g class="banner" data-text={quoteattr(drawn(banner))} data-order={quoteattr(order)}>',
            _paper(geo.banner_box),
            _glyphs(geo.banner, geo.banner_size),
            "</g>",
        ]
    for name, box, glyphs, text in (
        ("upper", geo.right, geo.upper, upper),
        ("lower", geo.left, geo.lower, lower),
    ):
        side = "right" if name == "upper" else "left"
        parts += [
            f'<g class="strip {name}" data-line="{name}" data-side="{side}" data-text={quoteattr(text)}>',
            _paper(box),
            _glyphs(glyphs, geo.char_size),
            "</g>",
        ]
    parts.append("</g></svg>\n")
    return "".join(parts)
