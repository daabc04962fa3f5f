"""The page in real headless Chromium: type a line, see candidates with tone marks, vote, find the vote."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from data.paths import work_dir
from data.rules import check
from data.vocab import Vocab
from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import PAIRS, LiveServer, build_bundle, wait_known

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Chromium at /usr/bin/chromium"),
]


@pytest.fixture(scope="module", autouse=True)
def exported_graphs(bundle_a: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The test site's server started once, patiently, before the tests' own: it exports its
    models' graphs to the run's graph cache (tests/conftest.py), which bundle_a's two models
    (upper_to_lower and lower_to_upper) take longer than LiveServer's 30 s to do on a busy
    two-core machine; the tests' servers then find them there and start in a moment."""
    store = tmp_path_factory.mktemp("warm") / "feedback.db"
    warm = Settings(
        model_dir=bundle_a, database_url=f"sqlite:///{store}", rate_limit_per_minute=0, decode_processes=0
    )
    with LiveServer(create_app(warm), start_timeout=600):
        pass


@pytest.fixture(autouse=True)
def patient_expectations() -> None:
    """Expectations wait up to 30 s, not Playwright's 5: a decode on a busy two-core CI machine
    (other tests' servers and exports beside it) can take longer than 5 s."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)


def test_type_submit_vote_and_find_it_stored(live: LiveServer, settings: Settings) -> None:
    from playwright.sync_api import Dialog, expect, sync_playwright

    upper, lower = PAIRS[5]  # 绿水青山，千秋画卷: in the training pairs, with a comma
    hostile = "<img src=x onerror=alert(1)>春"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1100})
            dialogs: list[str] = []

            def on_dialog(d: Dialog) -> None:
                dialogs.append(d.message)
                d.dismiss()

            page.on("dialog", on_dialog)
            refused = csp_violations(page)
            page.goto(live.url + "/")
            expect(page.locator("h1")).to_have_text("对联")

            # bad input: the server's bilingual message is shown as text
            page.fill("#upper", hostile)
            page.click("#go")
            expect(page.locator("#error")).to_contain_text("HTML")
            assert page.locator("#error img").count() == 0 and dialogs == []

            page.fill("#upper", upper)
            page.locator("#locks input").nth(0).fill("红")  # lock the first character
            page.click("#go")
            candidates = page.locator("#candidates > li")
            expect(candidates.first).to_be_visible()
            expect(page.locator("#error")).to_be_hidden()
            assert candidates.count() >= 1
            first_line = candidates.first.locator(".line .char").all_text_contents()
            assert len(first_line) == len(upper) and first_line[0] == "红" and first_line[4] == "，"
            shown = [float(t.split()[-1]) for t in candidates.locator(".score").all_text_contents()]
            assert shown == sorted(shown, reverse=True)  # 得分 is the score the list is ordered by
            marks = page.locator("#upper-shown .mark").all_text_contents()
            assert [m.strip() for m in marks][:4] == ["仄", "仄", "平", "平"]  # 绿水青山
            expect(page.locator("#badge")).to_contain_text(lower)

            candidates.first.locator("button.vote.up").click()
            expect(candidates.first.locator(".vote-status")).to_contain_text("已记录")

            page.fill("#own-lower", "红梅白雪，万里诗篇")
            page.click("#own button[type=submit]")
            expect(page.locator("#own-result")).to_contain_text("已收到")

            assert refused == []  # the page works under its Content-Security-Policy
            shot = work_dir() / "screenshots" / "page.png"
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()

    db = settings.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as con:
        stored = con.execute("SELECT kind, upper, lower, vote FROM feedback ORDER BY id").fetchall()
    assert stored == [("vote", upper, "".join(first_line), 1), ("own", upper, "红梅白雪，万里诗篇", None)]


def csp_violations(page: Any) -> list[str]:
    """What the browser refuses under the Content-Security-Policy, as it happens."""
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    return refused


def test_the_api_page_renders_offline_under_its_policy(live: LiveServer) -> None:
    """/docs: the bundled Swagger UI, from local files, shows the operations (it answered the
    3.1 document with "Unable to render this definition"), and the browser refuses nothing."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page()
            refused = csp_violations(page)
            outside: list[str] = []
            page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(live.url) else None)
            page.goto(live.url + "/docs")
            expect(page.locator(".opblock-summary-path").first).to_be_visible()
            paths = page.locator(".opblock-summary-path").all_text_contents()
            assert {"/api/v1/generate", "/api/v1/feedback", "/api/v1/health"} <= {p.strip() for p in paths}
            assert "Unable to render" not in page.content()
            page.locator(".opblock-summary-path", has_text="/api/v1/generate").first.click()
            expect(page.locator(".opblock-body").first).to_be_visible()
            assert refused == [] and [u for u in outside if not u.startswith("data:")] == []
        finally:
            browser.close()


