"""Two crawler processes share one mirror crawl through a real Redis: each pair once overall."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawler.mirror.layouts import build_site
from crawler.mirror.server import MirrorServer
from tests.crawler.helpers import Pair, crawl_cmd, pairs_of, popen, read_items, wait_until_opened

pytestmark = [pytest.mark.slow, pytest.mark.redis]


def test_two_processes_split_one_crawl(mirror_pairs: list[Pair], redis_url: str, tmp_path: Path) -> None:
    site = build_site(mirror_pairs, per_article=1)
    expected = site.expected["sina"]
    # The mirror answers nothing until both processes are up, so that both can get work.
    with MirrorServer(site, latency=0.05, held=True) as mirror:
        procs = []
        for name in ("a", "b"):
            cmd = crawl_cmd(
                "sina", "--out", str(tmp_path / name), "--start-url", mirror.url(site.start["sina"]),
                "--redis-url", redis_url, settings=["CONCURRENT_REQUESTS=2"],
            )  # fmt: skip
            procs.append(popen(cmd, tmp_path / f"{name}.log"))
        wait_until_opened([tmp_path / "a.log", tmp_path / "b.log"], procs)
        mirror.release()
        for name, proc in zip("ab", procs, strict=True):
            assert proc.wait(timeout=120) == 0, (tmp_path / f"{name}.log").read_text()[-3000:]
    a, b = (pairs_of(read_items(tmp_path / n / "sina.jsonl")) for n in "ab")
    assert a and b, f"one process did no work: {len(a)} and {len(b)} pairs"
    assert len(a) + len(b) == len(set(a) | set(b)), "a pair written twice"
    assert set(a) | set(b) == expected
    for n in "ab":
        stats = json.loads((tmp_path / n / "sina.stats.json").read_text())
        assert stats["response_received_count"] >= 2, f"process {n} fetched almost nothing"
    # one shared dupe filter: no page fetched by both processes (the 500 page is retried)
    fetched = {p: k for p, k in mirror.hits.items() if p.endswith(".html") and "broken" not in p}
    assert max(fetched.values()) == 1
