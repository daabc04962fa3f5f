"""The reranker's model: how much an (upper, lower) pair reads like a couplet people wrote.

A couplet's lines are aligned, so the pair is read place by place: at place i the upper
character and the lower character, each seen through the couplet model's own character
table (``embed``, shared with the encoder-decoder and frozen: the bundle stores it once)
mapped by a learned matrix per side, plus a small learned table of each side's own
(``OWN_RANK`` numbers a character, raised to d), plus the place. One or two encoder layers
(model/net/transformer.py's), the mean over the places, one number out.

It is trained listwise (model/training/rerank.py): for an upper line, the human lower line
against the shipped model's n-best, the softmax over the group's scores asked to put the human
line first. The decoder adds ``rerank_weight`` times its score to each candidate's rank
(model/decoding/reranking.py). Issue 39, docs/EXPERIMENTS.md §44-45.

Shapes: B pairs, S places, V vocabulary, d model width.
"""

from __future__ import annotations

import hashlib

import torch
from torch import Tensor, nn

from model.net.transformer import PAD_ID, EncoderLayer, ModelConfig, init_weights

OWN_RANK = 16  # the width of each side's own character table


def embed_sha256(weight: Tensor) -> str:
    """The digest of a character table as a scorer is trained on it (its float32 bytes): a
    trained scorer names its table, and goes only into a bundle whose model has that table."""
    return hashlib.sha256(weight.detach().float().contiguous().numpy().tobytes()).hexdigest()


class PairScorer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, d, padding_idx=PAD_ID)  # shared, frozen
        self.embed.weight.requires_grad_(False)
        self.upper_map = nn.Linear(d, d, bias=False)
        self.lower_map = nn.Linear(d, d, bias=False)
        self.upper_own = nn.Embedding(cfg.vocab_size, OWN_RANK, padding_idx=PAD_ID)
        self.lower_own = nn.Embedding(cfg.vocab_size, OWN_RANK, padding_idx=PAD_ID)
        self.own_up = nn.Linear(2 * OWN_RANK, d, bias=False)
        self.src_pos = nn.Embedding(cfg.max_len, d)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_enc_layers))
        self.enc_norm = nn.LayerNorm(d)
        self.drop = nn.Dropout(cfg.dropout)
        self.out = nn.Linear(d, 1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        shared = self.embed.weight.detach().clone()
        init_weights(self, [self.upper_own, self.lower_own], [self.src_pos], list(self.encoder), None)
        with torch.no_grad():
            self.embed.weight.copy_(shared)  # the shared table is the couplet model's, never drawn
            self.upper_map.weight.copy_(torch.eye(self.cfg.d_model))
            self.lower_map.weight.copy_(torch.eye(self.cfg.d_model))

    def share_embedding(self, weight: Tensor) -> None:
        """Take the couplet model's character table (V, d) as this model's ``embed``."""
        if weight.shape != self.embed.weight.shape:
            raise ValueError(
                f"the shared table is {tuple(weight.shape)}, the scorer's {tuple(self.embed.weight.shape)}"
            )
        with torch.no_grad():
            self.embed.weight.copy_(weight.float())

    def num_parameters(self, trained_only: bool = True) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trained_only)

    def forward(self, upper: Tensor, lower: Tensor) -> Tensor:
        """upper, lower (B, S) ids, aligned, PAD after the line's end -> scores (B,)."""
        live = upper != PAD_ID
        pos = torch.arange(upper.size(1), device=upper.device)
        own = torch.cat([self.upper_own(upper), self.lower_own(lower)], dim=-1)
        x = self.upper_map(self.embed(upper)) + self.lower_map(self.embed(lower)) + self.own_up(own)
        x = self.drop(x + self.src_pos(pos))
        mask = live[:, None, None, :]
        for layer in self.encoder:
            x = layer(x, mask)
        h = self.enc_norm(x)
        m = live[..., None].to(h.dtype)
        return self.out((h * m).sum(1) / m.sum(1).clamp(min=1.0)).squeeze(-1)