def answer(page: Any, upper: str) -> None:
    """Ask for ``upper`` and wait until its answer, not the last one, is on the page."""
    from playwright.sync_api import expect

    page.fill("#upper", upper)
    page.click("#go")
    expect(page.locator("#upper-shown .char")).to_have_text(list(upper))
    expect(page.locator("#candidates > li").first).to_be_visible()


def test_failures_double_clicks_and_a_phone_screen(live: LiveServer, settings: Settings) -> None:
    from playwright.sync_api import expect, sync_playwright

    upper = "绿水青山，千秋画卷"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 375, "height": 667})
            page.goto(live.url + "/")
            expect(page.locator("#model-version")).to_contain_text("模型")  # /api/v1/model answered
            expect(page.locator("#fast-label")).to_be_hidden()  # this bundle has no proposer

            # a line not in the training set: no badge, not even an empty pill
            answer(page, "东西南北")
            expect(page.locator("#badge")).to_be_hidden()
            expect(page.locator("#status")).to_contain_text("条下联")  # said to screen readers

            # punctuation is mirrored: its lock box is shown, filled and not editable
            page.fill("#upper", upper)
            locks = page.locator("#locks input")
            expect(locks.nth(4)).to_be_disabled()
            expect(locks.nth(4)).to_have_value("，")

            # a long line wraps on a phone instead of running off the screen
            answer(page, "一帆风顺年年好，书山有路勤为径")
            assert page.evaluate("document.documentElement.scrollWidth") <= 375

            # two votes fired at once on one candidate, and two submissions of one's own line:
            # one of each is stored
            answer(page, upper)
            first = page.locator("#candidates > li").first
            first.locator("button.vote.up").evaluate(
                "b => { b.click(); b.click(); b.parentElement.querySelector('.down').click(); }"
            )
            expect(first.locator(".vote-status")).to_contain_text("已记录")
            page.fill("#own-lower", "红梅白雪，万里诗篇")
            page.evaluate(
                "() => { const f = document.getElementById('own'); f.requestSubmit(); f.requestSubmit(); }"
            )
            expect(page.locator("#own-result")).to_contain_text("已收到")

            # keyboard: Tab enters a candidate's characters once, arrows move, Enter opens the
            # character's alternatives with its lock button focused, Enter locks it
            second = page.locator("#candidates > li").nth(1)  # not voted on: its buttons are live
            chars = second.locator("button.ch")
            chars.nth(0).focus()
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.className") == "vote up"  # not the 2nd char
            page.keyboard.press("Shift+Tab")
            page.keyboard.press("ArrowRight")
            expect(chars.nth(1)).to_be_focused()
            page.keyboard.press("Enter")
            expect(second.locator(".alt-lock")).to_be_focused()
            page.keyboard.press("Enter")
            expect(locks.nth(1)).to_have_value(chars.nth(1).locator(".char").inner_text())
            expect(second.locator(".alternatives")).to_have_count(0)
            expect(page.locator("#status")).to_contain_text("已锁定下联第 2 字")

            # a refused line takes the last answer away, so feedback cannot go to the old line
            page.fill("#upper", "abc")
            page.click("#go")
            expect(page.locator("#error")).to_be_visible()
            expect(page.locator("#result")).to_be_hidden()

            # no answer at all (the connection fails): a message in both languages
            page.route("**/api/v1/generate", lambda route: route.abort("connectionrefused"))
            page.fill("#upper", upper)
            page.click("#go")
            expect(page.locator("#error")).to_contain_text("无法连接服务器")
            expect(page.locator("#error")).to_contain_text("Cannot reach the server")
            expect(page.locator("#go")).to_be_enabled()
        finally:
            browser.close()

    db = settings.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as con:
        stored = con.execute("SELECT kind, vote FROM feedback ORDER BY id").fetchall()
    assert stored == [("vote", 1), ("own", None)]


