"""The long-couplet benchmark's lines: whole upper lines joined, each just under its target."""

from __future__ import annotations

from bench._mixed_load import pct, timing
from bench.decode import FIXTURE
from bench.long_lines import TARGETS, long_lines


def test_lines_are_whole_upper_lines_joined_just_under_the_target() -> None:
    uppers = [row.split("\t")[0] for row in FIXTURE.read_text(encoding="utf-8").splitlines() if row.strip()]
    for target in TARGETS:
        lines = long_lines(uppers, target, 5)
        assert len(lines) == 5
        for line in lines:
            assert target - 6 <= len(line) <= target
            assert all(part in uppers for part in line.split("，"))


def test_the_mixed_loads_figures_read_server_timing_and_percentiles() -> None:
    assert timing("queue;dur=412.7, infer;dur=31.2") == "queue 413 + infer 31"
    assert timing("cache;desc=hit") == "cache;desc=hit"
    assert pct([float(i) for i in range(1, 101)], 0.99) == 100.0
    assert pct([float(i) for i in range(1, 101)], 0.5) == 51.0
