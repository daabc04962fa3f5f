"""The shortlist: per request, the tokens the output layer scores (the proposer's top
tokens among those the rules allow, plus required characters and EOS)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from data.vocab import PAD_ID
from model.decoding.arrays import log_softmax
from model.decoding.vocab_tables import NEG_INF


@dataclass(frozen=True)
class Shortlist:
    """Per request, the tokens the output layer scores: ids (N, M) (PAD where a request has
    fewer) and their rows of the output layer, transposed, weight (N, d, M). Log-probabilities
    are normalised over the shortlist: the mass left out (the tokens no position's proposer
    ranked high) is taken as nothing."""

    ids: np.ndarray
    weight: np.ndarray

    @classmethod
    def build(cls, ids: list[list[int]], head: np.ndarray) -> Shortlist:
        """From lists of ids and the output layer's weight (V, d)."""
        return cls.from_rows([np.array(row, dtype=np.int64) for row in ids], np.ascontiguousarray(head.T))

    @classmethod
    def from_rows(cls, rows: list[np.ndarray], head_t: np.ndarray) -> Shortlist:
        """From each request's ids (M_n,) and the output layer's weight, transposed (d, V)."""
        width = max(len(row) for row in rows)
        padded = np.full((len(rows), width), PAD_ID, dtype=np.int64)  # (N, M)
        for n, row in enumerate(rows):
            padded[n, : len(row)] = row
        d = head_t.shape[0]
        weight = head_t[:, padded.reshape(-1)].reshape(d, len(rows), width).transpose(1, 0, 2)
        return cls(padded, np.ascontiguousarray(weight, dtype=np.float32))

    @functools.cached_property
    def listed(self) -> tuple[np.ndarray, np.ndarray]:
        """The output layer's listed rows for a step that scores them itself
        (``step_log_probs``): weight (N, d, M), and bias (N, 1, M), -inf at the padding."""
        bias = np.where(self.ids == PAD_ID, np.float32(NEG_INF), np.float32(0))[:, None]
        return self.weight, bias

    def log_probs(self, states: np.ndarray) -> np.ndarray:
        """states (B, d) of B = N*width rows -> log-probabilities (B, M) of the listed
        tokens, -inf at the padding."""
        n, _, m = self.weight.shape
        width = states.shape[0] // n
        logits = np.matmul(states.astype(np.float32).reshape(n, width, -1), self.weight)  # (N, width, M)
        logits += self.listed[1]
        return log_softmax(logits).reshape(n * width, m)

    def pick(self, scores: np.ndarray) -> np.ndarray:
        """scores (B, V) of B = N*width rows -> their listed columns (B, M)."""
        n, m = self.ids.shape
        return self.gather(scores.reshape(n, -1, scores.shape[1])).reshape(-1, m)

    def gather(self, table: np.ndarray) -> np.ndarray:
        """Rows of each request over the vocabulary, (N, R, V), e.g. the rule table (N, L+1, V)
        -> their listed columns (N, R, M) (-inf at the padding: PAD is never a token)."""
        return np.take_along_axis(table, self.ids[:, None, :], 2)

    def token_ids(self, columns: np.ndarray) -> np.ndarray:
        """columns (N, X) of each request's list -> the token ids there (N, X)."""
        return np.take_along_axis(self.ids, columns, 1)

    def columns(self, size: int) -> np.ndarray:
        """(N, V): each token's column in its request's list, -1 off the list."""
        n, m = self.ids.shape
        col = np.full((n, size), -1, dtype=np.int64)
        np.put_along_axis(col, self.ids, np.broadcast_to(np.arange(m), (n, m)), 1)
        col[:, PAD_ID] = -1  # (the padding of shorter lists)
        return col
