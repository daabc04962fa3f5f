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

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from data.text import PUNCTUATION

Pair = tuple[str, str]
_STRIP = str.maketrans(dict.fromkeys(PUNCTUATION))
_HAS_PUNCT = re.compile("[" + "".join(re.escape(ch) for ch in sorted(PUNCTUATION)) + "]")
EXAMPLES = 5


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

    def _first_pass(self, pairs: list[Pair]) -> list[Pair]:
        """Exact duplicates and punctuation-only variants."""
        seen: set[Pair] = set()
        stripped: dict[Pair, Pair] = {}
        out = []
        for pair in pairs:
            if pair in seen:
                self._drop("exact", pair)
                continue
            seen.add(pair)
            if self.near_dup:
                key = pair
                if _HAS_PUNCT.search(pair[0]):
                    key = (pair[0].translate(_STRIP), pair[1].translate(_STRIP))
                    if key in seen:
                        self._drop("near_punct", pair, key)
                        continue
                if key in stripped:
                    self._drop("near_punct", pair, stripped[key])
                    continue
                if key is not pair:
                    stripped[key] = pair
            out.append(pair)
        return out

    def _group(self, upper: str, lowers: list[str]) -> list[str]:
        """One upper line's lower lines, without one-character variants, capped."""
        kept: list[str] = []
        keys: dict[str, str] = {}
        for lower in lowers:
            if len(kept) >= self.max_lowers_per_upper:
                self._drop("over_cap", (upper, lower))
                continue
            if self.near_dup and len(lower) >= self.one_char_min_len:
                variants = [f"{lower[:i]}\0{lower[i + 1 :]}" for i in range(len(lower))]
                match = next((keys[v] for v in variants if v in keys), None)
                if match is not None:
                    self._drop("near_one_char", (upper, lower), (upper, match))
                    continue
                keys.update(dict.fromkeys(variants, lower))
            kept.append(lower)
        return kept

    @staticmethod
    def reasons() -> tuple[str, ...]:
        return ("exact", "near_punct", "near_one_char", "over_cap")

    def __call__(self, pairs: list[Pair]) -> list[Pair]:
        pairs = self._first_pass(pairs)
        groups: dict[str, list[str]] = defaultdict(list)
        for upper, lower in pairs:
            groups[upper].append(lower)
        out: list[Pair] = []
        for upper, lowers in groups.items():
            kept = lowers if len(lowers) == 1 else self._group(upper, lowers)
            out.extend((upper, lower) for lower in kept)
        return out
