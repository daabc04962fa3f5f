"""HTML pages in, their parts out: an article's title and body text (one line per block),
and the links of a list page. Pure functions, no Scrapy, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from copy import deepcopy
from dataclasses import dataclass
from urllib.parse import urljoin

from lxml import etree
from parsel import Selector, SelectorList

from crawler.page_text import ZERO_WIDTH

SINA_LIST = re.compile(r"articlelist_\d+_\d+_\d+\.html$")


@dataclass(frozen=True)
class Article:
    title: str
    text: str  # body text, one line per block or <br>


_BLOCK_TAGS = frozenset(
    [
        "p",
        "div",
        "br",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "tr",
        "table",
        "blockquote",
        "pre",
        "section",
        "article",
        "dd",
        "dt",
    ]
)
_SPACE = re.compile(r"[ \t\r\f\v\u00a0\u3000]+")


def block_text(sel: Selector | SelectorList[Selector]) -> str:
    """Visible text of the selected elements, one line per block element or <br>."""
    parts: list[str] = []
    for node in sel if isinstance(sel, SelectorList) else [sel]:
        if not isinstance(node.root, etree._Element):
            continue
        root = deepcopy(node.root)
        root.tail = None
        for el in root.iter():
            if el.tag in ("script", "style"):
                el.text = ""
            elif isinstance(el.tag, str) and el.tag.lower() in _BLOCK_TAGS:
                el.text = "\n" + (el.text or "")
                el.tail = "\n" + (el.tail or "")
        parts.append("".join(root.itertext()))
    text = "\n".join(parts).translate(ZERO_WIDTH)
    lines = (_SPACE.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def sina_list_links(html: str, base_url: str) -> tuple[list[str], list[str]]:
    """(article links under ``.atc_title a``, links to other list pages) of a list page."""
    sel = Selector(text=html)
    articles = [urljoin(base_url, h) for h in sel.css(".atc_title a::attr(href)").getall()]
    pages = [urljoin(base_url, h) for h in sel.css("a::attr(href)").getall() if SINA_LIST.search(h.strip())]
    return _unique(articles), _unique(pages)


def sina_article(html: str) -> Article:
    """Title (``.articalTitle h2``) and body text (``.articalContent``) of a blog article."""
    sel = Selector(text=html)
    title = " ".join(sel.css(".articalTitle h2 ::text").getall()).strip()
    return Article(title=title, text=block_text(sel.css(".articalContent")))


def prose_article(html: str) -> Article:
    """Title and body text of an ordinary article page (``<article>``, else ``<body>``)."""
    sel = Selector(text=html)
    title = (sel.css("h1 ::text").get() or sel.css("title::text").get() or "").strip()
    body = sel.css("article") or sel.css("body") or sel
    return Article(title=title, text=block_text(body))


def page_links(html: str, base_url: str) -> list[str]:
    return _unique(urljoin(base_url, h.strip()) for h in Selector(text=html).css("a::attr(href)").getall())


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
