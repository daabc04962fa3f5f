"""An encoder-only couplet model: every lower character in one pass (sequence labelling).

Couplets are aligned, so the lower line can be read off the upper line position by
position: a bidirectional encoder over the upper line, and at each position i a
distribution over the character that answers upper[i]. The positions are predicted
independently given the upper line, which makes the model fast (one pass, no decoder
steps) but less coherent than the encoder-decoder (it may repeat a safe character, or
pick two halves of different phrases). The decoder uses it as a proposer: a beam search
under the couplet rules over its per-position distributions (a lattice), whose best
candidates the encoder-decoder then rescores (``model/decoding/decoder.py``).

Its ``encode`` is its one pass; the search's steps over the lattice it gives are
model/decoding/lattice.py's (on arrays, for both engines), and training's greedy check reads
the best character at each position off it. Its ``forward(src, tgt_in)`` has the
encoder-decoder's signature (``tgt_in`` unused) with ``targets(batch)`` giving what its
logits predict.

Shapes: B batch, S source length, V vocabulary, d model width.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from model.net.batch import Batch
from model.net.transformer import EOS_ID, PAD_ID, EncoderLayer, ModelConfig, init_weights


class CoupletTagger(nn.Module):
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

    def forward(self, src: Tensor, tgt_in: Tensor | None = None, register: Tensor | None = None) -> Tensor:
        """src (B, S) -> logits (B, S, V); ``tgt_in`` and ``register`` are accepted for the
        seq2seq signature (a tagger writes in no particular register)."""
        return self.tag(src)

    @staticmethod
    def targets(batch: Batch) -> Tensor:
        """(B, S): the lower line's ids at the source positions, PAD past each line's end."""
        s = batch.src.size(1)
        out = batch.tgt_out[:, :s]
        return out.masked_fill((batch.src == PAD_ID) | (out == EOS_ID), PAD_ID)

    def encode(self, src: Tensor) -> Tensor:
        """The one pass the decoding reads (model/decoding/lattice.py): ``tag``'s logits."""
        return self.tag(src)
