"""Pair filters: each returns the reason a pair is dropped, or None to keep it."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from data.sensitive import SensitiveFilter
from data.text import PUNCTUATION, is_han, is_punct
from model.rules import punctuation_mirrored

REASONS = (
    "too_short",
    "too_long",
    "unequal_length",
    "foreign_chars",
    "punct_not_mirrored",
    "same_lines",
    "sensitive",
)

_PUNCT_RE = re.compile("[" + "".join(re.escape(ch) for ch in sorted(PUNCTUATION)) + "]")


@dataclass
class PairFilter:
    """Applies the filters in order and counts, per reason, the pairs dropped."""

    min_len: int = 2
    max_len: int = 32
    sensitive: SensitiveFilter | None = None
    counts: Counter[str] = field(default_factory=Counter)
    sensitive_hits: Counter[str] = field(default_factory=Counter)
    _allowed: dict[str, bool] = field(default_factory=dict)

    def _char_ok(self, ch: str) -> bool:
        ok = self._allowed.get(ch)
        if ok is None:
            ok = self._allowed[ch] = is_han(ch) or is_punct(ch)
        return ok

    def reason(self, upper: str, lower: str) -> str | None:
        n = len(upper)
        if min(n, len(lower)) < self.min_len:
            return "too_short"
        if max(n, len(lower)) > self.max_len:
            return "too_long"
        if n != len(lower):
            return "unequal_length"
        if not all(map(self._char_ok, upper + lower)):
            return "foreign_chars"
        if (_PUNCT_RE.search(upper) or _PUNCT_RE.search(lower)) and not punctuation_mirrored(upper, lower):
            return "punct_not_mirrored"
        if upper == lower:
            return "same_lines"
        if self.sensitive is not None:
            hits = self.sensitive.hits(upper + "\t" + lower)
            if hits:
                self.sensitive_hits.update(hits)
                return "sensitive"
        return None

    @staticmethod
    def reasons() -> tuple[str, ...]:
        return REASONS

    def keep(self, upper: str, lower: str) -> bool:
        why = self.reason(upper, lower)
        if why is None:
            return True
        self.counts[why] += 1
        return False
