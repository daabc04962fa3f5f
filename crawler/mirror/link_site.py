"""A small site for the generic spider (crawler/spiders/site.py): links one, two and three
hops deep, links outside the allow-pattern and to robots-forbidden pages, and a sitemap.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from crawler.mirror.pages import PROSE, Page, Site, html_page, ok_page
from crawler.mirror.pairs import Pair

LINK_ROBOTS = "User-agent: *\nDisallow: /lian/private/\nSitemap: /sitemap.xml\n"


def _urlset(paths: list[str]) -> str:
    urls = "".join(f"<url><loc>{{base}}{p}</loc></url>" for p in paths)
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="{_SITEMAP_NS}">{urls}</urlset>'


_SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
# path -> links on the page; every page holds one pair, in the 上联：/下联： layout
LINK_PAGES: dict[str, list[str]] = {
    "/lian/index.html": ["/lian/a.html", "/other/o.html", "/lian/private/p.html", "/lian/index.html"],
    "/lian/a.html": ["/lian/b.html", "/lian/index.html"],  # one hop from the start page
    "/lian/b.html": ["/lian/c.html"],  # two hops
    "/lian/c.html": [],  # three hops
    "/other/o.html": [],  # outside the allow-pattern /lian/
    "/lian/private/p.html": [],  # forbidden by robots.txt
    "/lian/s1.html": ["/lian/s1-next.html"],  # in the sitemap
    "/lian/s1-next.html": [],  # one hop from a sitemap page
    "/lian/%E6%98%A5%E8%81%94.html": [],  # in the sitemap: /lian/春联.html
    "/other/s3.html": [],  # in the sitemap, outside the allow-pattern
    "/lian/private/s4.html": [],  # in the sitemap, forbidden by robots.txt
}
LINK_SITEMAP = ["/lian/s1.html", "/lian/%E6%98%A5%E8%81%94.html", "/other/s3.html", "/lian/private/s4.html"]


@dataclass
class LinkSite:
    """Pages whose pairs are known by path; the sitemap's URLs are written at serve time
    (``with_base``), since a sitemap holds absolute URLs."""

    pages: dict[str, Page]
    pair_at: dict[str, Pair]

    def with_base(self, base: str) -> Site:
        pages = dict(self.pages)
        for path in ("/sitemap.xml", "/sitemap-lian.xml"):
            pages[path] = Page(
                200, self.pages[path].body.replace(b"{base}", base.encode()), pages[path].headers
            )
        pairs = set(self.pair_at.values())
        return Site(pages, {"site": "/lian/index.html"}, {"site": pairs}, set(), {"site": 0})


def build_link_site(pairs: list[Pair]) -> LinkSite:
    """A site for the generic spider: a start page with links one, two and three hops deep,
    links outside the allow-pattern and to robots-forbidden pages, and a sitemap index
    (named in robots.txt) whose urlset lists pages in and outside the pattern."""
    pairs = list(dict.fromkeys(pairs))
    if len(pairs) < len(LINK_PAGES):
        raise ValueError(f"need at least {len(LINK_PAGES)} pairs")
    xml = {"Content-Type": "application/xml"}
    index = (
        f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="{_SITEMAP_NS}">'
        "<sitemap><loc>{base}/sitemap-lian.xml</loc></sitemap></sitemapindex>"
    )
    pages: dict[str, Page] = {
        "/robots.txt": Page(200, LINK_ROBOTS.encode(), {"Content-Type": "text/plain"}),
        "/sitemap.xml": Page(200, index.encode(), xml),
        "/sitemap-lian.xml": Page(200, _urlset(LINK_SITEMAP).encode(), xml),
    }
    pair_at: dict[str, Pair] = {}
    for (path, links), (up, lo) in zip(LINK_PAGES.items(), pairs, strict=False):
        title = f"联话 {path}"
        items = "".join(f'<li><a href="{escape(href)}">下一篇</a></li>' for href in links)
        body = f"<h1>{escape(title)}</h1><p>{PROSE[0]}</p><p>上联：{up}</p><p>下联：{lo}</p><ul>{items}</ul>"
        pages[path] = ok_page(html_page(title, body))
        pair_at[path] = (up, lo)
    return LinkSite(pages, pair_at)
