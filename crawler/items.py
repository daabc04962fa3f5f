"""What a crawl yields: one couplet pair with where and when it was found."""

from __future__ import annotations

import scrapy


class CoupletItem(scrapy.Item):
    upper = scrapy.Field()
    lower = scrapy.Field()
    url = scrapy.Field()  # the page the pair was read from
    spider = scrapy.Field()
    fetched_at = scrapy.Field()  # ISO 8601, UTC
    snippet = scrapy.Field()  # the raw text the pair was extracted from
    form = scrapy.Field()  # how it was written: sina | lianyue | shangxia | adjacent
    title = scrapy.Field()  # the article's title
    via = scrapy.Field()  # the site spider: how the page was reached (start | sitemap URL | link URL)
