"""The Sina blog of 冯重朴 (梨味斋散叶), where the wb14123 corpus came from."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

import scrapy
from scrapy.http import Response

from crawler.extract import sina_pairs
from crawler.items import CoupletItem
from crawler.pages import sina_article, sina_list_links
from crawler.spiders import hosts, make_item, url_list


class SinaBlogSpider(scrapy.Spider):
    name = "sina"
    default_start_urls: ClassVar[list[str]] = ["http://blog.sina.com.cn/s/articlelist_1195052695_2_1.html"]

    def __init__(self, start_urls: str | list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = url_list(start_urls, self.default_start_urls)
        self.allowed_domains = hosts(self.start_urls)

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse_list)

    def parse_list(self, response: Response) -> Iterator[scrapy.Request]:
        articles, pages = sina_list_links(response.text, response.url)
        for url in pages:
            yield scrapy.Request(url, callback=self.parse_list)
        for url in articles:
            yield scrapy.Request(url, callback=self.parse_article)

    def parse_article(self, response: Response) -> Iterator[CoupletItem]:
        article = sina_article(response.text)
        for pair in sina_pairs(article.text):
            yield make_item(pair, response, self.name, article.title)
