"""A crawl killed with SIGKILL and started again finishes with nothing lost, nothing doubled."""

from __future__ import annotations

import json
import os
import pickle
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from crawler.mirror.layouts import build_site
from crawler.mirror.pages import Site
from crawler.mirror.server import MirrorServer
from crawler.settings import RETRY_HTTP_CODES
from tests.crawler.helpers import Pair, crawl_cmd, pairs_of, popen, read_items

pytestmark = pytest.mark.slow
SPIDERS = ("sina", "prose")


def kill_after(cmd: list[str], out: Path | list[Path], at_least: int, log: Path) -> int:
    """Run the crawl until its feeds hold at least ``at_least`` items, then SIGKILL it."""
    feeds = out if isinstance(out, list) else [out]
    proc = popen(cmd, log)
    deadline = time.monotonic() + 60
    try:
        while sum(len(read_items(feed)) for feed in feeds) < at_least:
            assert proc.poll() is None, f"the crawl ended before the kill: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "the crawl made no progress"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return sum(len(read_items(feed)) for feed in feeds)


def test_sigkill_twice_then_resume_gives_each_pair_once(mirror_pairs: list[Pair], tmp_path: Path) -> None:
    site = build_site(mirror_pairs, per_article=2)
    expected = site.expected["sina"]
    feed, log = tmp_path / "sina.jsonl", tmp_path / "crawl.log"
    # Slow pages and two at a time, so that the kills land in the middle of the crawl.
    with MirrorServer(site, latency=0.1) as mirror:
        cmd = crawl_cmd(
            "sina", "--out", str(tmp_path), "--start-url", mirror.url(site.start["sina"]),
            settings=["CONCURRENT_REQUESTS=2"],
        )  # fmt: skip
        first = kill_after(cmd, feed, 5, log)
        assert first < len(expected)
        before = read_items(feed)
        second = kill_after([*cmd, "--resume"], feed, first + 5, log)
        assert second < len(expected)
        proc = popen([*cmd, "--resume"], log)
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    items = read_items(feed)
    assert items[: len(before)] == before  # what was written before a kill stays as it was
    pairs = pairs_of(items)
    assert len(pairs) == len(set(pairs)), "a pair written twice"
    assert set(pairs) == expected
    stats = json.loads((tmp_path / "sina.stats.json").read_text())
    assert stats["journal/resumed"] >= 1  # the last run picked up where the kill left it
    assert stats["dedup/already_written"] == second


def journal_pending(jobdir: Path) -> set[str]:
    """Paths the journal of a killed crawl still holds as to do."""
    with sqlite3.connect(jobdir / "journal.sqlite3") as db:
        rows = db.execute("SELECT data FROM requests WHERE done = 0").fetchall()
    return {urlsplit(pickle.loads(data)["url"]).path for (data,) in rows}


def errors(stats: dict[str, int]) -> dict[str, int]:
    prefix = "downloader/exception_type_count/"
    return {k.removeprefix(prefix): v for k, v in stats.items() if k.startswith(prefix)}


def crawl_both(mirror: MirrorServer, site: Site, out: Path, *more: str) -> list[str]:
    return crawl_cmd(
        *SPIDERS, "--out", str(out),
        "-a", f"sina:start_urls={mirror.url(site.start['sina'])}",
        "-a", f"prose:start_urls={mirror.url(site.start['prose'])}",
        "-a", "prose:follow=/wenzhang/", "-a", "prose:depth=5", *more,
        settings=["CONCURRENT_REQUESTS=2"],
    )  # fmt: skip


def test_resume_on_a_new_port_fetches_no_page_twice(mirror_pairs: list[Pair], tmp_path: Path) -> None:
    """Killed on one mirror, resumed on the same site served from another port (what
    ``--mirror`` does: each run serves the site on a free port). Every page is fetched as
    often as in a clean crawl, save the pages in flight at the kill: their handling was not
    finished, so the journal still holds them to do and the resume fetches them again (once).
    Nothing is asked of the dead port, and the pairs are the clean crawl's, each once."""
    site = build_site(mirror_pairs, per_article=2)
    clean_out, out, log = tmp_path / "clean", tmp_path / "resumed", tmp_path / "crawl.log"
    with MirrorServer(site) as mirror:
        proc = popen(crawl_both(mirror, site, clean_out), log)
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
        clean = Counter(mirror.hits)
    clean_pairs = {name: pairs_of(read_items(clean_out / f"{name}.jsonl")) for name in SPIDERS}
    assert {name: set(p) for name, p in clean_pairs.items()} == {n: site.expected[n] for n in SPIDERS}

    feeds = [out / f"{name}.jsonl" for name in SPIDERS]
    total = sum(len(site.expected[name]) for name in SPIDERS)
    with MirrorServer(site, latency=0.05) as first, MirrorServer(site) as second:
        kill_after(crawl_both(first, site, out), feeds, total // 3, log)
        first.stop()  # its port is dead now
        in_flight = set().union(*(journal_pending(out / "jobs" / name) for name in SPIDERS)) & set(first.hits)
        # CONCURRENT_REQUESTS=2 per spider, and besides those a page answered with an error
        # that is retried: served, and its retry waits in the journal (not in flight)
        retried = {path for path, page in site.pages.items() if page.status in RETRY_HTTP_CODES}
        assert len(in_flight - retried) <= 2 * len(SPIDERS), in_flight
        proc = popen(crawl_both(second, site, out, "--resume", "--rebase"), log)
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    assert second.port != first.port
    both = first.hits + second.hits
    assert set(both) == set(clean)
    # robots.txt: once per spider and server
    assert first.hits["/robots.txt"] == second.hits["/robots.txt"] == clean["/robots.txt"] == len(SPIDERS)
    for path, n in clean.items():
        if path == "/robots.txt":
            continue
        if path in in_flight:
            assert n <= both[path] <= 2 * n, path
        else:
            assert both[path] == n, f"{path}: fetched {both[path]} times, {n} in a clean crawl"
    for name in SPIDERS:
        pairs = pairs_of(read_items(out / f"{name}.jsonl"))
        assert len(pairs) == len(set(pairs)), "a pair written twice"
        assert sorted(pairs) == sorted(clean_pairs[name])
        stats = json.loads((out / f"{name}.stats.json").read_text())
        clean_stats = json.loads((clean_out / f"{name}.stats.json").read_text())
        # nothing asked of the dead port: no download error but those of a clean crawl (the
        # robots-forbidden page, refused without a request)
        assert errors(stats).keys() <= errors(clean_stats).keys()
        assert stats["journal/rebased"] >= 1
