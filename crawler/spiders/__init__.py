"""The spiders: they only crawl and yield items; extraction is in crawler/extract.py and
crawler/pages.py."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import urlsplit

from scrapy.http import Response

from crawler.couplet_lines import Pair
from crawler.items import CoupletItem


def url_list(value: str | Iterable[str] | None, default: list[str]) -> list[str]:
    """A spider argument: comma- or space-separated URLs (``-a start_urls=...``), or a list."""
    if not value:
        return list(default)
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    return list(value)


def hosts(urls: list[str]) -> list[str]:
    return sorted({urlsplit(u).hostname or "" for u in urls} - {""})


def make_item(pair: Pair, response: Response, spider: str, title: str) -> CoupletItem:
    return CoupletItem(
        upper=pair.upper,
        lower=pair.lower,
        url=response.url,
        spider=spider,
        fetched_at=datetime.now(UTC).isoformat(timespec="seconds"),
        snippet=pair.snippet,
        form=pair.form,
        title=title,
    )
