"""Pair filters, each with a counted reason.

``pair_problem`` judges a pair's form (the crawler's validation uses it too);
``PairFilter.reason`` adds the sensitive words. Both take one pair in plain Python (the
reference, and what tests and callers with a handful of pairs use). ``keep_batch`` gives
the same verdicts for a whole source at once: every check that looks at each character
runs in numpy over the batch joined into one array, and Python visits only the lines a
check flags.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from data.chars import MAX_CODE, CharBatch
from data.rules import no_reuse, punctuation_mirrored, repeats_mirrored
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
    "repeats_not_mirrored",
    "reused_chars",
    "sensitive",
)

EXAMPLES = 20


def _punct_table() -> np.ndarray:
    table = np.zeros(MAX_CODE, dtype=bool)
    table[[ord(c) for c in PUNCTUATION]] = True
    return table


def pair_problem(upper: str, lower: str, min_len: int = 2, max_len: int = 32) -> str | None:
    """Why a pair is not a well-formed couplet (the first failing check, in REASONS order), or
    None. The data stage's filters and the crawler's validation both judge pairs with it."""
    n = len(upper)
    if min(n, len(lower)) < min_len:
        return "too_short"
    if max(n, len(lower)) > max_len:
        return "too_long"
    if n != len(lower):
        return "unequal_length"
    if not all(is_han(ch) or is_punct(ch) for ch in upper + lower):
        return "foreign_chars"
    if not punctuation_mirrored(upper, lower):
        return "punct_not_mirrored"
    if upper == lower:
        return "same_lines"
    # docs/COUPLET_RULES.md's hard rules 3 and 4: the search never breaks them, so the model
    # should not learn from pairs that do (about 0.15% of the training sources)
    if not repeats_mirrored(upper, lower):
        return "repeats_not_mirrored"
    if not no_reuse(upper, lower):
        return "reused_chars"
    return None


@dataclass
class PairFilter:
    """Applies the filters in order and counts, per reason, the pairs dropped."""

    min_len: int = 2
    max_len: int = 32
    sensitive: SensitiveFilter | None = None
    counts: Counter[str] = field(default_factory=Counter)
    sensitive_hits: Counter[str] = field(default_factory=Counter)
    sensitive_examples: list[list[str]] = field(default_factory=list)  # for a person to judge

    @staticmethod
    def reasons() -> tuple[str, ...]:
        return REASONS

    def _sensitive_hits(self, upper: str, lower: str) -> list[str]:
        # The tab keeps a word from matching across the two lines.
        return self.sensitive.hits(upper + "\t" + lower) if self.sensitive is not None else []

    def _record(self, pair: Pair, hits: list[str]) -> None:
        self.sensitive_hits.update(hits)
        if len(self.sensitive_examples) < EXAMPLES:
            self.sensitive_examples.append([*pair, " ".join(hits)])

    def reason(self, upper: str, lower: str) -> str | None:
        """Why the pair is dropped (the first failing check, in REASONS order), or None."""
        problem = pair_problem(upper, lower, self.min_len, self.max_len)
        if problem is None and self._sensitive_hits(upper, lower):
            return "sensitive"
        return problem

    def keep(self, upper: str, lower: str) -> bool:
        why = self.reason(upper, lower)
        if why is not None:
            self.counts[why] += 1
            if why == "sensitive":
                self._record((upper, lower), self._sensitive_hits(upper, lower))
        return why is None

    def _mask(self, n: int, lines: np.ndarray) -> np.ndarray:
        mask = np.zeros(n, dtype=bool)
        mask[lines] = True
        return mask

    def _punct_bad(self, uppers: list[str], lowers: list[str], candidates: np.ndarray) -> np.ndarray:
        """Of the equal-length ``candidates``, those whose punctuation is not mirrored."""
        if not len(candidates):
            return candidates
        up = CharBatch([uppers[i] for i in candidates.tolist()])
        low = CharBatch([lowers[i] for i in candidates.tolist()])
        # Equal lengths line by line, so position k is the same place in both arrays.
        table = _punct_table()
        bad = (table[up.codes] | table[low.codes]) & (up.codes != low.codes)
        return candidates[up.lines_at(np.flatnonzero(bad))]

    def _reason_masks(self, pairs: list[Pair]) -> list[np.ndarray]:
        n = len(pairs)
        uppers, lowers = list(map(itemgetter(0), pairs)), list(map(itemgetter(1), pairs))
        lu = np.fromiter(map(len, uppers), np.int64, n)
        ll = np.fromiter(map(len, lowers), np.int64, n)
        batch = CharBatch(list(map("\t".join, pairs)))
        foreign = [ch for ch in batch.distinct() if ch != "\t" and not (is_han(ch) or is_punct(ch))]
        unequal = lu != ll
        punct_lines = batch.lines_with(PUNCTUATION)
        masks = [
            np.minimum(lu, ll) < self.min_len,
            np.maximum(lu, ll) > self.max_len,
            unequal,
            self._mask(n, batch.lines_with(foreign)),
            self._mask(n, self._punct_bad(uppers, lowers, punct_lines[~unequal[punct_lines]])),
            np.fromiter(map(operator.eq, uppers, lowers), bool, n),
            np.fromiter((not repeats_mirrored(u, w) for u, w in pairs), bool, n),
            np.fromiter((not no_reuse(u, w) for u, w in pairs), bool, n),
        ]
        masks.append(self._sensitive_mask(pairs, batch, np.logical_or.reduce(masks)))
        return masks

    def _sensitive_mask(self, pairs: list[Pair], batch: CharBatch, dropped: np.ndarray) -> np.ndarray:
        mask = np.zeros(len(pairs), dtype=bool)
        if self.sensitive is None:
            return mask
        for i in self.sensitive.flag_lines(batch).tolist():
            if not dropped[i]:
                hits = self._sensitive_hits(*pairs[i])
                if hits:
                    mask[i] = True
                    self._record(pairs[i], hits)
        return mask

    def keep_batch(self, pairs: list[Pair]) -> list[Pair]:
        """The pairs that pass every filter, in order; the dropped ones are counted."""
        if not pairs:
            return []
        masks = np.stack(self._reason_masks(pairs))  # (reasons, pairs)
        dropped = np.asarray(masks.any(axis=0))
        first = masks.argmax(axis=0)[dropped]
        for idx, count in enumerate(np.bincount(first, minlength=len(REASONS)).tolist()):
            if count:
                self.counts[REASONS[idx]] += count
        keep: list[bool] = (~dropped).tolist()
        return list(itertools.compress(pairs, keep))
