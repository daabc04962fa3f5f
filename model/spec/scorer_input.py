"""How the reranker's scorer (model/net/scorer.py) reads a pair, without PyTorch: training
(model/training/rerank.py) and the decoder (model/decoding/reranking.py) both read lines here."""

from __future__ import annotations

from data.vocab import Vocab


def pair_ids(vocab: Vocab, upper: str, lower: str, max_len: int) -> tuple[list[int], list[int]]:
    """The aligned ids the scorer reads: each line's characters (unknown ones as ``unk``), cut to
    the shorter line and to ``max_len`` places."""
    u, low = vocab.encode(upper), vocab.encode(lower)
    n = min(len(u), len(low), max_len)
    return u[:n], low[:n]
