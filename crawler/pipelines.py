"""Item pipelines, one job each: normalise, validate, deduplicate.

Normalisation runs first so that validation judges the text that will be written
(an ASCII comma is only punctuation once folded to "，").
"""

from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem

from crawler.feeds import appended_feed_paths
from data.filters import pair_problem
from data.normalize import Normalizer

logger = logging.getLogger(__name__)

MAX_LINE = 40  # longer than any couplet line in the corpora (max 32)
_normalizer: Normalizer | None = None


def normalise_line(line: str) -> str:
    """The data stage's normalisation (whitespace, compatibility forms, punctuation, t2s)."""
    global _normalizer
    if _normalizer is None:
        _normalizer = Normalizer()
    return _normalizer(line.strip())


def invalid_reason(upper: str, lower: str) -> str | None:
    """Why a pair is not a couplet (the data stage's reasons), or None when it is one."""
    return pair_problem(upper, lower, min_len=1, max_len=MAX_LINE)


class NormalisePipeline:
    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats
        self.normalizer = Normalizer()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NormalisePipeline:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        for field in ("upper", "lower"):
            folded = self.normalizer(item[field].strip())
            if folded != item[field]:
                self.stats.inc_value(f"normalise/changed/{field}")
                item[field] = folded
        return item


class ValidatePipeline:
    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ValidatePipeline:
        return cls(crawler)

    def process_item(self, item: Any) -> Any:
        reason = invalid_reason(item["upper"], item["lower"])
        if reason:
            self.stats.inc_value(f"validate/dropped/{reason}")
            raise DropItem(f"not a couplet ({reason}): {item['upper']} / {item['lower']}")
        return item


class PairSet(Protocol):
    def add(self, key: str) -> bool:
        """Record the key; True if it was new."""
        ...


class MemoryPairSet:
    def __init__(self, keys: set[str] | None = None) -> None:
        self.keys = keys or set()

    def add(self, key: str) -> bool:
        if key in self.keys:
            return False
        self.keys.add(key)
        return True


class RedisPairSet:
    """One set shared by every process of a distributed crawl."""

    def __init__(self, url: str, key: str) -> None:
        import redis

        self.server = redis.Redis.from_url(url)
        self.key = key

    def add(self, key: str) -> bool:
        return bool(self.server.sadd(self.key, key))


def pair_key(upper: str, lower: str) -> str:
    return f"{upper}\t{lower}"


def written_keys(crawler: Crawler, spider_name: str) -> set[str]:
    """Pairs already in this spider's appended feeds: a resumed crawl must not write them again."""
    keys: set[str] = set()
    for path in appended_feed_paths(crawler.settings, spider_name):
        if not path.exists():
            continue
        with path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    obj = json.loads(line)
                    keys.add(pair_key(obj["upper"], obj["lower"]))
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line: the storage cuts it off when it opens
    return keys


class DedupPipeline:
    """Each pair once per crawl. The state is the output itself (what the feed already
    holds), or a Redis set when several processes share the crawl."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.seen: PairSet = MemoryPairSet()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DedupPipeline:
        return cls(crawler)

    def open_spider(self) -> None:
        spider = self.crawler.spider
        assert spider is not None
        url = self.crawler.settings.get("REDIS_URL")
        if url:
            key = self.crawler.settings.get("DEDUP_REDIS_KEY", "%(spider)s:pairs") % {"spider": spider.name}
            self.seen = RedisPairSet(url, key)
            return
        keys = written_keys(self.crawler, spider.name)
        if keys:
            logger.info("dedup: %d pairs already written by an earlier run of this crawl", len(keys))
            self.stats.set_value("dedup/already_written", len(keys))
        self.seen = MemoryPairSet(keys)

    def process_item(self, item: Any) -> Any:
        if not self.seen.add(pair_key(item["upper"], item["lower"])):
            self.stats.inc_value("dedup/dropped")
            raise DropItem(f"duplicate pair: {item['upper']} / {item['lower']}")
        return item
