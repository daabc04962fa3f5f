"""Exact and near-duplicate removal, and a cap on the lower lines kept per upper line.

Near-duplicate, by rule (MinHash over ~1M short pairs does not fit the 60 s budget, and
for lines of 5-32 characters two simple rules catch what matters):
- ``near_punct``: the same pair once punctuation is removed (春风，得意 / 春风、得意);
- ``near_one_char``: the same upper line and lower lines of the same length that differ
  in exactly one character (a typo or a variant reading), for lines of at least
  ``one_char_min_len`` characters; shorter lines differ legitimately by one character.
Distinct lower lines for one upper line are valid data and are kept up to a cap.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from operator import itemgetter

from data.chars import CharBatch
from data.text import PUNCTUATION

Pair = tuple[str, str]
_PUNCT_RE = re.compile("[" + "".join(re.escape(ch) for ch in sorted(PUNCTUATION)) + "]")
EXAMPLES = 5


def _one_apart(a: str, b: str) -> bool:
    """Two strings of equal length (2+) that differ in exactly one position."""
    if a[0] != b[0] and a[-1] != b[-1]:
        return False  # two differences already: most pairs of lower lines end here
    return sum(map(operator.ne, a, b)) == 1


@dataclass
class Deduper:
    max_lowers_per_upper: int = 10
    near_dup: bool = True
    one_char_min_len: int = 5
    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[list[str]]] = field(default_factory=lambda: defaultdict(list))

    def _drop(self, reason: str, pair: Pair, kept_as: Pair | None = None) -> None:
        self.counts[reason] += 1
        if len(self.examples[reason]) < EXAMPLES:
            self.examples[reason].append([*pair, *(kept_as or ())])

    def _near_punct(self, unique: dict[Pair, None]) -> None:
        """Drop punctuated pairs equal to another pair once punctuation is removed."""
        pairs = list(unique)
        found = CharBatch(list(map(itemgetter(0), pairs))).lines_with(PUNCTUATION).tolist()
        punctuated = [pairs[i] for i in found]
        if not punctuated:
            return
        # One regex pass over all punctuated lines joined: C speed, no per-line call.
        stripped = _PUNCT_RE.sub("", "\n".join(map("\t".join, punctuated))).split("\n")
        first: dict[Pair, Pair] = {}
        for pair, plain in zip(punctuated, stripped, strict=True):
            upper, _, lower = plain.partition("\t")
            key = (upper, lower)
            kept_as = key if key in unique else first.setdefault(key, pair)
            if kept_as is not pair:
                self._drop("near_punct", pair, kept_as)
                del unique[pair]

    def _group(self, upper: str, lowers: list[str]) -> list[str]:
        """One upper line's lower lines, without one-character variants, capped."""
        kept: list[str] = []
        for lower in lowers:
            if len(kept) >= self.max_lowers_per_upper:
                self._drop("over_cap", (upper, lower))
                continue
            if self.near_dup and len(lower) >= self.one_char_min_len:
                # At most the cap's worth of comparisons per line: cheap and exact.
                match = next((k for k in kept if len(k) == len(lower) and _one_apart(k, lower)), None)
                if match is not None:
                    self._drop("near_one_char", (upper, lower), (upper, match))
                    continue
            kept.append(lower)
        return kept

    def _exact_examples(self, pairs: list[Pair]) -> None:
        """A few exact duplicates for the report (stops at the EXAMPLES-th)."""
        seen: set[Pair] = set()
        for pair in pairs:
            if pair in seen:
                self.examples["exact"].append(list(pair))
                if len(self.examples["exact"]) >= EXAMPLES:
                    return
            seen.add(pair)

    @staticmethod
    def reasons() -> tuple[str, ...]:
        return ("exact", "near_punct", "near_one_char", "over_cap")

    def __call__(self, pairs: list[Pair]) -> list[Pair]:
        """The pairs without duplicates, in their first order."""
        unique = dict.fromkeys(pairs)  # an ordered set, built in C
        self.counts["exact"] += len(pairs) - len(unique)
        if len(unique) < len(pairs):
            self._exact_examples(pairs)
        if self.near_dup:
            self._near_punct(unique)
        per_upper = Counter(map(itemgetter(0), unique))
        shared = {u for u, n in per_upper.items() if n > 1}
        groups: dict[str, list[str]] = defaultdict(list)
        for upper, lower in itertools.compress(unique, map(shared.__contains__, map(itemgetter(0), unique))):
            groups[upper].append(lower)
        for upper, lowers in groups.items():
            kept = set(self._group(upper, lowers))
            for lower in lowers:
                if lower not in kept:
                    del unique[(upper, lower)]
        return list(unique)
