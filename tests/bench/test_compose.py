"""bench/compose.py's requests: distinct head pairs of two different Chinese characters, taken from
the test pairs' first characters."""

from __future__ import annotations

from bench.compose import heads
from bench.decode import upper_lines
from data.text import is_han


def test_the_heads_are_distinct_pairs_of_the_test_lines_first_characters() -> None:
    found = heads(30)
    assert len(found) == 30 and len(set(found)) == 30
    assert all(len(h) == 2 and is_han(h[0]) and is_han(h[1]) and h[0] != h[1] for h in found)
    uppers, _ = upper_lines()
    lowers, _ = upper_lines(1)
    assert {h for h in found} <= {u[:1] + w[:1] for u, w in zip(uppers, lowers, strict=True)}
