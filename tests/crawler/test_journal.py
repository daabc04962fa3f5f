"""The crash-safe journal: what is pending survives a reopen, what is done does not come back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scrapy import Request, Spider
from scrapy.core.scheduler import Scheduler
from scrapy.utils.test import get_crawler

from crawler.journal import FP_META, AutoScheduler, JournalScheduler, page_done


class Site(Spider):
    name = "site"

    def parse(self, response: Any, **kwargs: Any) -> None:
        pass


def open_journal(jobdir: Path) -> JournalScheduler:
    crawler = get_crawler(Site, {"JOBDIR": str(jobdir)})
    scheduler = AutoScheduler.from_crawler(crawler)
    assert type(scheduler) is JournalScheduler  # (isinstance is duck-typed for schedulers)
    scheduler.open(Site())
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
