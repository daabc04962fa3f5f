"""The page in real headless Chromium: type a line, see candidates with tone marks, vote, find the vote."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from data.paths import work_dir
from serve.settings import Settings
from tests.serve.conftest import PAIRS, LiveServer

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


def test_type_submit_vote_and_find_it_stored(live: LiveServer, settings: Settings) -> None:
    from playwright.sync_api import expect, sync_playwright

    upper, lower = PAIRS[5]  # 绿水青山，千秋画卷: in the training pairs, with a comma
    hostile = "<img src=x onerror=alert(1)>春"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1100})
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
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

            shot = work_dir() / "screenshots" / "page.png"
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()

    db = settings.database_url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as con:
        stored = con.execute("SELECT kind, upper, lower, vote FROM feedback ORDER BY id").fetchall()
    assert stored == [("vote", upper, "".join(first_line), 1), ("own", upper, "红梅白雪，万里诗篇", None)]
