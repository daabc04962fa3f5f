"""The page's 藏头联 mode in real headless Chromium: a name typed, whole couplets from the real server
(POST /api/v1/compose) with the hidden characters marked where they stand, the server's bilingual
refusals shown, an empty answer explained, and the 对下联 mode still the default."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest

from data.paths import work_dir
from data.tones import line_tones, mark
from data.vocab import Vocab
from serve.main import create_app
from serve.settings import Settings
from tests.model.decoding.fixtures import EXTRA_CHARS, PAIRS
from tests.serve.conftest import LiveServer, build_bundle, wait_known
from tests.serve.test_page import ARGS, CHROMIUM, csp_violations

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Chromium at /usr/bin/chromium"),
]

SHAPES = ((5,), (7,), (4, 4))  # the lengths the test asks for: 5, 7, and 4,4 for a head of 4
LINES_A_SHAPE = 24  # duilian/compose_seeds.py drafts only from shapes of at least 20 lower lines


def seed_pairs() -> list[tuple[str, str]]:
    """Made-up pairs of the test vocabulary's characters for the bundle's known lines, from which
    compose drafts: for each shape, lines striding through the characters, the upper ending 仄 and
    the lower 平 (lines of the right shape and tones; the search writes the couplets)."""
    chars = sorted(set("".join(u + w for u, w in PAIRS) + EXTRA_CHARS) - {"，"})
    level = [c for c in chars if mark(line_tones(c)[0]) == "平"]
    oblique = [c for c in chars if mark(line_tones(c)[0]) == "仄"]

    def line(n: int, k: int, ends: list[str]) -> str:
        body = [chars[(k * 7 + i * 11) % len(chars)] for i in range(n - 1)]
        end = [c for c in ends if c not in body]
        return "".join(body) + end[k % len(end)]

    return [
        (
            "，".join(line(n, k + j, oblique) for j, n in enumerate(shape)),
            "，".join(line(n, k + j + 3, level) for j, n in enumerate(shape)),
        )
        for shape in SHAPES
        for k in range(LINES_A_SHAPE)
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, vocab: Vocab) -> Iterator[LiveServer]:
    """bundle_a's models (the same seed, so the same exported graphs) knowing the seed pairs."""
    folder = tmp_path_factory.mktemp("compose-page")
    pairs = [*PAIRS, *seed_pairs()]
    bundle = build_bundle(
        folder / "bundle", vocab, seed=1, version="compose", reverse=True, known=True, pairs=pairs
    )
    settings = Settings(
        model_dir=bundle,
        database_url=f"sqlite:///{folder / 'feedback.db'}",
        known_pairs=None,
        rate_limit_per_minute=0,
        cost_per_minute=0,
        decode_processes=0,
    )
    with LiveServer(create_app(settings), start_timeout=600) as server:  # its graphs exported first
        wait_known(server.app)
        yield server


@pytest.fixture(autouse=True)
def patient_expectations() -> None:
    """Expectations wait up to 30 s, as in test_page.py: a busy two-core machine is slow."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)


def marked(line: Any) -> list[int]:
    """The positions of a shown line's characters marked as hidden ones."""
    found = line.locator(".ch").evaluate_all(
        "cells => cells.flatMap((c, i) => c.classList.contains('hidden-char') ? [i] : [])"
    )
    return cast(list[int], found)


