"""Each filter on hand-written pairs, and the batch path agreeing with the pair-by-pair one."""

from __future__ import annotations

import pytest

from data.filters import PairFilter
from data.sensitive import SensitiveFilter


def make_filter() -> PairFilter:
    return PairFilter(min_len=2, max_len=12, sensitive=SensitiveFilter(["月经", "坏蛋"], allow=["岁月经过"]))


CASES = [
    (("春风入户", "瑞雪迎门"), None),
    (("岁月经过千山", "春秋走遍万水"), None),
    (("春", "秋"), "too_short"),
    (("春风", "瑞"), "too_short"),
    (("春风十里春风十里春风十里好", "瑞雪千年瑞雪千年瑞雪千年新"), "too_long"),
    (("春风入户来", "瑞雪迎门"), "unequal_length"),
    (("春风abc", "瑞雪迎门来"), "foreign_chars"),
    (("春风2户", "瑞雪迎门"), "foreign_chars"),
    (("春风，入户", "瑞雪迎，门"), "punct_not_mirrored"),
    (("春风，入户", "瑞雪。迎门"), "punct_not_mirrored"),
    (("春风，入户", "瑞雪，迎门"), None),
    (("春风入户", "春风入户"), "same_lines"),
    (("天天向上", "步步登高"), None),
    (("天天向上", "步登高高"), "repeats_not_mirrored"),  # 叠字 at another place
    (("春风入户", "秋月生辉辉"[:4]), None),
    (("春风入户", "秋风生辉"), "reused_chars"),  # 风 again
    (("春风，入户", "瑞雪，迎门"), None),  # a mirrored mark is not a reused character
    (("春风月经", "瑞雪迎门"), "sensitive"),
    (("春风入户", "瑞雪坏蛋"), "sensitive"),
]


@pytest.mark.parametrize(("pair", "reason"), CASES)
def test_reason(pair: tuple[str, str], reason: str | None) -> None:
    assert make_filter().reason(*pair) == reason


def test_first_reason_wins() -> None:
    # Unequal and sensitive: counted once, under the earlier reason.
    assert make_filter().reason("月经来", "瑞雪") == "unequal_length"


def test_a_word_across_the_two_lines_is_not_a_hit() -> None:
    assert make_filter().reason("春风月", "瑞雪经") is None


def test_batch_agrees_with_pair_by_pair() -> None:
    pairs = [pair for pair, _ in CASES] * 2
    one, batch = make_filter(), make_filter()
    expected = [p for p in pairs if one.keep(*p)]
    assert batch.keep_batch(pairs) == expected
    assert batch.counts == one.counts
    assert batch.sensitive_hits == one.sensitive_hits == {"月经": 2, "坏蛋": 2}


def test_batch_without_sensitive_list() -> None:
    f = PairFilter()
    assert f.keep_batch([("春风月经", "瑞雪迎门"), ("春", "秋")]) == [("春风月经", "瑞雪迎门")]
    assert f.counts == {"too_short": 1}
    assert f.keep_batch([]) == []
