"""Exact and near-duplicate removal and the per-upper cap, on hand-written pairs."""

from __future__ import annotations

from data.dedup import Deduper


def test_exact_duplicates_removed_in_first_order() -> None:
    d = Deduper()
    pairs = [("春风入户", "瑞雪迎门"), ("花开富贵", "竹报平安"), ("春风入户", "瑞雪迎门")]
    assert d(pairs) == pairs[:2]
    assert d.counts["exact"] == 1


def test_pair_equal_without_punctuation_is_a_near_duplicate() -> None:
    d = Deduper()
    pairs = [("春风，入户来", "瑞雪，迎门到"), ("春风入户来", "瑞雪迎门到"), ("春风、入户来", "瑞雪、迎门到")]
    assert d(pairs) == [("春风入户来", "瑞雪迎门到")]
    assert d.counts["near_punct"] == 2
    assert d.examples["near_punct"][0][2:] == ["春风入户来", "瑞雪迎门到"]


def test_punctuated_variants_keep_the_first() -> None:
    d = Deduper()
    pairs = [("春风，入户来", "瑞雪，迎门到"), ("春风、入户来", "瑞雪、迎门到")]
    assert d(pairs) == pairs[:1]


def test_one_character_variant_of_a_lower_line() -> None:
    d = Deduper()
    pairs = [("春风入户来", "瑞雪迎门到"), ("春风入户来", "瑞雪迎门至"), ("春风入户来", "秋月照山明")]
    assert d(pairs) == [pairs[0], pairs[2]]
    assert d.counts["near_one_char"] == 1


def test_short_lines_may_differ_by_one_character() -> None:
    d = Deduper()
    pairs = [("春风", "秋月"), ("春风", "秋雨")]
    assert d(pairs) == pairs


def test_different_lowers_kept_up_to_the_cap() -> None:
    d = Deduper(max_lowers_per_upper=2)
    pairs = [("春风入户来", low) for low in ("瑞雪迎门到", "秋月照山明", "夏雨洗尘清")]
    assert d(pairs) == pairs[:2]
    assert d.counts["over_cap"] == 1


def test_near_dup_off_keeps_variants() -> None:
    d = Deduper(near_dup=False)
    pairs = [("春风入户来", "瑞雪迎门到"), ("春风入户来", "瑞雪迎门至"), ("春风，入户来", "瑞雪，迎门到")]
    assert d(pairs) == pairs


def test_one_apart() -> None:
    from data.dedup import _one_apart

    assert _one_apart("春风入户来", "夏风入户来")
    assert _one_apart("春风入户来", "春风入户去")
    assert _one_apart("春风入户来", "春风出户来")
    assert not _one_apart("春风入户来", "夏风入户去")
    assert not _one_apart("春风入户来", "春雨出户来")
    assert not _one_apart("春风入户来", "春风入户来")
