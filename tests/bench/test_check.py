"""bench/check.py's couplets: 7-character test pairs as they are, 100-character ones joined clause by
clause, every one a couplet whose lines keep the punctuation rule; and its timing loop."""

from __future__ import annotations

from bench.check import LONG, pairs_of, timed
from data.rules import punctuation_mirrored


def test_the_couplets_are_as_long_as_asked_and_distinct() -> None:
    short, long = pairs_of(7, 20), pairs_of(LONG, 2)
    assert len(short) == 20 and len(set(short)) == 20 and all(len(u) == len(w) == 7 for u, w in short)
    assert long and all(len(u) == len(w) == LONG and "，" in u for u, w in long)
    assert all(punctuation_mirrored(u, w) for u, w in short + long)


def test_each_couplet_is_checked_once_and_the_percentiles_are_ordered() -> None:
    calls: list[tuple[str, str]] = []
    pairs = [("春风", "秋月"), ("山高", "水长"), ("花开", "鸟语")]
    figures = timed(lambda u, w: calls.append((u, w)), pairs)
    assert calls == pairs  # the first (the warm-up, not timed), then each once
    assert 0 <= figures["p50_ms"] <= figures["p90_ms"] <= figures["p99_ms"]
