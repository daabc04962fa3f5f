"""Pipelines and the feed storage, on a real Scrapy crawler object (no engine, no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem
from scrapy.utils.test import get_crawler

from crawler.feeds import UnbufferedFileFeedStorage, drop_torn_tail
from crawler.items import CoupletItem
from crawler.pipelines import DedupPipeline, NormalisePipeline, ValidatePipeline, invalid_reason


def make_crawler(**settings: Any) -> Crawler:
    crawler = get_crawler(Spider, settings)
    crawler.spider = Spider(name="sina")
    return crawler


def item(upper: str, lower: str) -> CoupletItem:
    return CoupletItem(upper=upper, lower=lower, url="http://x/", spider="sina", fetched_at="t", snippet="s")


@pytest.mark.parametrize(
    ("upper", "lower", "reason"),
    [
        ("天增岁月人增寿", "春满乾坤福满门", None),
        ("", "春", "too_short"),
        ("春风得意", "秋雨", "unequal_length"),
        ("春风，得意", "秋雨绵，绵", "punct_not_mirrored"),
        ("春风abc", "秋雨def", "foreign_chars"),
        ("春风", "春风", "same_lines"),
        ("春" * 41, "秋" * 41, "too_long"),
    ],
)
def test_invalid_reason(upper: str, lower: str, reason: str | None) -> None:
    assert invalid_reason(upper, lower) == reason


def test_validate_drops_with_the_reason_counted() -> None:
    crawler = make_crawler()
    pipeline = ValidatePipeline.from_crawler(crawler)
    assert pipeline.process_item(item("竹报平安", "花开富贵"))["upper"] == "竹报平安"
    for _ in range(2):
        with pytest.raises(DropItem, match="unequal_length"):
            pipeline.process_item(item("春风得意", "秋雨"))
    assert crawler.stats.get_value("validate/dropped/unequal_length") == 2


def test_normalise_folds_ascii_marks_spaces_and_traditional_script() -> None:
    crawler = make_crawler()
    raw = item(" 海納百川, 有容乃大", "壁立千仞,\u200b無欲則剛 ")
    out = NormalisePipeline.from_crawler(crawler).process_item(raw)
    assert (out["upper"], out["lower"]) == ("海纳百川，有容乃大", "壁立千仞，无欲则刚")
    assert crawler.stats.get_value("normalise/changed/upper") == 1


def test_dedup_within_the_crawl() -> None:
    crawler = make_crawler()
    pipeline = DedupPipeline.from_crawler(crawler)
    pipeline.open_spider()
    pipeline.process_item(item("竹报平安", "花开富贵"))
    pipeline.process_item(item("竹报平安", "花开富华"))  # another lower line: another pair
    with pytest.raises(DropItem, match="duplicate"):
        pipeline.process_item(item("竹报平安", "花开富贵"))
    assert crawler.stats.get_value("dedup/dropped") == 1


def test_dedup_resumes_from_what_the_feed_already_holds(tmp_path: Path) -> None:
    feed = tmp_path / "sina.jsonl"
    feed.write_text(json.dumps({"upper": "竹报平安", "lower": "花开富贵"}, ensure_ascii=False) + "\n{torn")
    crawler = make_crawler(FEEDS={str(tmp_path / "%(name)s.jsonl"): {"format": "jsonlines"}})
    pipeline = DedupPipeline.from_crawler(crawler)
    pipeline.open_spider()
    with pytest.raises(DropItem):
        pipeline.process_item(item("竹报平安", "花开富贵"))
    assert pipeline.process_item(item("风调雨顺", "国泰民安"))
    assert crawler.stats.get_value("dedup/already_written") == 1


def test_dedup_ignores_a_feed_that_is_overwritten(tmp_path: Path) -> None:
    (tmp_path / "sina.jsonl").write_text('{"upper": "竹报平安", "lower": "花开富贵"}\n')
    feeds = {str(tmp_path / "%(name)s.jsonl"): {"format": "jsonlines", "overwrite": True}}
    pipeline = DedupPipeline.from_crawler(make_crawler(FEEDS=feeds))
    pipeline.open_spider()
    assert pipeline.process_item(item("竹报平安", "花开富贵"))


def test_feed_storage_writes_through_and_cuts_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "out" / "sina.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"a": 1}\n{"a": 2')
    storage = UnbufferedFileFeedStorage(str(path), feed_options={"overwrite": False})
    f = storage.open(Spider(name="sina"))
    f.write(b'{"a": 3}\n')
    # no flush, no close: another reader sees the line at once (a SIGKILL would keep it)
    assert path.read_bytes() == b'{"a": 1}\n{"a": 3}\n'
    f.close()
    assert drop_torn_tail(path) == 0
