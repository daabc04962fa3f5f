"""The 春联 picture: the SVG builder's geometry and escaping, and GET /api/v1/scroll.svg."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

import pytest
from fastapi.testclient import TestClient

from serve.scroll import MARGIN_MM, MAX_WIDTH_MM, PAD_MM, PRINT_DPI, STRIP_MM, layout, scroll_svg

NS = {"s": "http://www.w3.org/2000/svg"}


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg.encode("utf-8"))


def glyphs(root: ET.Element, group: str) -> list[tuple[str, float, float]]:
    g = root.find(f".//s:g[@class='{group}']", NS)
    assert g is not None, group
    return [(t.text or "", float(t.attrib["x"]), float(t.attrib["y"])) for t in g.iterfind("s:text", NS)]


def rect(root: ET.Element, group: str) -> tuple[float, float, float, float]:
    r = root.find(f".//s:g[@class='{group}']/s:rect[@class='paper']", NS)
    assert r is not None
    return tuple(float(r.attrib[k]) for k in ("x", "y", "width", "height"))  # type: ignore[return-value]


def test_right_strip_holds_the_upper_line_read_top_to_bottom() -> None:
    root = parse(scroll_svg("书山有路勤为径", "学海无涯苦作舟", "天道酬勤"))
    upper, lower = glyphs(root, "strip upper"), glyphs(root, "strip lower")
    assert "".join(c for c, _, _ in upper) == "书山有路勤为径"
    assert "".join(c for c, _, _ in lower) == "学海无涯苦作舟"
    ux, lx = rect(root, "strip upper")[0], rect(root, "strip lower")[0]
    assert ux > lx  # the upper line's strip is the right one
    assert all(x == upper[0][1] for _, x, _ in upper) and all(x == lower[0][1] for _, x, _ in lower)
    assert upper[0][1] > lower[0][1]
    ys = [y for _, _, y in upper]
    assert ys == sorted(ys) and len(set(ys)) == len(ys)  # y grows down the strip
    assert [y for _, _, y in lower] == ys  # the two lines side by side, character by character
    x, y, w, h = rect(root, "strip upper")
    assert h == STRIP_MM and y + MARGIN_MM < ys[0] < ys[-1] < y + h - MARGIN_MM
    assert all(x < gx < x + w for _, gx, _ in upper)


def test_banner_reads_right_to_left_by_default_and_left_to_right_on_request() -> None:
    rtl = glyphs(parse(scroll_svg("春风得意", "秋月生辉", "万象更新")), "banner")
    assert [c for c, _, _ in rtl] == list("万象更新")  # document order is reading order
    xs = [x for _, x, _ in rtl]
    assert xs == sorted(xs, reverse=True) and len(set(xs)) == 4  # 万 at the right end
    assert len({y for _, _, y in rtl}) == 1
    ltr_root = parse(scroll_svg("春风得意", "秋月生辉", "万象更新", order="ltr"))
    ltr = glyphs(ltr_root, "banner")
    assert [x for _, x, _ in ltr] == sorted(xs)
    banner_box = rect(ltr_root, "banner")
    strip_top = rect(ltr_root, "strip upper")[1]
    assert banner_box[1] + banner_box[3] < strip_top  # above the strips
    width = float(ltr_root.attrib["data-width-mm"])
    assert abs(banner_box[0] + banner_box[2] / 2 - width / 2) < 0.01  # centred


def test_sized_in_millimetres_for_print() -> None:
    root = parse(scroll_svg("明月照窗前", "清风入户来"))
    w, h = float(root.attrib["data-width-mm"]), float(root.attrib["data-height-mm"])
    assert root.attrib["width"] == f"{root.attrib['data-width-mm']}mm"
    assert root.attrib["viewBox"] == f"0 0 {root.attrib['data-width-mm']} {root.attrib['data-height-mm']}"
    assert h > STRIP_MM and w > 0
    assert root.find(".//s:g[@class='banner']", NS) is None  # no banner asked for, none drawn


def test_punctuation_is_not_drawn_and_long_lines_fit() -> None:
    root = parse(scroll_svg("绿水青山，千秋画卷", "红梅白雪，万里诗篇"))
    assert "".join(c for c, _, _ in glyphs(root, "strip upper")) == "绿水青山千秋画卷"
    long_up, long_low = "一" * 32, "二" * 32
    geo = layout(long_up, long_low)
    assert len(geo.upper) == 32 and geo.upper[-1].y + geo.char_size / 2 < geo.right.y + geo.right.height
    assert geo.left.x + geo.left.width < geo.right.x  # the strips never overlap


@pytest.mark.parametrize("hostile", ["<script>alert(1)</script>", "a&b", '"><svg onload=x>', "]]>'"])
def test_every_text_is_escaped(hostile: str) -> None:
    svg = scroll_svg(hostile, hostile, hostile)
    root = parse(svg)  # well-formed whatever went in
    assert root.find(".//s:script", NS) is None and "<script" not in svg
    assert all("onload" not in el.attrib for el in root.iter())
    shown = "".join(c for c, _, _ in glyphs(root, "strip upper"))
    assert shown == hostile.replace(" ", "")  # shown as text, unchanged (spaces are not drawn)
    title = root.find("s:title", NS)
    assert title is not None and hostile in (title.text or "")
    strip = root.find(".//s:g[@class='strip upper']", NS)
    assert strip is not None and strip.attrib["data-text"] == hostile


# The endpoint, on the real app with a tiny model


def test_endpoint_answers_svg(client: TestClient) -> None:
    r = client.get(
        "/api/v1/scroll.svg", params={"upper": "春风得意", "lower": "秋月生辉", "banner": "万象更新"}
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("image/svg+xml")
    assert "default-src 'none'" in r.headers["content-security-policy"]
    root = parse(r.text)
    assert "".join(c for c, _, _ in glyphs(root, "strip upper")) == "春风得意"
    assert "".join(c for c, _, _ in glyphs(root, "banner")) == "万象更新"
    r = client.get(
        "/api/v1/scroll.svg", params={"upper": "春風得意", "lower": "秋月生輝", "banner": "", "order": "ltr"}
    )
    assert r.status_code == 200  # normalised like the other endpoints: 風 → 风
    root = parse(r.text)
    assert "".join(c for c, _, _ in glyphs(root, "strip lower")) == "秋月生辉"
    assert root.find(".//s:g[@class='banner']", NS) is None


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"upper": "春风得意", "lower": "秋月生辉明"}, "一样长"),
        ({"upper": "春风得意", "lower": "<b>秋月生辉</b>"}, "HTML"),
        ({"upper": "spring", "lower": "秋月生辉"}, "Latin"),
        ({"upper": "春风得意", "lower": ""}, "empty"),
        ({"upper": "春风得意"}, "lower"),
        ({"upper": "春风得意", "lower": "秋月生辉", "banner": "万象，更新"}, "横批只能是汉字"),
        ({"upper": "春风得意", "lower": "秋月生辉", "banner": "一二三四五六七八九"}, "at most 8"),
        ({"upper": "春风得意", "lower": "秋月生辉", "order": "up"}, "order"),
        ({"upper": "春" * 33, "lower": "秋" * 33}, "at most 32"),
    ],
)
def test_endpoint_refuses_bad_input_in_both_languages(
    client: TestClient, params: dict[str, str], says: str
) -> None:
    r = client.get("/api/v1/scroll.svg", params=params)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert says in detail and " / " in detail
    assert any("\u4e00" <= ch <= "\u9fff" for ch in detail.split(" / ")[0])  # the Chinese half


def test_endpoint_is_in_openapi(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/api/v1/scroll.svg"]["get"]
    assert "image/svg+xml" in op["responses"]["200"]["content"]
    assert {p["name"] for p in op["parameters"]} == {"upper", "lower", "banner", "order"}


def test_a_long_banner_keeps_the_picture_printable() -> None:
    """Eight banner characters take smaller characters, not a wider picture: the 300 dpi PNG
    stays under a browser canvas's 268 million pixels."""
    geo = layout("一帆风顺年年好", "万事如意步步高", "一二三四五六七八")
    assert geo.width <= MAX_WIDTH_MM + 2 * PAD_MM + 0.01
    assert geo.banner_box is not None and geo.banner_box.x >= PAD_MM - 0.01
    gaps = [a.x - b.x for a, b in itertools.pairwise(geo.banner)]
    assert all(gap > geo.banner_size for gap in gaps)  # rtl: each next one further left, no overlap
    pixels = (geo.width / 25.4 * PRINT_DPI) * (geo.height / 25.4 * PRINT_DPI)
    assert pixels < 268_435_456
