"""Distributed mode: keep a scrapy-redis crawler alive while the shared queue has work.

With the scrapy-redis scheduler every process pops requests from one Redis queue and
checks one Redis dupe filter. A process with nothing in flight would close as soon as the
queue is momentarily empty (another process may be about to push the links it is parsing),
and Scrapy pulls from the scheduler only when its own downloads finish or at its
five-second heartbeat, so an idle process would not notice work that others push. This
extension polls the queue, wakes the engine when work waits and there is room for it, and
closes the spider once it has been idle, with the queue empty, for
``DISTRIBUTED_IDLE_CLOSE`` seconds.
"""

from __future__ import annotations

import time
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.misc import load_object
from twisted.internet.task import LoopingCall


class SharedQueueIdle:
    def __init__(self, crawler: Crawler, url: str) -> None:
        import redis

        self.crawler = crawler
        self.server = redis.Redis.from_url(url)
        self.idle_close = crawler.settings.getfloat("DISTRIBUTED_IDLE_CLOSE", 5.0)
        self.poll = crawler.settings.getfloat("DISTRIBUTED_POLL", 0.2)
        self.queue: Any = None
        self.last_work = time.monotonic()
        self.loop = LoopingCall(self.check)
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SharedQueueIdle:
        url = crawler.settings.get("REDIS_URL")
        if not url:
            raise NotConfigured  # quietly: the usual case
        return cls(crawler, url)

    def spider_opened(self, spider: Spider) -> None:
        settings = self.crawler.settings
        queue_cls = load_object(settings.get("SCHEDULER_QUEUE_CLASS", "scrapy_redis.queue.PriorityQueue"))
        key = settings.get("SCHEDULER_QUEUE_KEY", "%(spider)s:requests") % {"spider": spider.name}
        self.queue = queue_cls(server=self.server, spider=spider, key=key)
        self.last_work = time.monotonic()
        self.loop.start(self.poll, now=False)

    def spider_closed(self, spider: Spider) -> None:
        if self.loop.running:
            self.loop.stop()

    def check(self) -> None:
        engine = self.crawler.engine
        if engine is None or engine.spider is None or engine.scraper.slot is None:
            return
        now = time.monotonic()
        busy = bool(engine.downloader.active) or not engine.scraper.slot.is_idle()
        if busy:
            self.last_work = now
        queued = len(self.queue)
        if queued and not engine.downloader.needs_backout():
            # Work is waiting and this process has room for it: pull now, not at the next
            # heartbeat (5 s).
            self.last_work = now
            wake(engine)
        elif not queued and not busy and now - self.last_work >= self.idle_close:
            # Close now rather than at the engine's next heartbeat.
            self.loop.stop()
            deferred_from_coro(engine.close_spider_async(reason="finished"))

    def spider_idle(self, spider: Spider) -> None:
        if len(self.queue) or time.monotonic() - self.last_work < self.idle_close:
            raise DontCloseSpider


def wake(engine: Any) -> None:
    """Make the engine pull from the scheduler now.

    Scrapy has no public call for this: ``engine.crawl(request)`` wakes the engine, but
    only by scheduling a request, and re-queueing one taken from the shared queue would
    need ``dont_filter``, which its redirects inherit (a page fetched twice). So this uses
    the engine's own "next call", the one its heartbeat triggers.
    """
    slot = getattr(engine, "_slot", None)
    nextcall = getattr(slot, "nextcall", None)
    if nextcall is not None:
        nextcall.schedule()
