"""The crash-safe journal: what is pending survives a reopen, what is done does not come back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.core.scheduler import Scheduler
from scrapy.utils.test import get_crawler

from crawler.journal import FP_META, AutoScheduler, JournalScheduler, moved, page_done, start_origins


class Site(Spider):
    name = "site"

    def parse(self, response: Any, **kwargs: Any) -> None:
        pass


def open_journal(jobdir: Path, start: str | None = None, rebase: bool = False) -> JournalScheduler:
    crawler = get_crawler(Site, {"JOBDIR": str(jobdir), "JOURNAL_REBASE": rebase})
    scheduler = AutoScheduler.from_crawler(crawler)
    assert type(scheduler) is JournalScheduler  # (isinstance is duck-typed for schedulers)
    scheduler.open(Site(start_urls=[start]) if start else Site())
    return scheduler


def drain(scheduler: JournalScheduler) -> list[str]:
    urls = []
    while (request := scheduler.next_request()) is not None:
        urls.append(request.url)
    return urls


def test_pending_requests_come_back_after_a_crash(tmp_path: Path) -> None:
    first = open_journal(tmp_path)
    spider = first.spider
    assert spider is not None
    for i in range(3):
        assert first.enqueue_request(Request(f"http://127.0.0.1/{i}", callback=spider.parse))
    assert not first.enqueue_request(Request("http://127.0.0.1/1"))  # a duplicate
    taken = first.next_request()
    assert taken is not None and taken.url == "http://127.0.0.1/0"
    first.crawler.signals.send_catch_log(page_done, request=taken)  # page 0 finished
    first.next_request()  # page 1 taken, then the process dies: no close()

    second = open_journal(tmp_path)
    assert drain(second) == ["http://127.0.0.1/1", "http://127.0.0.1/2"]
    assert second.stats.get_value("journal/resumed") == 2
    assert not second.enqueue_request(Request("http://127.0.0.1/0"))  # done before: filtered
    second.close("finished")


def test_a_redirect_marks_its_origin_done(tmp_path: Path) -> None:
    first = open_journal(tmp_path)
    first.enqueue_request(Request("http://127.0.0.1/old"))
    origin = first.next_request()
    assert origin is not None and origin.meta[FP_META]
    # what RedirectMiddleware makes: the same meta, another URL
    assert first.enqueue_request(origin.replace(url="http://127.0.0.1/new"))
    second = open_journal(tmp_path)
    assert drain(second) == ["http://127.0.0.1/new"]


def test_without_jobdir_scrapy_s_scheduler_is_used() -> None:
    crawler = get_crawler(Site, {})
    assert type(AutoScheduler.from_crawler(crawler)) is Scheduler


OLD, NEW = "http://127.0.0.1:4001", "http://127.0.0.1:4002"


def killed_crawl(jobdir: Path) -> None:
    """A crawl started at OLD: the list page done (it linked to a and b), page a taken when
    the process died, page b still queued, and one request to another site."""
    first = open_journal(jobdir, f"{OLD}/list")
    first.enqueue_request(Request(f"{OLD}/list"))
    page = first.next_request()
    assert page is not None
    for name in ("a", "b"):
        first.enqueue_request(
            Request(f"{OLD}/{name}", headers={"Referer": f"{OLD}/list"}, meta={"via": f"link {OLD}/list"})
        )
    first.enqueue_request(Request("http://example.org/c"))
    first.crawler.signals.send_catch_log(page_done, request=page)
    assert first.next_request() is not None  # a: in flight at the kill


def test_a_resume_from_another_port_takes_the_journal_there(tmp_path: Path) -> None:
    killed_crawl(tmp_path)
    second = open_journal(tmp_path, f"{NEW}/list", rebase=True)
    assert second.stats.get_value("journal/rebased") == 3  # list, a, b; not example.org
    pending = []
    while (request := second.next_request()) is not None:
        pending.append(request)
    assert [r.url for r in pending] == [f"{NEW}/a", f"{NEW}/b", "http://example.org/c"]
    assert pending[0].headers["Referer"] == f"{NEW}/list".encode()
    assert pending[0].meta["via"] == f"link {NEW}/list"
    assert not second.enqueue_request(Request(f"{NEW}/list"))  # done before the kill: not again
    assert not second.enqueue_request(Request(f"{NEW}/b"))  # queued already
    # the page a marked done under its new fingerprint: a third run does not fetch it
    second.crawler.signals.send_catch_log(page_done, request=pending[0])
    third = open_journal(tmp_path, f"{NEW}/list", rebase=True)
    assert [r.url for r in iter(third.next_request, None)] == [f"{NEW}/b", "http://example.org/c"]
    assert third.stats.get_value("journal/rebased") is None  # the origin did not move again


def test_without_rebase_the_requests_stay_and_a_warning_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    killed_crawl(tmp_path)
    second = open_journal(tmp_path, f"{NEW}/list")
    assert "--rebase" in caplog.text
    assert [r.url for r in iter(second.next_request, None)] == [
        f"{OLD}/a",
        f"{OLD}/b",
        "http://example.org/c",
    ]
    assert second.enqueue_request(Request(f"{NEW}/list"))  # another site, as far as it knows


def test_origins_and_moved_urls() -> None:
    spider = Site(
        start_urls=[f"{OLD}/x", f"{OLD}/y?z=1", "https://example.org/"], sitemap_urls=[f"{NEW}/s.xml"]
    )
    assert start_origins(spider) == [OLD, NEW, "https://example.org"]
    assert moved(f"{OLD}/a", OLD, NEW) == f"{NEW}/a"
    assert moved(OLD, OLD, NEW) == NEW
    assert moved(f"{OLD}0/a", OLD, NEW) == f"{OLD}0/a"  # port 40010 is not port 4001
    assert moved(f"link {OLD}/a", OLD, NEW) == f"link {NEW}/a"
