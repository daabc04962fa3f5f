"""The check and the data stage agree (issue 42 item 5): on every wb14123 test pair, the check's
hard-rule verdict (duilian/check.py) is the data stage's filter's (data/filters.py ``pair_problem``)
and the candidates' report's (``data.rules.check``), rule by rule."""

from __future__ import annotations

from collections import Counter

import pytest

from data.filters import pair_problem
from data.paths import corpus_dir
from data.rules import check
from data.text import LONGEST_LINE
from duilian.check import check_couplet

TEST = corpus_dir() / "wb14123_test.tsv"
# pair_problem's reasons that are hard rules (data.rules.HARD_RULES), by rule
HARD_REASONS = {
    "unequal_length": "length",
    "punct_not_mirrored": "punctuation",
    "repeats_not_mirrored": "repeats",
    "reused_chars": "no_reuse",
}


@pytest.mark.corpus
@pytest.mark.skipif(not TEST.is_file(), reason=f"needs the corpora ({TEST})")
def test_every_test_pairs_hard_rule_verdict_is_the_data_stages() -> None:
    pairs = [row.split("\t")[:2] for row in TEST.read_text(encoding="utf-8").splitlines() if "\t" in row]
    assert len(pairs) == 4000
    seen: Counter[str] = Counter()
    for upper, lower in pairs:
        found = check_couplet(upper, lower)
        report = check(upper, lower)
        problem = pair_problem(upper, lower, min_len=1, max_len=LONGEST_LINE)
        assert found.report == report and found.hard_ok == report.hard_ok, (upper, lower)
        broken = {r.name for r in found.rules if r.kind == "hard" and r.kept is False}
        assert all(r.positions or r.clauses for r in found.rules if r.name in broken), (upper, lower)
        if problem is None:
            assert found.hard_ok and not broken, (upper, lower)
        elif problem in HARD_REASONS:
            assert not found.hard_ok and HARD_REASONS[problem] in broken, (upper, lower, problem)
        seen[problem or "kept"] += 1
    # the verdicts compared both ways: pairs the filter keeps and pairs it drops for a hard rule
    assert seen["kept"] > 3000 and sum(seen[r] for r in HARD_REASONS) > 0, seen
    assert sum(seen.values()) - seen["kept"] - sum(seen[r] for r in HARD_REASONS) < 40, seen