def test_click_a_character_see_its_alternatives_and_choose_one(live: LiveServer) -> None:
    """天天向上: the lower line's first two characters repeat. Clicking the second lists the
    characters for both places (from POST /api/v1/alternatives), the line's own marked; choosing
    another replaces both in the candidate, with its tones and rule report, and both lock boxes
    take it, so the next 对下联 keeps it."""
    from playwright.sync_api import expect, sync_playwright

    upper = "天天向上"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1100})
            refused = csp_violations(page)
            page.goto(live.url + "/")
            answer(page, upper)
            first = page.locator("#candidates > li").first
            before = "".join(first.locator(".line .char").all_text_contents())
            first.locator("button.ch").nth(1).click()
            panel = first.locator(".alternatives")
            choices = panel.locator(".alt-choice")
            expect(choices.first).to_be_visible()
            expect(panel.locator(".alt-status")).to_contain_text("第 1、2 字一起换")
            offered = [c.strip() for c in panel.locator(".alt-choice .char").all_text_contents()]
            assert before[1] in offered and len(offered) == len(set(offered)) >= 5
            expect(panel.locator(".alt.own .char")).to_have_text(before[1])
            other = panel.locator(".alt:not(.own) .alt-choice").first
            chosen = other.locator(".char").inner_text()
            other.click()

            first = page.locator("#candidates > li").first
            after = "".join(first.locator(".line .char").all_text_contents())
            assert after == chosen + chosen + before[2:] and chosen not in upper
            expect(first.locator(".alternatives")).to_have_count(0)
            locks = page.locator("#locks input")
            expect(locks.nth(0)).to_have_value(chosen)
            expect(locks.nth(1)).to_have_value(chosen)
            expect(locks.nth(2)).to_have_value("")
            assert len(first.locator(".line .mark").all_text_contents()) == 4
            expect(first.locator(".report .rule.bad")).to_have_count(0)  # every rule kept
            expect(page.locator("#status")).to_contain_text(f"换成「{chosen}」")

            # the next answer keeps the chosen character (the lock boxes carry it)
            page.click("#go")
            expect(page.locator("#candidates > li").first.locator(".line .char").nth(0)).to_have_text(chosen)
            lines = [
                "".join(li.locator(".line .char").all_text_contents())
                for li in page.locator("#candidates > li").all()
            ]
            assert lines and all(line[:2] == chosen * 2 for line in lines)
            assert refused == []
        finally:
            browser.close()


