"""The 春联 on the page, in real headless Chromium: drawn from the server's SVG, checked from
the rendered geometry, screenshotted, and downloaded as SVG and as a print-size PNG."""

from __future__ import annotations

import itertools
import struct
import time
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from data.banners import BANNERS_FILE, build_banners
from data.paths import work_dir
from data.sensitive import SensitiveFilter
from serve.main import create_app
from serve.scroll import STRIP_MM
from serve.settings import Settings
from tests.data.test_banners import FIXTURE_PAIRS, SMALL
from tests.serve.conftest import LiveServer, wait_known
from tests.serve.test_page import ARGS, CHROMIUM, patient_expectations  # noqa: F401  (autouse here too)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Chromium at /usr/bin/chromium"),
]


# Every text of the inline SVG, per group, with the centre of what the browser drew for it.
GEOMETRY = """() => {
  const out = {};
  for (const g of document.querySelectorAll('#scroll svg g.banner, #scroll svg g.strip')) {
    const paper = g.querySelector('rect.paper').getBoundingClientRect();
    out[g.classList.contains('banner') ? 'banner' : g.dataset.line] = {
      order: g.dataset.order || null,
      left: paper.left, right: paper.right, top: paper.top, bottom: paper.bottom,
      chars: [...g.querySelectorAll('text.ch')].map((t) => {
        const r = t.getBoundingClientRect();
        return { ch: t.textContent, x: (r.left + r.right) / 2, y: (r.top + r.bottom) / 2 };
      }),
    };
  }
  return out;
}"""


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """The chunks of a PNG file, every CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in {kind!r}"
        chunks.append((kind, body))
        at += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    return chunks


def check_scroll(geo: dict[str, Any], upper: str, lower: str, banner: str, order: str) -> None:
    up, low = geo["upper"], geo["lower"]
    assert "".join(c["ch"] for c in up["chars"]) == upper
    assert "".join(c["ch"] for c in low["chars"]) == lower
    assert up["left"] > low["right"]  # the upper line on the right strip, the lower on the left
    for strip in (up, low):
        ys = [c["y"] for c in strip["chars"]]
        assert all(a < b for a, b in itertools.pairwise(ys))  # read top to bottom
        assert all(strip["left"] < c["x"] < strip["right"] for c in strip["chars"])
        assert all(strip["top"] < y < strip["bottom"] for y in ys)
    ban = geo["banner"]
    assert ban["order"] == order and "".join(c["ch"] for c in ban["chars"]) == banner
    xs = [c["x"] for c in ban["chars"]]
    assert xs == sorted(xs, reverse=(order == "rtl")) and len(set(xs)) == len(xs)
    assert ban["bottom"] <= min(up["top"], low["top"])  # across the top


def test_scroll_drawn_checked_and_downloaded(live: LiveServer, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    upper = "春风得意"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1200}, accept_downloads=True)
            page.goto(live.url + "/")
            page.fill("#upper", upper)
            page.click("#go")
            first = page.locator("#candidates > li").first
            expect(first).to_be_visible()
            lower = "".join(first.locator(".line .char").all_text_contents())
            expect(page.locator("#scroll-box")).to_be_hidden()

            first.locator("button.to-scroll").click()
            expect(page.locator("#scroll svg g.strip.upper")).to_have_attribute("data-text", upper)
            page.fill("#banner", "万象更新")
            page.locator("#banner").press("Enter")
            expect(page.locator("#scroll svg g.banner")).to_have_attribute("data-order", "rtl")
            check_scroll(page.evaluate(GEOMETRY), upper, lower, "万象更新", "rtl")
            font = page.locator("#scroll svg text.ch").first.evaluate("t => getComputedStyle(t).fontFamily")
            assert "KaiTi" in font and "Noto Serif CJK SC" in font  # brush faces first, then serif
            shot = work_dir() / "screenshots" / "scroll.png"
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.locator("#scroll-box").screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000

            # the page's choice: the banner read left to right
            page.select_option("#banner-order", "ltr")
            expect(page.locator("#scroll svg g.banner")).to_have_attribute("data-order", "ltr")
            check_scroll(page.evaluate(GEOMETRY), upper, lower, "万象更新", "ltr")

            # a banner the server refuses: its bilingual message, as text
            page.fill("#banner", "万象，<b>")
            page.locator("#banner").press("Enter")
            expect(page.locator("#scroll-error")).to_contain_text("HTML")
            expect(page.locator("#scroll-error")).to_contain_text("横批")
            page.fill("#banner", "万象更新")
            page.locator("#banner").press("Enter")
            expect(page.locator("#scroll-error")).to_be_hidden()

            with page.expect_download() as svg_download:
                page.click("#download-svg")
            svg_path = tmp_path / "scroll.svg"
            svg_download.value.save_as(svg_path)
            root = ET.fromstring(svg_path.read_bytes())
            width_mm, height_mm = float(root.attrib["data-width-mm"]), float(root.attrib["data-height-mm"])
            texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
            assert "".join(t or "" for t in texts) == "万象更新" + upper + lower

            start = time.monotonic()
            with page.expect_download(timeout=180_000) as png_download:
                page.click("#download-png")
            png_path = tmp_path / "scroll.png"
            png_download.value.save_as(png_path)
            seconds = time.monotonic() - start
            assert png_download.value.suggested_filename.endswith(".png")
            expect(page.locator("#download-status")).to_contain_text("300 dpi")
        finally:
            browser.close()

    data = png_path.read_bytes()
    chunks = png_chunks(data)
    width, height, depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
    assert (width, height) == (round(width_mm / 25.4 * 300), round(height_mm / 25.4 * 300))
    assert height * STRIP_MM / height_mm > 1.2 / 0.0254 * 300 - 1  # the strips at 300 dpi (± a pixel)
    phys = dict(chunks)[b"pHYs"]
    assert struct.unpack(">IIB", phys) == (11811, 11811, 1)  # 300 dpi, said in pixels per metre
    raw = zlib.decompressobj()
    size = sum(len(raw.decompress(body)) for kind, body in chunks if kind == b"IDAT")
    assert (depth, colour) == (8, 6) and size == height * (1 + 4 * width)  # every row is there
    print(f"PNG {width}x{height}, {len(data) / 1e6:.1f} MB, made and downloaded in {seconds:.1f} s")

    # what the PNG shows: red paper on the strips, nothing between them, ink on the characters
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None
    scale = width / width_mm
    strip = root.find(".//{http://www.w3.org/2000/svg}g[@data-line='upper']/*[@class='paper']")
    ch = root.find(".//{http://www.w3.org/2000/svg}g[@data-line='upper']/*[@class='ch']")
    assert strip is not None and ch is not None
    sx, sy, sw, sh = (float(strip.attrib[k]) * scale for k in ("x", "y", "width", "height"))
    cx, cy, size_px = (float(ch.attrib[k]) * scale for k in ("x", "y", "font-size"))
    with Image.open(png_path) as image:
        assert image.size == (width, height)

        def pixels(left: float, top: float, right: float, bottom: float) -> np.ndarray:
            return np.asarray(image.crop((int(left), int(top), int(right), int(bottom))).convert("RGBA"))

        paper = pixels(sx + 0.02 * sw, sy + sh / 2, sx + 0.02 * sw + 1, sy + sh / 2 + 1)
        assert paper[0, 0].tolist() == [0xC0, 0x16, 0x1E, 255]
        assert pixels(width / 2, sy + sh / 2, width / 2 + 1, sy + sh / 2 + 1)[0, 0, 3] == 0  # between
        glyph = pixels(cx - size_px / 2, cy - size_px / 2, cx + size_px / 2, cy + size_px / 2)
        dark = int(((glyph[..., 3] > 0) & (glyph[..., :3].astype(int).sum(axis=2) < 200)).sum())
        assert dark > 0.02 * size_px * size_px  # the character was drawn, in ink


@pytest.fixture
def live_with_banners(settings: Settings, tmp_path: Path) -> Iterator[LiveServer]:
    table = build_banners(FIXTURE_PAIRS, SensitiveFilter(["坏蛋"]), SMALL).save(tmp_path / BANNERS_FILE)
    with LiveServer(create_app(settings.model_copy(update={"banners": table}))) as server:
        wait_known(server.app)
        yield server


def test_banners_under_each_candidate_draw_the_scroll(live_with_banners: LiveServer) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1200})
            page.goto(live_with_banners.url + "/")
            page.fill("#upper", "春风得意")
            page.click("#go")
            candidates = page.locator("#candidates > li")
            expect(candidates.first).to_be_visible()
            for i in range(candidates.count()):
                buttons = candidates.nth(i).locator(".banners button.banner")
                assert 1 <= buttons.count() <= 5
                for j in range(buttons.count()):
                    chars = buttons.nth(j).locator(".char").all_text_contents()
                    marks = [m.strip() for m in buttons.nth(j).locator(".mark").all_text_contents()]
                    assert len(chars) == 4 and len(marks) == 4
                    assert set(marks) <= {"平", "仄", "中", ""}

            # the 春联 button with an empty banner box takes the candidate's best 横批
            second = candidates.nth(min(1, candidates.count() - 1))
            best = "".join(
                second.locator(".banners button.banner").first.locator(".char").all_text_contents()
            )
            second.locator("button.to-scroll").click()
            expect(page.locator("#banner")).to_have_value(best)
            expect(page.locator("#scroll svg g.banner")).to_have_attribute("data-text", best)

            # a click on another 横批 draws the scroll with it, for that candidate
            first = candidates.first
            lower = "".join(first.locator(".line .char").all_text_contents())
            last = first.locator(".banners button.banner").last
            text = "".join(last.locator(".char").all_text_contents())
            last.click()
            expect(page.locator("#banner")).to_have_value(text)
            expect(page.locator("#scroll svg g.strip.lower")).to_have_attribute("data-text", lower)
            expect(page.locator("#scroll svg g.banner")).to_have_attribute("data-text", text)
            check_scroll(page.evaluate(GEOMETRY), "春风得意", lower, text, "rtl")
            shot = work_dir() / "screenshots" / "banners.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
