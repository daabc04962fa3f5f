"""Crash-safe crawl state in JOBDIR: a crawl killed with SIGKILL resumes with nothing lost.

Scrapy's own JOBDIR state (disk queues, ``requests.seen``) is only consistent after a
clean shutdown: after a kill, depending on what its buffers held, a crawl either starts
over or holds seen-marks for requests whose queue entries were never saved (pages never
fetched). Here every request is written to a SQLite
journal when it is scheduled, and marked done only once its page has been fully handled:
the requests it links to are journalled and every item it yielded has left the item
pipelines (written by the feed, or dropped). On restart, the pending requests are
scheduled again. A page may so be handled twice, never lost; the dedup pipeline, whose
state is rebuilt from the feed file, keeps the output exactly-once.

The journal also records the origin (``scheme://host:port``) of the crawl's start URLs.
With ``JOURNAL_REBASE`` (the CLI's ``--rebase``, implied by ``--mirror``), a crawl resumed
from another origin takes the journal's requests there: the local mirror is served on a
new free port by every run, so without this a resume would fetch every page again under
the new port and send what was left to do to the dead one. The rewrite (URLs, fingerprints,
``Referer`` headers, URLs in the meta) is one transaction with the new origin's record.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
import pickle
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider, signals
from scrapy.core.scheduler import BaseScheduler, Scheduler
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.request import request_from_dict

logger = logging.getLogger(__name__)

page_done = object()  # signal: (request) every output of this request's page is safe
FP_META = "journal_fp"


def start_origins(spider: Spider) -> list[str]:
    """The origins (``scheme://host:port``) of a spider's start URLs and sitemaps, sorted."""
    urls = [*getattr(spider, "start_urls", []), *getattr(spider, "sitemap_urls", [])]
    return sorted({f"{parts.scheme}://{parts.netloc}" for parts in map(urlsplit, urls) if parts.netloc})


def moved(text: str, old: str, new: str) -> str:
    """``text`` with the origin ``old`` (the whole text, or followed by ``/``) made ``new``."""
    return new if text == old else text.replace(old + "/", new + "/")


def rebased(data: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """A request's dict (``Request.to_dict``) moved from origin ``old`` to ``new``: its URL,
    its ``Referer`` header and the strings of its meta (a provenance such as the site
    spider's ``link <page>``)."""
    out = dict(data)
    out["url"] = moved(data["url"], old, new)
    out["headers"] = {
        key: [moved(v.decode("latin-1"), old, new).encode("latin-1") for v in values]
        if key.lower() == b"referer"
        else values
        for key, values in data.get("headers", {}).items()
    }
    out["meta"] = {
        k: moved(v, old, new) if isinstance(v, str) else v for k, v in data.get("meta", {}).items()
    }
    return out


class AutoScheduler(BaseScheduler):
    """Picks the scheduler from the settings: scrapy-redis with REDIS_URL (distributed),
    the journal with JOBDIR (resumable), Scrapy's in-memory one otherwise."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BaseScheduler:  # type: ignore[override]
        settings = crawler.settings
        if settings.get("REDIS_URL"):
            return redis_scheduler(crawler)
        if settings.get("JOBDIR"):
            return JournalScheduler.from_crawler(crawler)
        return build_from_crawler(Scheduler, crawler)

    def has_pending_requests(self) -> bool:  # pragma: no cover - never instantiated
        raise NotImplementedError

    def enqueue_request(self, request: Request) -> bool:  # pragma: no cover
        raise NotImplementedError

    def next_request(self) -> Request | None:  # pragma: no cover
        raise NotImplementedError


def redis_scheduler(crawler: Crawler) -> BaseScheduler:
    """scrapy-redis's scheduler, built here because its ``from_settings`` takes the dupe
    filter from DUPEFILTER_CLASS, which must stay Scrapy's for the other schedulers."""
    from scrapy_redis import connection
    from scrapy_redis.scheduler import Scheduler as RedisScheduler

    s = crawler.settings
    scheduler = RedisScheduler(
        server=connection.from_settings(s),
        persist=s.getbool("SCHEDULER_PERSIST"),
        queue_key=s.get("SCHEDULER_QUEUE_KEY", "%(spider)s:requests"),
        queue_cls=s.get("SCHEDULER_QUEUE_CLASS", "scrapy_redis.queue.PriorityQueue"),
        dupefilter_key=s.get("SCHEDULER_DUPEFILTER_KEY", "%(spider)s:dupefilter"),
        dupefilter_cls=s.get("SCHEDULER_DUPEFILTER_CLASS", "scrapy_redis.dupefilter.RFPDupeFilter"),
    )
    scheduler.server.ping()
    scheduler.stats = crawler.stats
    return scheduler


class JournalScheduler(BaseScheduler):
    """A priority queue in memory, mirrored in ``JOBDIR/journal.sqlite3``."""

    def __init__(self, crawler: Crawler, path: Path) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.path = path
        self.fingerprint = crawler.request_fingerprinter.fingerprint
        self.heap: list[tuple[int, int, str, Request]] = []
        self.known: set[str] = set()
        self.seq = 0
        self.db: sqlite3.Connection | None = None
        self.spider: Spider | None = None
        crawler.signals.connect(self.page_done, signal=page_done)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JournalScheduler:
        return cls(crawler, Path(crawler.settings["JOBDIR"]) / "journal.sqlite3")

    def open(self, spider: Spider) -> None:
        self.spider = spider
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit; no fsync: a killed process loses nothing the OS already has.
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS requests (fp TEXT PRIMARY KEY, done INTEGER NOT NULL,"
            " priority INTEGER NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL)"
        )
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._follow_origin(spider)
        resumed = 0
        for fp, done, priority, seq, data in self.db.execute("SELECT * FROM requests ORDER BY seq"):
            self.known.add(fp)
            self.seq = max(self.seq, seq + 1)
            if not done:
                request = request_from_dict(pickle.loads(data), spider=spider)
                heapq.heappush(self.heap, (-priority, seq, fp, request))
                resumed += 1
        if self.known:
            logger.info("journal: resuming, %d of %d requests still to do", resumed, len(self.known))
            self.stats.set_value("journal/resumed", resumed)

    def _follow_origin(self, spider: Spider) -> None:
        """Record the start URLs' origin; rebase the journal when it moved (JOURNAL_REBASE)."""
        assert self.db is not None
        now = start_origins(spider)
        row = self.db.execute("SELECT value FROM meta WHERE key = 'origins'").fetchone()
        before: list[str] = json.loads(row[0]) if row else []
        if row and before == now:
            return
        has_rows = self.db.execute("SELECT 1 FROM requests LIMIT 1").fetchone() is not None
        if row and has_rows:
            if not self.crawler.settings.getbool("JOURNAL_REBASE"):
                logger.warning(
                    "journal: the crawl started at %s, now at %s; its requests stay at %s"
                    " (--rebase if the site moved, as the local mirror does on every run)",
                    ", ".join(before), ", ".join(now), ", ".join(before),
                )  # fmt: skip
                return
            if len(before) != 1 or len(now) != 1:
                logger.warning(
                    "journal: cannot rebase from %s to %s: one origin each is needed",
                    ", ".join(before), ", ".join(now),
                )  # fmt: skip
                return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            if row and has_rows:
                n = self._rebase(spider, before[0], now[0])
                logger.info("journal: %d requests moved from %s to %s", n, before[0], now[0])
                self.stats.set_value("journal/rebased", n)
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('origins', ?)", (json.dumps(now),))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _rebase(self, spider: Spider, old: str, new: str) -> int:
        """Move every journalled request at origin ``old`` to ``new``; how many moved."""
        assert self.db is not None
        prefix = old + "/"
        rows = self.db.execute("SELECT fp, done, priority, seq, data FROM requests").fetchall()
        n = 0
        for fp, done, priority, seq, data in rows:
            old_data = pickle.loads(data)
            if not (old_data["url"] == old or old_data["url"].startswith(prefix)):
                continue  # another site (a redirect off the start origin): stays
            new_data = rebased(old_data, old, new)
            new_fp = self.fingerprint(request_from_dict(new_data, spider=spider)).hex()
            new_data["meta"][FP_META] = new_fp
            blob = pickle.dumps(new_data, protocol=pickle.HIGHEST_PROTOCOL)
            self.db.execute("DELETE FROM requests WHERE fp = ?", (fp,))
            self.db.execute(  # a request already there at the new origin: done if either is
                "INSERT INTO requests VALUES (?, ?, ?, ?, ?) ON CONFLICT (fp) DO UPDATE"
                " SET done = MAX(done, excluded.done)",
                (new_fp, done, priority, seq, blob),
            )
            n += 1
        return n

    def close(self, reason: str) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def has_pending_requests(self) -> bool:
        return bool(self.heap)

    def __len__(self) -> int:
        return len(self.heap)

    def enqueue_request(self, request: Request) -> bool:
        assert self.db is not None
        origin = request.meta.get(FP_META)
        fp = self.fingerprint(request).hex()
        if origin and origin != fp:
            self._mark_done(origin)  # a redirect: the original request is answered
        if fp in self.known and not request.dont_filter:
            self.stats.inc_value("dupefilter/filtered")
            return False
        request.meta[FP_META] = fp
        data = pickle.dumps(request.to_dict(spider=self.spider), protocol=pickle.HIGHEST_PROTOCOL)
        self.db.execute(
            "INSERT OR REPLACE INTO requests VALUES (?, 0, ?, ?, ?)", (fp, request.priority, self.seq, data)
        )
        heapq.heappush(self.heap, (-request.priority, self.seq, fp, request))
        self.seq += 1
        self.known.add(fp)
        self.stats.inc_value("scheduler/enqueued/journal")
        return True

    def next_request(self) -> Request | None:
        if not self.heap:
            return None
        self.stats.inc_value("scheduler/dequeued/journal")
        return heapq.heappop(self.heap)[3]

    def page_done(self, request: Request) -> None:
        fp = request.meta.get(FP_META)
        if fp:
            self._mark_done(fp)

    def _mark_done(self, fp: str) -> None:
        if self.db is not None:
            self.db.execute("UPDATE requests SET done = 1 WHERE fp = ?", (fp,))
            self.stats.inc_value("journal/done")


class JournalMiddleware:
    """Spider middleware (last before the engine): tells the journal when a page is safe.

    Links are scheduled (and so journalled) before any item is released, and the page is
    marked done only after the item pipelines and the feed have handled all its items.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.waiting: dict[int, list[Any]] = {}  # id(response) -> [items left, future]
        for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            crawler.signals.connect(self.item_finished, signal=signal)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JournalMiddleware:
        if not crawler.settings.get("JOBDIR") or crawler.settings.get("REDIS_URL"):
            raise NotConfigured  # no journal without JOBDIR (or with Redis)
        return cls(crawler)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        items = []
        try:
            async for obj in result:
                if isinstance(obj, Request):
                    self.crawler.engine.crawl(obj)
                else:
                    items.append(obj)
        except Exception:
            for item in items:  # what the callback gave before it failed; the page stays to do
                yield item
            raise
        finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if items:
            self.waiting[id(response)] = [len(items), finished]
        else:
            finished.set_result(None)
        for item in items:
            yield item
        await finished
        self.crawler.signals.send_catch_log(page_done, request=response.request)

    def item_finished(self, item: Any, response: Response | None, **kwargs: Any) -> None:
        entry = self.waiting.get(id(response))
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            del self.waiting[id(response)]
            entry[1].set_result(None)