def test_ones_own_line_is_checked_before_it_is_sent_and_a_suggestion_applied(
    live: LiveServer, settings: Settings
) -> None:
    """The "我来对下联" box: 竹报富安 for 花开富贵 reuses 富. The page shows the line's tones with
    富 in red and 不重字 broken, and the check's suggestions; one click puts the first one in the
    box, which is checked again: the line changes at that place and keeps the rule. Sent, the
    stored line is the mended one."""
    from playwright.sync_api import expect, sync_playwright

    upper, mine = "花开富贵", "竹报富安"
    assert check(upper, mine).no_reuse is False
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1100})
            refused = csp_violations(page)
            page.goto(live.url + "/")
            answer(page, upper)
            page.locator("#own-lower").press_sequentially(mine)  # typed: the check follows the input
            box = page.locator("#own-check")
            expect(box).to_be_visible()
            expect(box.locator("#own-marks .char")).to_have_text(list(mine))
            assert [m.strip() for m in box.locator("#own-marks .mark").all_text_contents()] == [
                "平",
                "仄",
                "仄",
                "平",
            ]
            expect(box.locator("#own-marks .ch.broken .char")).to_have_text(["富"])
            expect(box.locator("#own-rules [data-rule=no_reuse]")).to_have_class("rule bad")
            expect(box.locator("#own-rules [data-rule=no_reuse]")).to_contain_text("✗")
            fix = box.locator(".own-suggestion[data-position='2'] button.apply").first
            expect(fix).to_be_visible()
            chosen = fix.inner_text().strip().removeprefix("换成「").removesuffix("」")
            fix.click()

            expect(page.locator("#own-lower")).to_have_value(mine[:2] + chosen + mine[3:])
            expect(box.locator("#own-marks .char").nth(2)).to_have_text(chosen)
            expect(box.locator("#own-rules [data-rule=no_reuse]")).to_have_class("rule ok")
            expect(box.locator("#own-marks .ch.broken")).to_have_count(0)
            mended = page.locator("#own-lower").input_value()
            assert check(upper, mended).no_reuse is True and chosen not in upper
            page.click("#own button[type=submit]")
            expect(page.locator("#own-result")).to_contain_text("已收到")
            assert refused == []
        finally:
            browser.close()
    db = settings.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as con:
        stored = con.execute("SELECT upper, lower FROM feedback WHERE kind = 'own'").fetchall()
    assert stored == [(upper, mended)]


# The left and right edges of the 春联's two strips as drawn, and the text of each.
STRIPS = """() => Object.fromEntries([...document.querySelectorAll('#scroll svg g.strip')].map((g) => {
  const r = g.querySelector('rect.paper').getBoundingClientRect();
  return [g.dataset.line, { left: r.left, right: r.right, text: g.dataset.text }];
}))"""


