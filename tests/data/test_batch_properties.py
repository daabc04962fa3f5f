"""The numpy batch paths give exactly the verdicts of the plain per-line code (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from data.dedup import Deduper
from data.filters import PairFilter
from data.normalize import Normalizer
from data.sensitive import SensitiveFilter

# Han (simplified and traditional), full-width and ASCII punctuation, spaces, Latin,
# full-width Latin, a compatibility ideograph: every branch of every check.
ALPHABET = "春风月经岁过坏蛋後來乾坤，。、！,.!- \u3000aＡ\uf900"
lines = st.text(alphabet=ALPHABET, max_size=8)
pair_lists = st.lists(st.tuples(lines, lines), max_size=25)


@settings(max_examples=60, deadline=None)
@given(st.lists(lines, max_size=20))
def test_normalise_batch_equals_per_line(batch: list[str]) -> None:
    one, many = Normalizer(), Normalizer()
    assert many.normalize_many(batch) == [one(x) for x in batch]
    assert many.counts == one.counts


@settings(max_examples=60, deadline=None)
@given(pair_lists)
def test_filter_batch_equals_per_pair(pairs: list[tuple[str, str]]) -> None:
    def make() -> PairFilter:
        return PairFilter(
            min_len=2, max_len=6, sensitive=SensitiveFilter(["月经", "坏蛋", "乾"], ["岁月经过"])
        )

    one, batch = make(), make()
    assert batch.keep_batch(pairs) == [p for p in pairs if one.keep(*p)]
    assert batch.counts == one.counts
    assert batch.sensitive_hits == one.sensitive_hits


@settings(max_examples=60, deadline=None)
@given(pair_lists)
def test_dedup_keeps_first_of_each_pair_and_never_invents(pairs: list[tuple[str, str]]) -> None:
    d = Deduper(max_lowers_per_upper=3)
    out = d(pairs)
    assert len(set(out)) == len(out)
    assert set(out) <= set(pairs)
    assert len(pairs) - len(out) == sum(d.counts.values())
    first_seen = list(dict.fromkeys(pairs))
    assert out == [p for p in first_seen if p in set(out)]
