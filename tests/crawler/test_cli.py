"""The command line (`make crawl`), the polite defaults and the development HTTP cache."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from crawler import settings
from crawler.mirror.layouts import build_site
from crawler.mirror.pairs import HAND_PAIRS
from crawler.mirror.server import MirrorServer
from tests.crawler.helpers import crawl_cmd, pairs_of, popen, read_items


def test_polite_defaults() -> None:
    assert settings.ROBOTSTXT_OBEY and settings.AUTOTHROTTLE_ENABLED
    assert settings.DOWNLOAD_DELAY >= 1 and settings.CONCURRENT_REQUESTS_PER_DOMAIN <= 2
    assert "duilian" in settings.USER_AGENT and "+https://" in settings.USER_AGENT
    assert {500, 502, 503, 504} <= set(settings.RETRY_HTTP_CODES) and settings.RETRY_ENABLED
    assert settings.FAST_SETTINGS["DOWNLOAD_DELAY"] == settings.FAST_SETTINGS["AUTOTHROTTLE_START_DELAY"] == 0


@pytest.mark.slow
def test_mirror_demo_checks_itself(tmp_path: Path) -> None:
    cmd = crawl_cmd("--mirror", "--mirror-pairs", "60", "--out", str(tmp_path))
    log = tmp_path / "demo.log"
    assert popen(cmd, log).wait(timeout=120) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert "sina: " in text and "prose: " in text and "missing 0, not on the mirror 0, doubled 0" in text
    assert read_items(tmp_path / "sina.jsonl") and read_items(tmp_path / "prose.jsonl")


@pytest.mark.slow
def test_http_cache_answers_the_second_crawl(tmp_path: Path) -> None:
    site = build_site(HAND_PAIRS)
    with MirrorServer(site) as mirror:
        cmd = crawl_cmd(
            "prose", "--cache", "--out", str(tmp_path), "--start-url", mirror.url(site.start["prose"]),
            "-a", "follow=/wenzhang/", "-a", "depth=5", settings=[f"HTTPCACHE_DIR={tmp_path / 'cache'}"],
        )  # fmt: skip
        log = tmp_path / "crawl.log"
        assert popen(cmd, log).wait(timeout=120) == 0
        first = pairs_of(read_items(tmp_path / "prose.jsonl"))
        served = sum(mirror.hits.values())
        assert popen(cmd, log).wait(timeout=120) == 0  # starts afresh: output rewritten
        assert sum(mirror.hits.values()) == served, "the second crawl went to the server"
    assert sorted(pairs_of(read_items(tmp_path / "prose.jsonl"))) == sorted(first)
    assert set(first) == site.expected["prose"]


def test_unknown_spider_is_refused() -> None:
    done = subprocess.run(crawl_cmd("nosuch"), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "unknown spider" in done.stderr


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--start-url", "notaurl"], "http(s) URLs"),
        (["--redis-url", "junk"], "redis://"),
    ],
)
def test_bad_options_are_refused_before_the_last_crawl_is_cleared(
    tmp_path: Path, extra: list[str], says: str
) -> None:
    (tmp_path / "sina.jsonl").write_text('{"upper": "春风得意", "lower": "秋月生辉"}\n', encoding="utf-8")
    done = subprocess.run(
        [*crawl_cmd("sina"), "--out", str(tmp_path), *extra], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and says in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "sina.jsonl").read_text(encoding="utf-8").count("\n") == 1  # not emptied


@pytest.mark.slow
def test_a_crawl_that_fetches_nothing_fails_and_says_why(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a loopback port with nothing listening on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run(
        [*crawl_cmd("sina"), "--out", str(tmp_path), "--start-url", f"http://127.0.0.1:{port}/"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert "sina: 0 pairs written, 0 pages fetched" in done.stdout
    assert "no page could be fetched (" in done.stderr and "ConnectionRefusedError)" in done.stderr


@pytest.mark.slow
def test_a_crawl_reports_what_it_fetched(tmp_path: Path) -> None:
    site = build_site(HAND_PAIRS)
    with MirrorServer(site) as mirror:
        done = subprocess.run(
            [*crawl_cmd("sina"), "--out", str(tmp_path), "--start-url", mirror.url(site.start["sina"])],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    got = len(read_items(tmp_path / "sina.jsonl"))
    assert got and f"sina: {got} pairs written, " in done.stdout
    assert " download errors (finished) -> " in done.stdout


def test_policy_drops_are_counted_per_rule() -> None:
    from crawler.__main__ import policy_drops

    stats = {"validate/dropped/reused_chars": 3, "validate/dropped/too_long": 1, "item_scraped_count": 9}
    assert policy_drops(stats) == {"reused_chars": 3, "too_long": 1}
