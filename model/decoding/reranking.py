"""The reranker: the decoder's candidates for a line ordered again, by the search's rank score
plus a weight (``DecodeOptions.rerank_weight``, by default the bundle's) times a scorer's
opinion of how much each (upper, lower) pair reads like a couplet people wrote
(model/net/scorer.py; trained on the human lower lines against the model's own n-best,
model/training/rerank.py).

The scorer runs as one ONNX graph in fp32 on one thread (``SCORER_GRAPHS``), cached like the
models' graphs (model/decoding/onnx_graphs.py; exported by model/export/engines.py's
``reranker_of``), so a process whose graph is cached needs no
PyTorch. It reads the lines as the answer gives them (the marks the search put back included),
as its training read them; the candidates of one answer have one length, so a call is one
batch without padding (model/export/onnx_export.py's ``_Scorer``). Judged blind before it
shipped: docs/EXPERIMENTS.md §44-45.

Shapes: K candidates, S places.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from data.vocab import Vocab
from model.decoding.answer import FORWARD, Answer
from model.decoding.onnx_graphs import Graph, GraphCache
from model.spec.config import ModelConfig
from model.spec.scorer_input import pair_ids

SCORER_GRAPHS = ("score",)
DEFAULT_WEIGHT = 0.05  # a scorer's weight where its bundle names none (session 33's trial: §44)


class Reranker:
    """A scorer's graph and the vocabulary it reads: ``scores`` of pairs, ``rerank`` of an answer;
    ``weight``: its score's weight in a candidate's rank when a request names none."""

    def __init__(self, graph: Graph, cfg: ModelConfig, vocab: Vocab, weight: float = DEFAULT_WEIGHT) -> None:
        if cfg.kind != "scorer":
            raise ValueError(f"a reranker runs a scorer, not a model of kind {cfg.kind!r}")
        if cfg.vocab_size < len(vocab):
            raise ValueError(f"the scorer has {cfg.vocab_size} ids but the vocabulary {len(vocab)}")
        self.graph, self.cfg, self.vocab, self.weight = graph, cfg, vocab, weight

    @classmethod
    def cached(
        cls,
        cfg: ModelConfig,
        key: str,
        cache_dir: Path,
        vocab: Vocab,
        weight: float = DEFAULT_WEIGHT,
        threads: int = 1,
    ) -> Reranker | None:
        """The reranker from its cached graph alone (no PyTorch), or None when it is not cached."""
        graph = Graph.from_cache(GraphCache(cache_dir, key), SCORER_GRAPHS[0], False, threads)
        return None if graph is None else cls(graph, cfg, vocab, weight)

    def scores(self, upper: str, lowers: Sequence[str]) -> np.ndarray:
        """The scorer's opinion of (upper, lower) for each of ``lowers``: (K,) float32, higher
        reads more like a human couplet. Lines it cannot read (no place in common) get -inf. The
        graph takes rows of one length (the candidates of an answer have one): lines of another
        length are scored in a call of their own."""
        out = np.full(len(lowers), -np.inf, np.float32)
        by_length: dict[int, list[int]] = {}
        ids = [pair_ids(self.vocab, upper, lower, self.cfg.max_len) for lower in lowers]
        for k, (first, _) in enumerate(ids):
            if first:
                by_length.setdefault(len(first), []).append(k)
        for rows in by_length.values():
            uppers = np.array([ids[k][0] for k in rows], np.int64)
            lowers_ = np.array([ids[k][1] for k in rows], np.int64)
            (scores,) = self.graph.arrays(uppers, lowers_)
            out[rows] = scores
        return out

    def rerank(self, answer: Answer, weight: float | None = None) -> Answer:
        """``answer`` with each candidate's ``rerank_score`` set and ``weight`` (None: the reranker's
        own) times it added to its ``rank_score``, the candidates best first by that. Answers in the
        other direction (the scorer reads upper lines against lower ones) and a weight of 0 are
        returned as they are."""
        weight = self.weight if weight is None else weight
        if not weight or answer.direction != FORWARD or answer.upper is None or not answer.candidates:
            return answer
        scores = self.scores(answer.upper, [c.text for c in answer.candidates])
        rescored = [
            dataclasses.replace(c, rank_score=c.rank_score + weight * float(s), rerank_score=float(s))
            for c, s in zip(answer.candidates, scores, strict=True)
            if np.isfinite(s)
        ]
        if len(rescored) < len(answer.candidates):  # a line the scorer cannot read keeps the search's order
            return answer
        order = sorted(range(len(rescored)), key=lambda k: -rescored[k].rank_score)
        return dataclasses.replace(answer, candidates=[rescored[k] for k in order])
