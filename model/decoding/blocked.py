"""The sensitive-word filter inside the search: no beam may complete a listed word.

Filtering finished lines after the search emptied answers (声声悦耳 → 20 candidates, all
holding 色色); as a step rule the search never takes the character that completes a listed
word, so it goes on to other lines and the answer keeps its size. Boundaries come from the
upper line (data/segment.py): a listed word of two or more characters is blocked only where
it would start and end on word boundaries of the upper line, which the lower line mirrors
word for word (水上/吟诗 lets 林下作歌 through, 下作 starting inside 林下).

:class:`BlockedWords` is the list as a table of token ids: for each word, a key of all its
characters but the last (the word's length and its ids, hashed) and the id of its last
character. A bundle carries it as ``blocked.npz``, built when the bundle is written, from
the word list less what the allow-list switches off, so the bundle still holds no offensive
text (a key cannot be read back; a last character alone says little). At each step the rule
bans the one-character words in one fill, hashes each beam's last 1, 2 ... characters, looks
the keys up (a dict of the table's keys: a few rows, so Python beats tensor operations) and
sets ``-inf`` on the last characters found. Words with a character outside the vocabulary
are left out: the model cannot write them.

Shapes: N requests, B rows (beams), L line length, V vocabulary (or M shortlist columns).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from data.segment import counts_as_word
from model.decoding.plan import ConstraintError, Plan
from model.decoding.score_rules import Step, StepRuleBase
from model.decoding.vocab_tables import NEG_INF

BLOCKED_FILE = "blocked.npz"
# two 31-bit polynomial hashes (products stay below 2**62: exact in int64)
_MOD = (2147483647, 2147483629)
_MUL = (1000003, 999983)


def word_keys(ids: np.ndarray, length: int) -> np.ndarray:
    """ids (..., m) -> (...,) int64 keys of these m ids as the head of a ``length``-long word."""
    h1 = np.full(ids.shape[:-1], length, dtype=np.int64)
    h2 = h1.copy()
    for j in range(ids.shape[-1]):
        t = ids[..., j].astype(np.int64) + 1
        h1 = (h1 * _MUL[0] + t) % _MOD[0]
        h2 = (h2 * _MUL[1] + t) % _MOD[1]
    return h1 * (1 << 31) + h2


def key_of(head: Sequence[int], length: int) -> int:
    """:func:`word_keys` of one head, in Python integers (for a few rows, faster than tensors)."""
    h1 = h2 = length
    for t in head:
        h1 = (h1 * _MUL[0] + t + 1) % _MOD[0]
        h2 = (h2 * _MUL[1] + t + 1) % _MOD[1]
    return h1 * (1 << 31) + h2


class BlockedWords:
    """Listed words as (key of the head, id of the last character), sorted by key."""

    def __init__(self, keys: np.ndarray, last: np.ndarray, lengths: Iterable[int], vocab_size: int) -> None:
        order = np.argsort(keys, kind="stable")
        self.keys = np.ascontiguousarray(keys[order], dtype=np.int64)
        self.last = np.ascontiguousarray(last[order], dtype=np.int64)
        self.lengths = tuple(sorted(set(int(n) for n in lengths)))
        self.vocab_size = int(vocab_size)
        self._full: np.ndarray | None = None  # keys of the whole words, sorted (for ``contains``)
        self._by_key: dict[int, list[int]] | None = None

    @classmethod
    def from_words(cls, words: Iterable[str], pieces: Sequence[str]) -> BlockedWords:
        """The words (already normalised, as the filter holds them) in the ids of ``pieces``."""
        index = {p: i for i, p in enumerate(pieces) if len(p) == 1}
        keys, last, lengths = [], [], set()
        for word in sorted(set(words)):  # (a set's order differs between runs; the file should not)
            ids = [index.get(ch, -1) for ch in word]
            if not word or min(ids) < 0:
                continue
            keys.append(key_of(ids[:-1], len(ids)))
            last.append(ids[-1])
            lengths.add(len(ids))
        return cls(np.array(keys, dtype=np.int64), np.array(last, dtype=np.int64), lengths, len(pieces))

    def __len__(self) -> int:
        return len(self.keys)

    def merged(self, other: BlockedWords) -> BlockedWords:
        if other.vocab_size != self.vocab_size:
            raise ValueError("blocked-word tables of different vocabularies")
        return BlockedWords(
            np.concatenate([self.keys, other.keys]),
            np.concatenate([self.last, other.last]),
            self.lengths + other.lengths,
            self.vocab_size,
        )

    def save(self, path: str | Path) -> None:
        with open(path, "wb") as f:
            np.savez_compressed(
                f,
                keys=self.keys,
                last=self.last,
                lengths=np.array(self.lengths, dtype=np.int64),
                vocab_size=np.array(self.vocab_size),
            )

    @classmethod
    def load(cls, path: str | Path) -> BlockedWords:
        with np.load(path, allow_pickle=False) as z:
            return cls(z["keys"], z["last"], z["lengths"].tolist(), int(z["vocab_size"]))

    @property
    def by_key(self) -> dict[int, list[int]]:
        """head key -> the last characters that complete a listed word after it."""
        if self._by_key is None:
            table: dict[int, list[int]] = {}
            for key, last in zip(self.keys.tolist(), self.last.tolist(), strict=True):
                table.setdefault(key, []).append(last)
            self._by_key = table
        return self._by_key

    @property
    def singles(self) -> list[int]:
        """The listed words of one character (banned everywhere)."""
        return self.by_key.get(key_of((), 1), [])

    def contains(self, ids: np.ndarray, length: int) -> np.ndarray:
        """ids (..., length) -> (...) whether each row of ids is a listed word."""
        if self._full is None:
            h1, h2 = self.keys >> 31, self.keys & ((1 << 31) - 1)
            t = self.last + 1
            full = ((h1 * _MUL[0] + t) % _MOD[0]) * (1 << 31) + (h2 * _MUL[1] + t) % _MOD[1]
            self._full = np.sort(full)
        query = word_keys(ids, length)
        if not len(self._full):
            return np.zeros(query.shape, dtype=bool)
        at = np.minimum(np.searchsorted(self._full, query), len(self._full) - 1)
        return self._full[at] == query

    def check_plan(self, plan: Plan) -> None:
        """Raise ConstraintError when the user's own constraints (locks, and the repeats and
        punctuation they bring) spell a listed word where it would count."""
        if not plan.rules or not len(self):
            return
        forced = plan.lock  # (the plan spreads each lock over its repeat group)
        bounds = plan.bounds()
        for n in self.lengths:
            for start in range(len(forced) - n + 1):
                window = forced[start : start + n]
                if min(window) < 0 or not counts_as_word(bounds, start, n):
                    continue
                if window[-1] in self.by_key.get(key_of(window[:-1], n), ()):
                    where = f"第{start + 1}字" if n == 1 else f"第{start + 1}至{start + n}字"
                    at = f"position {start + 1}" if n == 1 else f"positions {start + 1}-{start + n}"
                    raise ConstraintError(
                        "sensitive",
                        f"锁定的字在{where}组成了不宜的词，请换字",
                        f"the locked characters at {at} spell a word the filter withholds; "
                        "choose other characters",
                    )


class NoBlockedWords(StepRuleBase):
    """Step rule: a beam may not take the character that completes a listed word where that
    word would start and end on the upper line's word boundaries.

    Most words complete at the position being chosen, all earlier characters in the beam's
    prefix (one dict lookup per row and word length). A choice can also complete words further on,
    where every later character is already decided: the upper line's repeats (声声 makes the
    lower line's character at both places that of its first 声, so 色 would make 色色 there)
    and the user's locks after this position. Those windows are found per request when the
    rule is built and checked against every token at once."""

    def __init__(self, plans: Sequence[Plan], blocked: BlockedWords) -> None:
        self.blocked = blocked
        self.length = len(plans[0].upper)
        self.multi = [k for k in blocked.lengths if k > 1]
        self.singles = np.array(blocked.singles, dtype=np.int64)
        # counts[n][e][k]: a word of k characters ending at position e of request n counts
        self.counts: list[list[list[bool]]] = []
        self.ahead: list[dict[int, list[list[tuple[str, int]]]]] = []
        longest = max(blocked.lengths, default=0)
        for plan in plans:
            bounds = plan.bounds() if plan.rules else None
            self.counts.append(
                [
                    [k <= e + 1 and counts_as_word(bounds, e - k + 1, k) for k in range(longest + 1)]
                    for e in range(self.length)
                ]
            )
            self.ahead.append(_windows_ahead(plan, blocked.lengths, bounds))
        self.columns: np.ndarray | None = None  # (N, M) token of each shortlist column
        self.single_columns: np.ndarray | None = None  # (N, M) the columns holding a listed character

    def __call__(self, scores: np.ndarray, step: Step) -> np.ndarray:
        pos = step.pos
        if pos >= self.length:
            return scores
        if self.columns is None:
            prefix = step.prefix
            if len(self.singles):
                scores[:, self.singles] = NEG_INF
        else:
            prefix = np.take_along_axis(self.columns[step.row], step.prefix, 1)
            if self.single_columns is not None:
                scores[self.single_columns[step.row]] = NEG_INF
        # words that end here: each row's last characters looked up (a few rows: Python is quicker)
        rows: list[int] = []
        toks: list[int] = []
        by_key = self.blocked.by_key
        heads = prefix[:, max(0, pos - max(self.multi, default=1) + 1) : pos].tolist()
        for b, (req, head) in enumerate(zip(step.row.tolist(), heads, strict=True)):
            here = self.counts[req][pos]
            for k in self.multi:
                if k - 1 > pos or not here[k]:
                    continue
                lasts = by_key.get(key_of(head[len(head) - k + 1 :], k))
                if lasts:
                    rows.extend([b] * len(lasts))
                    toks.extend(lasts)
        ahead = [(n, w[pos]) for n, w in enumerate(self.ahead) if pos in w]
        if not rows and not ahead:
            return scores
        if rows:
            r, t = np.array(rows), np.array(toks)
            if self.columns is None:
                scores[r, t] = NEG_INF
            else:
                match = self.columns[step.row[r]] == t[:, None]  # (F, M) the column holding each token
                listed = match.any(1)
                scores[r[listed], match[listed].argmax(1)] = NEG_INF
        for n, windows in ahead:
            rows_n = np.flatnonzero(step.row == n)
            if not len(rows_n):
                continue
            choice = np.arange(scores.shape[1]) if self.columns is None else self.columns[n]  # (V,) or (M,)
            for window in windows:
                ids = np.stack([_slot(kind, at, prefix[rows_n], choice) for kind, at in window], -1)
                bad = self.blocked.contains(ids, len(window))  # (R, V)
                part = scores[rows_n]
                part[bad] = NEG_INF
                scores[rows_n] = part
        return scores

    def on_columns(self, ids: np.ndarray) -> NoBlockedWords:
        out = copy.copy(self)
        out.columns = ids
        out.single_columns = np.isin(ids, self.singles) if len(self.singles) else None
        return out


def _slot(kind: str, at: int, prefix: np.ndarray, choice: np.ndarray) -> np.ndarray:
    """One character of a window ahead, (R, V): the token chosen now, a character of the
    prefix, or a fixed id."""
    rows, width = prefix.shape[0], choice.shape[0]
    if kind == "choice":
        return np.broadcast_to(choice[None, :], (rows, width))
    if kind == "prefix":
        return np.broadcast_to(prefix[:, at][:, None], (rows, width))
    return np.full((rows, width), at, dtype=np.int64)


def _windows_ahead(
    plan: Plan, lengths: Sequence[int], bounds: tuple[bool, ...] | None
) -> dict[int, list[list[tuple[str, int]]]]:
    """position -> the windows that choosing its character completes though they end later:
    each a list of slots (``choice``, the character chosen; ``prefix``, an earlier position's;
    ``fixed``, an id). Windows over punctuation are left out (no word holds a mark)."""
    length = plan.length
    forced = plan.lock  # (the plan spreads each lock over its repeat group)
    head = [src if src >= 0 else i for i, src in enumerate(plan.copy_of)]

    def ready(p: int, pos: int) -> bool:  # p's character is known once ``pos`` is chosen
        return p <= pos or forced[p] >= 0 or head[p] <= pos

    out: dict[int, list[list[tuple[str, int]]]] = {}
    for k in lengths:
        if k == 1:
            continue
        for start in range(length - k + 1):
            span = range(start, start + k)
            if any(plan.punct[p] >= 0 for p in span) or not counts_as_word(bounds, start, k):
                continue
            if all(forced[p] >= 0 for p in span):
                continue  # the user's own: check_plan
            # the step that completes it, if that is before its last position
            pos = next(q for q in range(length) if all(ready(p, q) for p in span))
            if pos >= start + k - 1:
                continue  # it completes at its own end: the plain lookup
            slots: list[tuple[str, int]] = []
            for p in span:
                if p == pos or (head[p] == pos and forced[p] < 0):
                    slots.append(("choice", 0))
                elif forced[p] >= 0:
                    slots.append(("fixed", forced[p]))
                else:
                    slots.append(("prefix", head[p]))
            if any(kind == "choice" for kind, _ in slots):
                out.setdefault(pos, []).append(slots)
    return out
