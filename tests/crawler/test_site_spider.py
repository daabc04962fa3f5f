"""The generic spider (``python -m crawler site``) against a real local HTTP server: a list
of URLs or a sitemap, an allow-pattern, a depth limit, robots.txt, provenance per pair."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from crawler.mirror.link_site import build_link_site
from crawler.mirror.pairs import HAND_PAIRS
from crawler.mirror.server import MirrorServer
from crawler.spiders.site import SiteSpider, read_url_file
from tests.crawler.helpers import crawl_cmd, popen, read_items

LINK = build_link_site(HAND_PAIRS)
AT = LINK.pair_at


def site_crawl(tmp_path: Path, *spider_args: str) -> tuple[list[dict[str, str]], MirrorServer, str]:
    """Serve the link site, crawl it with ``-a`` arguments (``{base}`` = the server's URL)."""
    mirror = MirrorServer(LINK.with_base(""))  # the sitemap's URLs: once the port is bound
    mirror.site = LINK.with_base(mirror.url("").rstrip("/"))
    with mirror:
        base = mirror.url("").rstrip("/")
        args = [x for a in spider_args for x in ("-a", a.replace("{base}", base))]
        log = tmp_path / "crawl.log"
        assert popen(crawl_cmd("site", "--out", str(tmp_path), *args), log).wait(timeout=120) == 0, (
            log.read_text()[-3000:]
        )
    return read_items(tmp_path / "site.jsonl"), mirror, base


def by_path(items: list[dict[str, str]], base: str) -> dict[str, dict[str, str]]:
    return {it["url"].removeprefix(base): it for it in items}


@pytest.mark.slow
def test_urls_file_allow_pattern_and_depth_are_obeyed(tmp_path: Path) -> None:
    listed = tmp_path / "listed.txt"
    mirror = MirrorServer(LINK.with_base(""))
    mirror.site = LINK.with_base(mirror.url("").rstrip("/"))
    listed.write_text(f"# the start page\n{mirror.url('/lian/index.html')}\n", encoding="utf-8")
    with mirror:
        log = tmp_path / "crawl.log"
        cmd = crawl_cmd("site", "--out", str(tmp_path), "-a", f"urls_file={listed}", "-a", "allow=/lian/",
                        "-a", "depth=2")  # fmt: skip
        assert popen(cmd, log).wait(timeout=120) == 0, log.read_text()[-3000:]
    base = mirror.url("").rstrip("/")
    items = read_items(tmp_path / "site.jsonl")
    got = {(it["upper"], it["lower"]) for it in items}
    assert got == {AT["/lian/index.html"], AT["/lian/a.html"], AT["/lian/b.html"]}
    hits = mirror.hits
    assert hits["/lian/c.html"] == 0, "three hops away with depth=2"
    assert hits["/other/o.html"] == 0, "outside the allow-pattern"
    assert hits["/lian/private/p.html"] == 0, "forbidden by robots.txt"
    assert hits["/robots.txt"] == 1 and hits["/lian/index.html"] == 1  # linked back to: fetched once
    pages = by_path(items, base)
    assert pages["/lian/index.html"]["via"] == "start"
    assert pages["/lian/b.html"]["via"] == f"link {base}/lian/a.html"
    for path, it in pages.items():  # provenance: page, title, rule, time, text
        assert it["title"] == f"联话 {path}" and it["form"] == "shangxia" and it["spider"] == "site"
        assert it["fetched_at"].endswith("+00:00") and "上联：" in it["snippet"]


@pytest.mark.slow
def test_sitemap_from_robots_txt_is_followed(tmp_path: Path) -> None:
    items, mirror, base = site_crawl(tmp_path, "sitemap={base}/robots.txt", "allow=/lian/", "depth=1")
    pages = by_path(items, base)
    spring = "/lian/%E6%98%A5%E8%81%94.html"  # /lian/春联.html, matched decoded
    assert set(pages) == {"/lian/s1.html", "/lian/s1-next.html", spring}
    assert {(it["upper"], it["lower"]) for it in items} == {AT[p] for p in pages}
    assert pages["/lian/s1.html"]["via"] == f"sitemap {base}/sitemap-lian.xml"
    assert pages["/lian/s1-next.html"]["via"] == f"link {base}/lian/s1.html"
    hits = mirror.hits
    assert hits["/sitemap.xml"] == 1 and hits["/sitemap-lian.xml"] == 1  # the index, then its urlset
    assert hits["/other/s3.html"] == 0 and hits["/lian/private/s4.html"] == 0
    assert hits["/lian/index.html"] == 0  # not in the sitemap, linked from nothing crawled


@pytest.mark.slow
def test_depth_zero_reads_the_listed_pages_only(tmp_path: Path) -> None:
    items, mirror, base = site_crawl(tmp_path, "urls={base}/lian/index.html,{base}/other/o.html", "depth=0")
    assert set(by_path(items, base)) == {"/lian/index.html", "/other/o.html"}  # start URLs: no pattern
    assert mirror.hits["/lian/a.html"] == 0


def test_the_site_spider_needs_urls() -> None:
    done = subprocess.run(crawl_cmd("site"), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "-a urls=" in done.stderr and "Traceback" not in done.stderr
    with pytest.raises(ValueError, match="http"):
        SiteSpider(urls="ftp://example.org/x")


def test_url_list_file_and_allow_pattern(tmp_path: Path) -> None:
    path = tmp_path / "urls.txt"
    path.write_text("# list\nhttp://a.example/x  # one\n\nhttp://b.example/y\n", encoding="utf-8")
    assert read_url_file(path) == ["http://a.example/x", "http://b.example/y"]
    spider = SiteSpider(urls_file=str(path), sitemap="http://c.example/sitemap.xml", allow="/联")
    assert spider.start_urls == ["http://a.example/x", "http://b.example/y"]
    assert spider.allowed_domains == ["a.example", "b.example", "c.example"]
    assert spider.allowed("http://a.example/%E8%81%94%E8%AF%9D.html")  # /联话.html
    assert not spider.allowed("http://a.example/other.html")
    assert not spider.allowed("http://elsewhere.example/%E8%81%94.html")  # another host
    assert spider.max_depth == 1


@pytest.mark.slow
def test_mirror_demo_of_the_site_spider_checks_itself(tmp_path: Path) -> None:
    cmd = crawl_cmd("site", "--mirror", "--mirror-pairs", "40", "--out", str(tmp_path))
    log = tmp_path / "demo.log"
    assert popen(cmd, log).wait(timeout=120) == 0, log.read_text()[-3000:]
    assert "site: " in log.read_text() and "missing 0, not on the mirror 0, doubled 0" in log.read_text()
    assert all(
        it["via"] == "start" or it["via"].startswith("link ") for it in read_items(tmp_path / "site.jsonl")
    )
