"""The tagger's decoding steps: its one pass gives a distribution at every position (the
lattice), so a step only reads the row of its position; a beam's earlier choices do not
matter. Shared by both engines (the ONNX one and the PyTorch adapter): the pass is theirs,
the steps are these.

Shapes: N requests, B beam rows, S source length, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from data.vocab import EOS_ID, PAD_ID
from model.decoding.arrays import log_softmax
from model.spec.capabilities import LOG_PROBS


@dataclass
class LatticeCache:
    """The per-request log-probabilities (N, S, V) and the request of each beam row (B,)."""

    logp: np.ndarray
    row: np.ndarray
    lengths: np.ndarray  # (N,) real characters of each request's source


class LatticeSteps:
    """The decoding protocol's steps over a tagger's lattice (``LOG_PROBS``: each step gives
    log-probabilities). Its owner supplies ``logits`` (the logits (N, S, V) of one pass) and
    ``max_len``."""

    capabilities: ClassVar[frozenset[str]] = frozenset({LOG_PROBS})
    max_len: int

    def logits(self, src: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def encode(self, src: np.ndarray) -> np.ndarray:
        """The lattice: log-probabilities (N, S, V) of the lower character at every position,
        normalised once, here (the search's steps and the decoder's second opinion read it)."""
        return log_softmax(self.logits(src).astype(np.float32, copy=False))

    def new_cache(self, memory: np.ndarray, src: np.ndarray, steps: int = 0) -> LatticeCache:
        """``memory``: the lattice of ``encode``."""
        return LatticeCache(memory, np.arange(memory.shape[0]), (src != PAD_ID).sum(1))

    def step(self, cache: LatticeCache, prev: np.ndarray, pos: int) -> np.ndarray:
        """(B, V) log-probabilities at ``pos`` for each beam row (``prev`` does not matter: the
        positions are independent); past a line's end only the end of sequence."""
        if not 0 <= pos < self.max_len:
            raise ValueError(f"position {pos} outside 0..{self.max_len - 1}")
        _, s, v = cache.logp.shape
        out = cache.logp[cache.row, pos] if pos < s else np.zeros((len(cache.row), v), np.float32)
        ended = cache.lengths[cache.row] <= pos  # (B,)
        if ended.any():
            out = out.copy()
            out[ended] = -1e4
            out[ended, EOS_ID] = 0.0
        return out

    @staticmethod
    def reorder_cache(cache: LatticeCache, index: np.ndarray) -> LatticeCache:
        return LatticeCache(cache.logp, cache.row[index], cache.lengths)
