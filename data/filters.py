"""Pair filters, each with a counted reason.

The checks that look at every character (foreign characters, punctuation, sensitive
words) first run over the whole batch joined into one string, in C (a regex, an
Aho-Corasick automaton); Python then looks only at the lines they flag.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from data.chars import CharBatch
from data.sensitive import SensitiveFilter
from data.text import PUNCTUATION, is_han, is_punct

Pair = tuple[str, str]
REASONS = (
    "too_short",
    "too_long",
    "unequal_length",
    "foreign_chars",
    "punct_not_mirrored",
    "same_lines",
    "sensitive",
)


class _PunctMask(dict[int, str]):
    """Translate table keeping punctuation and turning every other character into NUL."""

    def __missing__(self, cp: int) -> str:
        value = chr(cp) if is_punct(chr(cp)) else "\0"
        self[cp] = value
        return value


_MASK = _PunctMask()


def punct_mirrored(upper: str, lower: str) -> bool:
    """``model.rules.punctuation_mirrored`` for equal lengths, in C: the punctuation masks match."""
    return upper.translate(_MASK) == lower.translate(_MASK)


@dataclass
class PairFilter:
    """Applies the filters in order and counts, per reason, the pairs dropped."""

    min_len: int = 2
    max_len: int = 32
    sensitive: SensitiveFilter | None = None
    counts: Counter[str] = field(default_factory=Counter)
    sensitive_hits: Counter[str] = field(default_factory=Counter)

    @staticmethod
    def reasons() -> tuple[str, ...]:
        return REASONS

    def reason(self, upper: str, lower: str, flags: frozenset[str] | None = None) -> str | None:
        """Why the pair is dropped, or None. ``flags`` (from a batch scan) skips re-scanning."""
        n = len(upper)
        if min(n, len(lower)) < self.min_len:
            return "too_short"
        if max(n, len(lower)) > self.max_len:
            return "too_long"
        if n != len(lower):
            return "unequal_length"
        text = upper + "\t" + lower
        if flags is None:
            flags = self._scan(text)
        if "foreign" in flags:
            return "foreign_chars"
        if "punct" in flags and not punct_mirrored(upper, lower):
            return "punct_not_mirrored"
        if upper == lower:
            return "same_lines"
        if "sensitive" in flags and self.sensitive is not None:
            hits = self.sensitive.hits(text)
            if hits:
                self.sensitive_hits.update(hits)
                return "sensitive"
        return None

    def _scan(self, text: str) -> frozenset[str]:
        found = {
            "foreign": any(not (is_han(ch) or is_punct(ch)) for ch in text if ch != "\t"),
            "punct": any(is_punct(ch) for ch in text),
            "sensitive": self.sensitive is not None and bool(self.sensitive.hits(text)),
        }
        return frozenset(k for k, v in found.items() if v)

    def _scan_batch(self, batch: CharBatch) -> list[tuple[str, set[int]]]:
        foreign = [ch for ch in batch.distinct() if ch != "\t" and not (is_han(ch) or is_punct(ch))]
        scans = [("punct", batch.lines_with(PUNCTUATION)), ("foreign", batch.lines_with(foreign))]
        if self.sensitive is not None:
            scans.append(("sensitive", self.sensitive.flag_lines(batch)))
        return [(name, set(lines.tolist())) for name, lines in scans]

    def keep_batch(self, pairs: list[Pair]) -> list[Pair]:
        """The pairs that pass every filter, in order; the dropped ones are counted."""
        scans = self._scan_batch(CharBatch(list(map("\t".join, pairs))))
        flagged = set().union(*(lines for _, lines in scans))
        none: frozenset[str] = frozenset()
        kept = []
        for i, (upper, lower) in enumerate(pairs):
            flags = frozenset(k for k, lines in scans if i in lines) if i in flagged else none
            why = self.reason(upper, lower, flags)
            if why is None:
                kept.append((upper, lower))
            else:
                self.counts[why] += 1
        return kept
