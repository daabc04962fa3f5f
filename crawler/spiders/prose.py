"""Articles that quote couplets in prose (联曰：…；…, 上联：… 下联：…, or two bare lines)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

import scrapy
from scrapy.http import Response

from crawler.extract import prose_pairs
from crawler.pages import page_links, prose_article
from crawler.spiders import hosts, make_item, url_list


class ProseSpider(scrapy.Spider):
    """Reads pairs from each page; follows same-site links whose decoded URL matches
    ``follow`` (a regular expression), up to ``depth`` links away from a start page."""

    name = "prose"
    default_start_urls: ClassVar[list[str]] = [
        "https://zh.wikipedia.org/wiki/对联",
        "https://zh.wikipedia.org/wiki/春联",
    ]
    default_follow = r"/wiki/[^:/]*联[^:/]*$"

    def __init__(
        self,
        start_urls: str | list[str] | None = None,
        follow: str | None = None,
        depth: str | int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.start_urls = url_list(start_urls, self.default_start_urls)
        self.allowed_domains = hosts(self.start_urls)
        self.follow = re.compile(follow if follow is not None else self.default_follow)
        self.max_depth = int(depth)

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        if response.meta.get("depth", 0) < self.max_depth:
            for url in page_links(response.text, response.url):
                if urlsplit(url).hostname in self.allowed_domains and self.follow.search(unquote(url)):
                    yield scrapy.Request(url, callback=self.parse)
        article = prose_article(response.text)
        for pair in prose_pairs(article.text):
            yield make_item(pair, response, self.name, article.title)
