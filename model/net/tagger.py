"""An encoder-only couplet model: every lower character in one pass (sequence labelling).

Couplets are aligned, so the lower line can be read off the upper line position by
position: a bidirectional encoder over the upper line, and at each position i a
distribution over the character that answers upper[i]. The positions are predicted
independently given the upper line, which makes the model fast (one pass, no decoder
steps) but less coherent than the encoder-decoder (it may repeat a safe character, or
pick two halves of different phrases). The decoder uses it as a proposer: a beam search
under the couplet rules over its per-position distributions (a lattice), whose best
candidates the encoder-decoder then rescores (``model/decoding/decoder.py``).

It speaks the encoder-decoder's decoding protocol (``encode``, ``new_cache``, ``step``,
``reorder_cache``), so the beam search and the greedy check run on it unchanged, and its
``forward(src, tgt_in)`` has the encoder-decoder's signature (``tgt_in`` unused) with
``targets(batch)`` giving what its logits predict.

Shapes: B batch, S source length, V vocabulary, d model width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.net.batch import Batch
from model.net.capabilities import LOG_PROBS
from model.net.transformer import EOS_ID, PAD_ID, EncoderLayer, ModelConfig, init_weights


@dataclass
class LatticeCache:
    """The per-request log-probabilities (N, S, V) and the request of each beam row (B,)."""

    logits: Tensor
    row: Tensor
    lengths: Tensor  # (N,) real characters of each request's source


class CoupletTagger(nn.Module):
    capabilities: ClassVar[frozenset[str]] = frozenset({LOG_PROBS})  # ``step``: log-probabilities

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, d, padding_idx=PAD_ID)
        self.src_pos = nn.Embedding(cfg.max_len, d)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_enc_layers))
        self.enc_norm = nn.LayerNorm(d)
        self.drop = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(d, cfg.vocab_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        tie = self.head if self.cfg.tie_embeddings else None
        init_weights(self, [self.embed], [self.src_pos], list(self.encoder), tie)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def tag(self, src: Tensor) -> Tensor:
        """src (B, S) -> logits (B, S, V) of the lower character at each position."""
        pos = torch.arange(src.size(1), device=src.device)
        x = self.drop(self.embed(src) + self.src_pos(pos))
        mask = (src != PAD_ID)[:, None, None, :]
        for layer in self.encoder:
            x = layer(x, mask)
        return self.head(self.enc_norm(x))

    def forward(self, src: Tensor, tgt_in: Tensor | None = None) -> Tensor:
        """src (B, S) -> logits (B, S, V); ``tgt_in`` is accepted for the seq2seq signature."""
        return self.tag(src)

    @staticmethod
    def targets(batch: Batch) -> Tensor:
        """(B, S): the lower line's ids at the source positions, PAD past each line's end."""
        s = batch.src.size(1)
        out = batch.tgt_out[:, :s]
        return out.masked_fill((batch.src == PAD_ID) | (out == EOS_ID), PAD_ID)

    # ---- the decoding protocol ---------------------------------------------------------

    def encode(self, src: Tensor) -> Tensor:
        return self.tag(src)

    def new_cache(self, memory: Tensor, src: Tensor) -> LatticeCache:
        """``memory``: the logits of ``encode``, normalised here once for every step."""
        n = memory.size(0)
        logp = F.log_softmax(memory.float(), dim=-1)
        return LatticeCache(logp, torch.arange(n, device=src.device), (src != PAD_ID).sum(1))

    def step(self, cache: LatticeCache, prev: Tensor, pos: int) -> Tensor:
        """(B, V) log-probabilities at ``pos`` for each beam row (``prev`` does not matter: the
        positions are independent); past a line's end only the end of sequence."""
        if not 0 <= pos < self.cfg.max_len:
            raise ValueError(f"position {pos} outside 0..{self.cfg.max_len - 1}")
        _, s, v = cache.logits.shape
        out = cache.logits[cache.row, pos] if pos < s else cache.logits.new_zeros(cache.row.size(0), v)
        ended = (cache.lengths[cache.row] <= pos)[:, None]  # (B, 1)
        if bool(ended.any()):
            eos = torch.full_like(out, -1e4)
            eos[:, EOS_ID] = 0.0
            out = torch.where(ended, eos, out)
        return out

    @staticmethod
    def reorder_cache(cache: LatticeCache, index: Tensor) -> LatticeCache:
        return LatticeCache(cache.logits, cache.row[index], cache.lengths)
