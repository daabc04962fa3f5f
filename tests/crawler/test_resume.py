"""A crawl killed with SIGKILL and started again finishes with nothing lost, nothing doubled."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from crawler.mirror import MirrorServer, build_site
from tests.crawler.helpers import Pair, crawl_cmd, pairs_of, popen, read_items

pytestmark = pytest.mark.slow


def kill_after(cmd: list[str], out: Path, at_least: int, log: Path) -> int:
    """Run the crawl until its feed holds at least ``at_least`` items, then SIGKILL it."""
    proc = popen(cmd, log)
    deadline = time.monotonic() + 60
    try:
        while len(read_items(out)) < at_least:
            assert proc.poll() is None, f"the crawl ended before the kill: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "the crawl made no progress"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return len(read_items(out))


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
