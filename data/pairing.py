"""How strongly two characters pair at the same position of a couplet: a table counted from
training pairs, which the decoder adds to its scores to prefer 工对 (天 → 地, 风 → 雨) over
characters that fit anywhere.

For an upper character ``u`` and a lower character ``l`` at the same position of the training
pairs, with ``n`` the times they stand there together and ``E = n(u) n(l) / N`` the times
chance would put them there (``n(u)``, ``n(l)``: each one's count at any position, ``N``: all
aligned positions), the score is ``log((n + K) / (E + K))`` clipped to ``MAX_SCORE``: about
``log(n / E)`` for well-attested pairs and near 0 for rare ones (the ``K`` pseudo-counts keep a
pair seen twice from scoring like 天 → 地). Only scores above ``FLOOR`` are kept; a pair not in
the table scores 0. It is the position-wise pointwise mutual information, so adding it to the
model's log-probability is also a penalty on generic characters (Li et al., 2016, "A
Diversity-Promoting Objective Function for Neural Conversation Models", take the same
difference for whole lines). docs/EXPERIMENTS.md §23 measures it blind.

The table is keyed by characters (Unicode code points), not token ids, so it belongs to the
pairs it was counted from and serves any vocabulary; ``PairingTable.for_vocab`` turns it into
token ids for one model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data.text import PUNCTUATION

PSEUDO_COUNT = 5.0  # K above
FLOOR = 0.3  # smaller scores are not kept: 336k of the 1.04M pairs above 0.1 (1.2 MB against 3.5)
MAX_SCORE = 3.0
FORMAT = 1


@dataclass(frozen=True)
class PairingTable:
    """Sorted upper code points, CSR row pointers into the lower code points and their scores."""

    upper: np.ndarray  # (U,) uint32, sorted
    indptr: np.ndarray  # (U + 1,) int64
    lower: np.ndarray  # (P,) uint32
    score: np.ndarray  # (P,) float16

    @classmethod
    def count(cls, pairs: Iterable[tuple[str, str]]) -> PairingTable:
        """The table of ``pairs`` (upper, lower); pairs of unequal length, punctuation and a
        character facing itself are not counted."""
        uppers, lowers = [], []
        for upper, lower in pairs:
            if len(upper) == len(lower):
                uppers.append(upper)
                lowers.append(lower)
        u = np.frombuffer("".join(uppers).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        low = np.frombuffer("".join(lowers).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        punct = np.array(sorted(ord(c) for c in PUNCTUATION), dtype=np.uint64)
        keep = (u != low) & ~np.isin(u, punct) & ~np.isin(low, punct)
        keys, together = np.unique((u[keep] << np.uint64(32)) | low[keep], return_counts=True)
        pu, pl = keys >> np.uint64(32), keys & np.uint64(0xFFFFFFFF)
        total = together.sum()
        _, uinv = np.unique(pu, return_inverse=True)
        _, linv = np.unique(pl, return_inverse=True)
        expected = np.bincount(uinv, together)[uinv] * np.bincount(linv, together)[linv] / max(1, total)
        scores = np.minimum(MAX_SCORE, np.log((together + PSEUDO_COUNT) / (expected + PSEUDO_COUNT)))
        kept = scores > FLOOR  # keys are sorted by upper, then lower code point
        pu, pl, scores = pu[kept], pl[kept], scores[kept]
        heads, starts = np.unique(pu, return_index=True)
        indptr = np.append(starts, len(pu)).astype(np.int64)
        return cls(heads.astype(np.uint32), indptr, pl.astype(np.uint32), scores.astype(np.float16))

    def __len__(self) -> int:
        return len(self.lower)

    def swapped(self) -> PairingTable:
        """The table read the other way, by the lower character (下联求上联: the line given is
        the lower one); the scores are the same, log(observed / expected) being symmetric."""
        rows = np.repeat(self.upper.astype(np.uint64), np.diff(self.indptr))
        keys = (self.lower.astype(np.uint64) << np.uint64(32)) | rows
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        heads, starts = np.unique(keys >> np.uint64(32), return_index=True)
        indptr = np.append(starts, len(keys)).astype(np.int64)
        lower = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        return PairingTable(heads.astype(np.uint32), indptr, lower, self.score[order])

    def get(self, upper: str, lower: str) -> float:
        """The score of ``lower`` facing ``upper`` (0 when the pair is not in the table)."""
        i = int(np.searchsorted(self.upper, ord(upper)))
        if i == len(self.upper) or self.upper[i] != ord(upper):
            return 0.0
        lo, hi = int(self.indptr[i]), int(self.indptr[i + 1])
        j = lo + int(np.searchsorted(self.lower[lo:hi], ord(lower)))
        return float(self.score[j]) if j < hi and self.lower[j] == ord(lower) else 0.0

    def line_score(self, upper: str, lower: str) -> float:
        """The mean score over the positions of a pair of equal length."""
        return sum(self.get(u, low) for u, low in zip(upper, lower, strict=True)) / max(1, len(upper))

    def save(self, path: str | os.PathLike[str]) -> None:
        with open(path, "wb") as f:
            arrays: dict[str, Any] = {"upper": self.upper, "indptr": self.indptr}
            arrays |= {"lower": self.lower, "score": self.score}
            np.savez_compressed(f, format=np.array(FORMAT), **arrays)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PairingTable:
        """Raises ValueError when the file is not a pairing table (or one of another format)."""
        try:
            with np.load(Path(path), allow_pickle=False) as z:
                if int(z["format"]) != FORMAT:
                    raise ValueError(f"{path}: pairing table format {int(z['format'])}, expected {FORMAT}")
                table = cls(z["upper"], z["indptr"], z["lower"], z["score"])
        except (OSError, KeyError, EOFError, ValueError) as e:
            raise ValueError(f"{path}: not a pairing table ({e})") from e
        table.check()
        return table

    def check(self) -> None:
        u, p = len(self.upper), len(self.lower)
        if self.indptr.shape != (u + 1,) or self.score.shape != (p,) or int(self.indptr[-1]) != p:
            raise ValueError("pairing table: inconsistent array shapes")
        if u and (np.diff(self.indptr) < 0).any():
            raise ValueError("pairing table: row pointers go backwards")
        if not np.isfinite(self.score.astype(np.float32)).all():
            raise ValueError("pairing table: a score is not finite")

    def for_vocab(self, pieces: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The table in one vocabulary's token ids (``pieces[i]``: token i's text): CSR arrays
        indptr (V + 1,), columns and scores, for the upper tokens; pairs with a character the
        vocabulary lacks are left out."""
        ids = {ord(p): i for i, p in enumerate(pieces) if len(p) == 1}
        empty = (np.zeros(0, np.int64), np.zeros(0, np.float32))
        rows: list[tuple[np.ndarray, np.ndarray]] = [empty] * len(pieces)
        for k, u in enumerate(self.upper.tolist()):
            token = ids.get(u)
            if token is None:
                continue
            lo, hi = int(self.indptr[k]), int(self.indptr[k + 1])
            cols = np.array([ids.get(c, -1) for c in self.lower[lo:hi].tolist()], dtype=np.int64)
            keep = cols >= 0
            rows[token] = (cols[keep], self.score[lo:hi][keep].astype(np.float32))
        indptr = np.zeros(len(pieces) + 1, dtype=np.int64)
        np.cumsum([len(c) for c, _ in rows], out=indptr[1:])
        cols = np.concatenate([c for c, _ in rows]) if rows else np.zeros(0, np.int64)
        vals = np.concatenate([v for _, v in rows]) if rows else np.zeros(0, np.float32)
        return indptr, cols, vals