def compose(page: Any, submit: str = "#compose-go") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Submit the compose form (a click on ``submit``, or Enter in it when it is the name); the
    request sent and the couplets answered, once the page shows as many."""
    from playwright.sync_api import expect

    with page.expect_response("**/api/v1/compose") as response:
        if submit == "#compose-name":
            page.press(submit, "Enter")
        else:
            page.click(submit)
    assert response.value.ok, response.value.text()
    couplets = cast(list[dict[str, Any]], response.value.json()["couplets"])
    expect(page.locator("#compose-busy")).to_be_hidden()
    expect(page.locator("#couplets > li")).to_have_count(len(couplets))
    return cast(dict[str, Any], response.value.request.post_data_json), couplets


def check_shown(
    page: Any, couplets: list[dict[str, Any]], upper_at: dict[int, str], lower_at: dict[int, str]
) -> None:
    """Each couplet shown as answered, its hidden characters (``upper_at`` and ``lower_at``:
    position to character) marked, and only those."""
    from playwright.sync_api import expect

    assert couplets, "the server wrote no couplet"
    for item, couplet in zip(page.locator("#couplets > li").all(), couplets, strict=True):
        for side, at in ((".couplet-upper", upper_at), (".couplet-lower", lower_at)):
            line = item.locator(side)
            text = couplet["upper" if side == ".couplet-upper" else "lower"]
            expect(line.locator(".char")).to_have_text(list(text))
            assert marked(line) == sorted(at), (side, text, marked(line))
            assert all(text[i] == ch for i, ch in at.items()), (text, at)


def test_a_name_gets_whole_couplets_with_its_characters_marked(site: LiveServer) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1300})
            refused = csp_violations(page)
            page.goto(site.url + "/")
            # 对下联 stays the default; 藏头联 is offered, as the bundle has a reverse model
            expect(page.locator("#mode")).to_be_visible()
            expect(page.locator("#mode-answer")).to_be_checked()
            expect(page.locator("#ask")).to_be_visible()
            expect(page.locator("#compose-mode")).to_be_hidden()
            page.focus("#mode-answer")
            page.keyboard.press("ArrowDown")  # the keyboard moves the mode's radio choice
            expect(page.locator("#mode-compose")).to_be_checked()
            expect(page.locator("#compose-mode")).to_be_visible()
            expect(page.locator("#ask")).to_be_hidden()
            expect(page.locator("#status")).to_contain_text("藏头联")

            # a head of two: the upper line begins with the first character, the lower with the second
            page.fill("#compose-name", "春秋")
            expect(page.locator("#compose-length option")).to_have_text(["五言", "七言", "九言", "十一言"])
            page.select_option("#compose-length", "5")
            sent, couplets = compose(page, submit="#compose-name")
            assert sent == {"head": "春秋", "length": 5, "n": 3, "tone_mode": "modern", "seed": 0}
            check_shown(page, couplets, {0: "春"}, {0: "秋"})
            first = page.locator("#couplets > li").first
            expect(first.locator(".hidden-note")).to_have_text("藏头：上联第 1 字「春」，下联第 1 字「秋」")
            background = first.locator(".hidden-char .char").first.evaluate(
                "c => getComputedStyle(c).backgroundColor"
            )
            assert background not in ("rgba(0, 0, 0, 0)", "transparent")  # marked to the eye too
            expect(page.locator("#compose-busy")).to_contain_text("春秋")  # what the wait was for
            expect(page.locator("#status")).to_contain_text(f"写好了 {len(couplets)} 副对联")
            expect(page.locator("#compose-error")).to_be_hidden()

            # 换一批: the same request with the next seed
            sent, other = compose(page, submit="#compose-more")
            assert sent == {"head": "春秋", "length": 5, "n": 3, "tone_mode": "modern", "seed": 1}
            check_shown(page, other, {0: "春"}, {0: "秋"})

            # a head of four: one at each clause's start, the lengths offered are two clauses'
            page.fill("#compose-name", "山水 花月")  # a space between two names is left out
            expect(page.locator("#compose-length")).to_have_value("4,7")
            page.select_option("#compose-length", "4,4")
            sent, couplets = compose(page)
            assert sent["head"] == "山水花月" and sent["length"] == "4,4"
            check_shown(page, couplets, {0: "山", 5: "水"}, {0: "花", 5: "月"})

            # one character: placed in the upper line (嵌字), marked where it stands
            page.fill("#compose-name", "春")
            page.select_option("#compose-length", "7")
            sent, couplets = compose(page)
            assert sent["keywords"] == "春" and "head" not in sent
            for item, couplet in zip(page.locator("#couplets > li").all(), couplets, strict=True):
                at = couplet["upper"].index("春")
                assert (
                    marked(item.locator(".couplet-upper")) == [at]
                    and marked(item.locator(".couplet-lower")) == []
                )
                expect(item.locator(".hidden-note")).to_have_text(f"嵌字：上联第 {at + 1} 字「春」")

            shot = work_dir() / "screenshots" / "compose.png"
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)

            # refusals: the server's bilingual detail, as the page shows every API error
            page.fill("#compose-name", "Li")
            page.click("#compose-go")
            error = page.locator("#compose-error")
            expect(error).to_be_visible()
            expect(error).to_contain_text("汉字")
            expect(error).to_contain_text("Chinese characters")
            expect(page.locator("#compose-result")).to_be_hidden()
            page.fill("#compose-name", "春夏秋冬山")  # over four characters: refused before sending
            page.click("#compose-go")
            expect(error).to_have_text("最多 4 个字：春夏秋冬山 / At most 4 characters: 春夏秋冬山")

            # an empty answer says why (the server refuses with a reason instead; a proxy might not)
            empty = {"head": "春秋", "keywords": "", "pattern": "5", "tone_mode": "modern", "seed": 0}
            answer = {**empty, "couplets": [], "model_version": "x"}
            page.route("**/api/v1/compose", lambda route: route.fulfill(json=answer))
            page.fill("#compose-name", "春秋")
            page.click("#compose-go")
            expect(page.locator("#compose-none")).to_be_visible()
            expect(page.locator("#compose-none")).to_contain_text("没有写出合乎全部规则")
            expect(page.locator("#couplets > li")).to_have_count(0)
            expect(error).to_be_hidden()
            page.unroute("**/api/v1/compose")

            # back to 对下联: its form as it was, answering as before
            page.click("#mode-answer")
            expect(page.locator("#compose-mode")).to_be_hidden()
            page.fill("#upper", "明月照窗前")
            page.click("#go")
            expect(page.locator("#candidates > li").first).to_be_visible()
            assert refused == []  # the mode works under the Content-Security-Policy
        finally:
            browser.close()