def test_upper_lines_for_a_lower_line(live: LiveServer, settings: Settings) -> None:
    """下联求上联 on the page: the direction chosen, the lower line typed and sent as ``lower``;
    the candidates are upper lines (ending 仄), and everything that pairs a candidate with the
    line (alternatives, locks, votes, one's own line, the 春联) puts the candidate first."""
    from playwright.sync_api import expect, sync_playwright

    lower = "明月照窗前"  # ends 平, as a lower line should
    own = "白云生岭上"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1200})
            refused = csp_violations(page)
            page.goto(live.url + "/")
            expect(page.locator("#direction")).to_be_visible()  # bundle_a has a reverse model
            expect(page.locator("#direction-forward")).to_be_checked()
            expect(page.locator("#given-label")).to_have_text("上联")
            page.check("#direction-reverse")
            expect(page.locator("#given-label")).to_have_text("下联")
            expect(page.locator("#go")).to_have_text("对上联")
            expect(page.locator("#upper")).to_have_attribute("placeholder", "例如：家和万事兴")
            page.fill("#upper", lower)
            locks = page.locator("#locks input")
            expect(locks).to_have_count(len(lower))
            expect(locks.nth(0)).to_have_attribute("aria-label", "上联第 1 字（对下联「明」）")

            with page.expect_request(lambda r: r.url.endswith("/api/v1/generate")) as asked:
                page.click("#go")
            sent = asked.value.post_data_json
            assert sent is not None
            assert sent["lower"] == lower and sent["direction"] == "lower_to_upper" and "upper" not in sent
            expect(page.locator("#upper-shown .char")).to_have_text(list(lower))
            expect(page.locator("#shown-label")).to_have_text("下联")
            expect(page.locator("#candidates-label")).to_have_text("上联候选")
            candidates = page.locator("#candidates > li")
            expect(candidates.first).to_be_visible()
            expect(page.locator("#reversed")).to_be_hidden()  # a lower line ending 平 reads as one
            expect(page.locator("#status")).to_contain_text("条上联")
            expect(page.locator("#own-label")).to_have_text("我来对上联")
            texts = []
            for item in candidates.all():
                text = "".join(item.locator(".line .char").all_text_contents())
                marks = [m.strip() for m in item.locator(".line .mark").all_text_contents()]
                assert len(text) == len(lower) and not set(text) & set(lower), text
                assert marks[-1] == "仄", (text, marks)  # an upper line ends oblique
                texts.append(text)
            assert "上联" in (candidates.first.locator(".line").get_attribute("aria-label") or "")
            expect(candidates.first.locator(".rule", has_text="不重下联字")).to_have_count(1)

            # a character's alternatives: the candidate sent as the upper line, the position in it
            second = candidates.nth(1) if len(texts) > 1 else candidates.first
            written = texts[1] if len(texts) > 1 else texts[0]
            with page.expect_request(lambda r: r.url.endswith("/api/v1/alternatives")) as alt_asked:
                second.locator("button.ch").nth(1).click()
            body = alt_asked.value.post_data_json
            assert body is not None
            assert (body["upper"], body["lower"], body["position"]) == (written, lower, 1)
            assert body["direction"] == "lower_to_upper"
            panel = second.locator(".alternatives")
            expect(panel.locator(".alt-choice").first).to_be_visible()
            other = panel.locator(".alt:not(.own) .alt-choice").first
            chosen = other.locator(".char").inner_text()
            other.click()
            written = written[0] + chosen + written[2:]
            second = page.locator("#candidates > li").nth(1 if len(texts) > 1 else 0)
            assert "".join(second.locator(".line .char").all_text_contents()) == written
            expect(locks.nth(1)).to_have_value(chosen)  # the lock box of the upper line's place
            expect(page.locator("#status")).to_contain_text(f"已把上联第 2 字换成「{chosen}」")
            locks.nth(1).fill("")

            # the vote: the couplet upper line first, the candidate as the upper line
            first = candidates.first
            with page.expect_request(lambda r: r.url.endswith("/api/v1/feedback")) as voted:
                first.locator("button.vote.up").click()
            vote = voted.value.post_data_json
            assert vote is not None
            assert (vote["kind"], vote["upper"], vote["lower"], vote["vote"]) == ("vote", texts[0], lower, 1)
            expect(first.locator(".vote-status")).to_contain_text("已记录")

            # the 春联: the candidate on the right strip (the upper line), the given line on the left
            first.locator("button.to-scroll").click()
            expect(page.locator("#scroll svg g.strip.upper")).to_have_attribute("data-text", texts[0])
            strips = page.evaluate(STRIPS)
            assert strips["upper"]["text"] == texts[0] and strips["lower"]["text"] == lower
            assert strips["upper"]["left"] > strips["lower"]["right"]

            # one's own upper line for the lower line
            page.fill("#own-lower", own)
            with page.expect_request(lambda r: r.url.endswith("/api/v1/feedback")) as sent_own:
                page.click("#own button[type=submit]")
            assert sent_own.value.post_data_json == {"kind": "own", "upper": own, "lower": lower}
            expect(page.locator("#own-result")).to_contain_text("已收到")
            assert refused == []
            shot = work_dir() / "screenshots" / "page-reverse.png"
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()

    db = settings.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as con:
        stored = con.execute("SELECT kind, upper, lower, vote FROM feedback ORDER BY id").fetchall()
    assert stored == [("vote", texts[0], lower, 1), ("own", own, lower, None)]


