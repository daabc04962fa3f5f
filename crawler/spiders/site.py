"""Any site: a list of URLs and/or sitemaps, links followed to a depth under an allow-pattern.

``python -m crawler site -a urls=https://example.org/lian/ -a allow=/lian/ -a depth=2``, or
``-a urls_file=list.txt`` (one URL a line, ``#`` comments), or ``-a sitemap=https://example.org/sitemap.xml``
(a sitemap, a sitemap index, or a site's robots.txt whose ``Sitemap:`` lines are read).

* ``allow``: a regular expression searched in the percent-decoded URL of every link and
  sitemap entry (not of the start URLs, which are always fetched); default: everything.
* ``depth``: links followed at most this many hops from a start URL or a page listed in a
  sitemap (default 1; 0 reads those pages only). Sitemap indexes do not count as hops.
* Only the hosts of the start URLs and sitemaps are followed (``allowed_domains``), and the
  project's manners hold: robots.txt obeyed, a per-domain delay, AutoThrottle.

Every pair is read by the pure extraction of crawler/extract.py (``prose_pairs``) and
carries its provenance: the page's URL and title, the rule that found it (``form``), the
time (``fetched_at``), the text it was read from (``snippet``) and how the page was reached
(``via``: ``start``, ``sitemap <sitemap URL>`` or ``link <referring page>``).

Built on Scrapy's ``SitemapSpider`` (sitemaps, indexes, robots.txt, gzip) and
``LinkExtractor``; not on ``CrawlSpider``, whose depth would be Scrapy's request depth,
counting the sitemaps' own hops, and whose rules would match the encoded URL.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import scrapy
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import SitemapSpider

from crawler.extract import prose_pairs
from crawler.pages import prose_article
from crawler.spiders import hosts, make_item, url_list

HOPS = "site_hops"  # request meta: links followed from a start URL or a sitemap's page
VIA = "site_via"


def read_url_file(path: str | Path) -> list[str]:
    """URLs of a list file: one a line, blank lines and ``#`` comments skipped."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [s for s in (line.split("#", 1)[0].strip() for line in lines) if s]


class SiteSpider(SitemapSpider):
    """A generic crawl: see the module's docstring for the arguments."""

    name = "site"

    def __init__(
        self,
        urls: str | list[str] | None = None,
        urls_file: str | None = None,
        sitemap: str | list[str] | None = None,
        allow: str | None = None,
        depth: str | int = 1,
        start_urls: str | list[str] | None = None,  # what ``--start-url`` passes
        **kwargs: Any,
    ) -> None:
        self.allow = re.compile(allow or "")
        # SitemapSpider reads its rules in __init__: every entry the allow-pattern takes
        self.sitemap_rules = [(re.compile(".*"), self.parse_page)]
        super().__init__(**kwargs)
        self.start_urls = url_list(urls, []) + url_list(start_urls, [])
        if urls_file:
            self.start_urls += read_url_file(urls_file)
        self.sitemap_urls = url_list(sitemap, [])
        if not (self.start_urls or self.sitemap_urls):
            raise ValueError("the site spider needs -a urls=..., -a urls_file=... or -a sitemap=...")
        bad = [u for u in self.start_urls + self.sitemap_urls if urlsplit(u).scheme not in ("http", "https")]
        if bad:
            raise ValueError(f"the site spider takes http(s) URLs, not {', '.join(map(repr, bad))}")
        self.max_depth = int(depth)
        if self.max_depth < 0:
            raise ValueError("depth is 0 or more")
        self.allowed_domains = hosts(self.start_urls + self.sitemap_urls)
        self.links = LinkExtractor()  # its allow_domains would compare host:port with the host

    def allowed(self, url: str) -> bool:
        """On one of the crawl's hosts, and the decoded URL matches the allow-pattern."""
        return urlsplit(url).hostname in self.allowed_domains and bool(self.allow.search(unquote(url)))

    async def start(self) -> AsyncIterator[Any]:
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse_page, meta={HOPS: 0, VIA: "start"})
        async for request in super().start():  # the sitemaps
            yield request

    def _parse_sitemap(self, response: Response) -> Iterable[scrapy.Request]:
        for request in super()._parse_sitemap(response):
            if request.callback == self.parse_page:
                if not self.allowed(request.url):
                    continue
                request.meta.update({HOPS: 0, VIA: f"sitemap {response.url}"})
            yield request

    def parse_page(self, response: Response) -> Iterator[Any]:
        if not isinstance(response, TextResponse):
            return  # an image or a PDF in a sitemap
        hops = int(response.meta.get(HOPS, 0))
        if hops < self.max_depth:
            for link in self.links.extract_links(response):
                if self.allowed(link.url):
                    meta = {HOPS: hops + 1, VIA: f"link {response.url}"}
                    yield scrapy.Request(link.url, callback=self.parse_page, meta=meta)
        article = prose_article(response.text)
        via = str(response.meta.get(VIA, "start"))
        for pair in prose_pairs(article.text):
            item = make_item(pair, response, self.name, article.title)
            item["via"] = via
            yield item
