"""The long-couplet benchmark's lines: whole upper lines joined, each just under its target."""

from __future__ import annotations

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