def test_a_line_that_reads_like_the_other_side_offers_the_other_direction(live: LiveServer) -> None:
    """明月照窗前 asked as an upper line ends 平: the hint says it reads like a lower line, and
    its button asks for upper lines instead; 花开富贵 asked as a lower line ends 仄: the hint's
    button asks for lower lines again."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1100})
            refused = csp_violations(page)
            page.goto(live.url + "/")
            expect(page.locator("#direction")).to_be_visible()
            answer(page, "明月照窗前")
            expect(page.locator("#reversed")).to_be_visible()
            expect(page.locator("#reversed-text")).to_contain_text("像是下联")
            switch = page.locator("#reversed-switch")
            expect(switch).to_be_visible()
            expect(switch).to_contain_text("为它对上联")

            switch.click()
            expect(page.locator("#direction-reverse")).to_be_checked()
            expect(page.locator("#shown-label")).to_have_text("下联")  # the new answer is on show
            expect(page.locator("#candidates-label")).to_have_text("上联候选")
            expect(page.locator("#upper-shown .char")).to_have_text(list("明月照窗前"))
            expect(page.locator("#candidates > li").first).to_be_visible()
            expect(page.locator("#reversed")).to_be_hidden()
            for item in page.locator("#candidates > li").all():
                assert item.locator(".line .mark").last.inner_text().strip() == "仄"

            # a lower line ending 仄 reads like an upper line: back the other way
            answer(page, "花开富贵")
            expect(page.locator("#reversed")).to_be_visible()
            expect(page.locator("#reversed-text")).to_contain_text("像是上联")
            expect(switch).to_contain_text("为它对下联")
            switch.click()
            expect(page.locator("#direction-forward")).to_be_checked()
            expect(page.locator("#shown-label")).to_have_text("上联")
            expect(page.locator("#candidates-label")).to_have_text("下联候选")
            expect(page.locator("#go")).to_have_text("对下联")
            expect(page.locator("#reversed")).to_be_hidden()
            expect(page.locator("#candidates > li").first).to_be_visible()
            assert refused == []
        finally:
            browser.close()


def test_no_direction_choice_without_a_reverse_model(
    tmp_path: Path, settings: Settings, vocab: Vocab
) -> None:
    """A bundle without a lower_to_upper model: no direction to choose, no 藏头联 mode, and the hint
    of a line that reads like a lower line offers no switch."""
    from playwright.sync_api import expect, sync_playwright

    bundle = build_bundle(tmp_path / "x", vocab, seed=1, version="t")  # bundle_a's model, its graphs shared
    app = create_app(settings.model_copy(update={"model_dir": bundle}))
    with LiveServer(app, start_timeout=600) as server:
        wait_known(server.app)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                page = browser.new_page()
                page.goto(server.url + "/")
                expect(page.locator("#model-version")).to_contain_text("模型 t")  # /api/v1/model answered
                expect(page.locator("#direction")).to_be_hidden()
                expect(page.locator("#lead-reverse")).to_be_hidden()
                expect(page.locator("#mode")).to_be_hidden()  # nor 藏头联 (the reverse model drafts)
                answer(page, "明月照窗前")
                expect(page.locator("#reversed")).to_be_visible()
                expect(page.locator("#reversed-switch")).to_be_hidden()
            finally:
                browser.close()


def test_the_register_is_offered_where_the_model_writes_in_several(
    tmp_path: Path, settings: Settings, vocab: Vocab
) -> None:
    """A bundle with registers: the page offers them and asks for the one chosen (the answer is
    the API's for that register); the shipped-like bundle without them shows no choice (above)."""
    from playwright.sync_api import expect, sync_playwright

    bundle = build_bundle(tmp_path / "r", vocab, seed=4, version="reg", registers=3)
    app = create_app(settings.model_copy(update={"model_dir": bundle}))
    with LiveServer(app, start_timeout=600) as server:
        wait_known(server.app)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                page = browser.new_page()
                page.goto(server.url + "/")
                expect(page.locator("#model-version")).to_contain_text("模型 reg")
                page.locator("summary").first.click()
                expect(page.locator("#register-label")).to_be_visible()
                page.select_option("#register", "formal")
                with page.expect_response("**/api/v1/generate") as response:
                    answer(page, "明月照窗前")
                asked = response.value.request.post_data_json  # the page's request, register and all
                assert asked is not None and asked["register"] == "formal"
                got = response.value.json()["candidates"]
                want = page.request.post(f"{server.url}/api/v1/generate", data=asked).json()["candidates"]
                assert [c["text"] for c in got] == [c["text"] for c in want]
                shown = page.locator("#candidates > li").first.locator(".line .char").all_text_contents()
                assert "".join(shown) == got[0]["text"]
            finally:
                browser.close()
