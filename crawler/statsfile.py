"""Writes the crawl stats (drop reasons included) as JSON when the spider closes."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured


class StatsFile:
    def __init__(self, crawler: Crawler, template: str) -> None:
        self.crawler = crawler
        self.template = template
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatsFile:
        template = crawler.settings.get("STATS_FILE")
        if not template:
            raise NotConfigured
        return cls(crawler, template)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        assert self.crawler.stats is not None
        stats = {
            k: v.isoformat() if isinstance(v, datetime) else v
            for k, v in self.crawler.stats.get_stats().items()
        }
        stats["finish_reason"] = reason
        path = Path(self.template % {"name": spider.name})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(stats, ensure_ascii=False, indent=1, sort_keys=True, default=str))
