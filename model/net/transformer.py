"""A character-level Transformer encoder-decoder for aligned pairs, with a KV cache.

Pre-norm layers on ``F.scaled_dot_product_attention``. Couplets are aligned: position i
of the lower line answers position i of the upper line, so with ``aligned=True`` the
decoder input at position i also receives a projection of the encoder state at source
position i (zero past the end of the source, where the decoder must emit EOS).

Shapes: B batch, S source length, T target length, d model width, H heads, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# The token ids are data.vocab's (defined once), re-exported for the model's callers.
from data.vocab import BOS_ID as BOS_ID
from data.vocab import EOS_ID as EOS_ID
from data.vocab import PAD_ID as PAD_ID
from data.vocab import UNK_ID as UNK_ID
from model.net.batch import Batch
from model.spec.capabilities import LISTED_ROWS, REORDER_BEAMS
from model.spec.config import ModelConfig as ModelConfig
from model.spec.config import check_field_types as check_field_types


def cpu_training(q: Tensor) -> bool:
    """Whether attention runs as ``short_attention``: on a CPU, with autograd recording (a
    training step), and not while the graph is being exported."""
    return q.device.type == "cpu" and torch.is_grad_enabled() and not torch.onnx.is_in_onnx_export()


def short_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool) -> Tensor:
    """``F.scaled_dot_product_attention`` without dropout, for lines of a few dozen positions:
    q (B, H, T, dh), k and v (B, H, S, dh), mask (B, 1, 1, S) True where a key may be seen.

    On a CPU PyTorch's kernels for it cost far more than its arithmetic at these lengths: its
    flash kernel's backward, and its plain one, which scales q and k apart, builds masks per
    call and takes a softmax along rows of 8 values that are too short to vectorise. Here the
    scores are computed transposed, (B*H, S, T), by one ``baddbmm`` that also scales them and
    adds the mask, and the softmax runs over keys along dim -2, vectorised across queries:
    fwd+bwd of one `cpu` preset attention 1.6-1.9 ms -> 0.9-1.0 ms (EXPERIMENTS.md §15)."""
    b, h, t, dh = q.shape
    s = k.size(2)
    q3, k3, v3 = q.reshape(b * h, t, dh), k.reshape(b * h, s, dh), v.reshape(b * h, s, dh)
    bias: Tensor | None = None  # (B*H, S, 1), (S, T) or (B*H, S, T): added to the scores
    if mask is not None:
        hidden = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, -math.inf)
        bias = hidden.expand(b, h, 1, s).reshape(b * h, 1, s).transpose(1, 2)
    if causal:  # key j after query i is hidden: below the diagonal of the transposed scores
        late = torch.full((s, t), -math.inf, dtype=q.dtype, device=q.device).tril(-1)
        bias = late if bias is None else bias + late
    scale = 1.0 / math.sqrt(dh)
    if bias is None:
        scores = torch.bmm(k3, q3.transpose(1, 2)) * scale
    else:
        scores = torch.baddbmm(bias, k3, q3.transpose(1, 2), alpha=scale)  # (B*H, S, T)
    y = torch.bmm(scores.softmax(dim=1).transpose(1, 2), v3)  # (B*H, T, dh)
    return y.view(b, h, t, dh)


class Attention(nn.Module):
    """Multi-head attention; keys/values may come from a cache."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.h, self.dh = cfg.n_heads, cfg.d_model // cfg.n_heads
        self.q = nn.Linear(cfg.d_model, cfg.d_model)
        self.kv = nn.Linear(cfg.d_model, 2 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = cfg.dropout

    def split(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)

    def keys_values(self, x: Tensor) -> tuple[Tensor, Tensor]:
        k, v = self.kv(x).chunk(2, dim=-1)
        return self.split(k), self.split(v)  # (B, H, n, dh) each

    def attend(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool) -> Tensor:
        q = self.split(self.q(x))  # (B, H, n, dh)
        p = self.dropout if self.training else 0.0
        if p == 0.0 and cpu_training(q):
            y = short_attention(q, k, v, mask, causal)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal)
        b, _, n, _ = y.shape
        return self.out(y.transpose(1, 2).reshape(b, n, self.h * self.dh))  # (B, n, d)

    def forward(self, x: Tensor, ctx: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
        k, v = self.keys_values(ctx)
        return self.attend(x, k, v, mask, causal)


class FeedForward(nn.Sequential):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(
            nn.Linear(cfg.d_model, cfg.d_ff),
            nn.GELU(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.d_ff, cfg.d_model),
        )


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn, self.ff = Attention(cfg), FeedForward(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        h = self.norm1(x)
        x = x + self.drop(self.attn(h, h, mask))
        return x + self.drop(self.ff(self.norm2(x)))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(cfg.d_model) for _ in range(3))
        self.self_attn, self.cross_attn, self.ff = Attention(cfg), Attention(cfg), FeedForward(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, memory: Tensor, mem_mask: Tensor) -> Tensor:
        h = self.norm1(x)
        x = x + self.drop(self.self_attn(h, h, causal=True))
        x = x + self.drop(self.cross_attn(self.norm2(x), memory, mem_mask))
        return x + self.drop(self.ff(self.norm3(x)))

    def step(self, x: Tensor, layer_cache: LayerCache, pos: int, mem_mask: Tensor | None) -> Tensor:
        """One position: x (B, 1, d); writes this position's keys/values into the cache."""
        h = self.norm1(x)
        k, v = self.self_attn.keys_values(h)  # (B, H, 1, dh)
        layer_cache.k[:, :, pos : pos + 1] = k
        layer_cache.v[:, :, pos : pos + 1] = v
        ks, vs = layer_cache.k[:, :, : pos + 1], layer_cache.v[:, :, : pos + 1]
        x = x + self.self_attn.attend(h, ks, vs, None, causal=False)
        x = x + self.cross_attn.attend(self.norm2(x), layer_cache.ck, layer_cache.cv, mem_mask, False)
        return x + self.ff(self.norm3(x))


@dataclass
class LayerCache:
    k: Tensor  # (B, H, max_len, dh) self-attention keys, filled up to the current position
    v: Tensor
    ck: Tensor  # (B, H, S, dh) cross-attention keys of the memory, computed once
    cv: Tensor

    def select(self, index: Tensor) -> LayerCache:
        return LayerCache(*(t.index_select(0, index) for t in (self.k, self.v, self.ck, self.cv)))


@dataclass
class DecoderCache:
    layers: list[LayerCache]
    mem_mask: Tensor | None  # (B, 1, 1, S) True where the source is a real character; None: all are
    aligned: Tensor | None  # (B, S, d) projected encoder state per source position

    def select(self, index: Tensor) -> DecoderCache:
        al = None if self.aligned is None else self.aligned.index_select(0, index)
        mask = None if self.mem_mask is None else self.mem_mask.index_select(0, index)
        return DecoderCache([c.select(index) for c in self.layers], mask, al)


def init_weights(
    model: nn.Module,
    tokens: list[nn.Embedding],
    positions: list[nn.Embedding],
    layers: list[nn.Module],
    tied_head: nn.Linear | None,
) -> None:
    """Initialise a couplet model (the encoder-decoder, or the tagger of model/net/tagger.py).

    Small embeddings (std 0.02) used unscaled, as in GPT-2: with N(0, 1/d) embeddings times
    sqrt(d), the tied output layer scores the input token sqrt(d) above the rest and the
    untrained model bets on repeating its input (initial loss ~14 instead of ln V ~ 9);
    scaling the logits by 1/sqrt(d) instead (T5) fixed the start but stalled learning.
    Residual projections get std 0.02 / sqrt(2 * layers); ``tied_head`` shares the first
    token table."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    for emb in tokens:
        nn.init.normal_(emb.weight, std=0.02)
        with torch.no_grad():
            emb.weight[PAD_ID].zero_()
    for emb in positions:
        nn.init.normal_(emb.weight, std=0.02)
    if tied_head is not None:
        tied_head.weight = tokens[0].weight
    scale = 0.02 / math.sqrt(2 * max(1, len(layers)))
    for layer in layers:
        for name, p in layer.named_parameters():
            if name.endswith("out.weight") or name.endswith("ff.3.weight"):
                nn.init.normal_(p, std=scale)


class CoupletTransformer(nn.Module):
    # beyond its steps (model/spec/capabilities.py): ``step_states``, ``reorder_beams``
    capabilities: ClassVar[frozenset[str]] = frozenset({LISTED_ROWS, REORDER_BEAMS})

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, d, padding_idx=PAD_ID)
        self.tgt_embed = self.embed if cfg.tie_embeddings else nn.Embedding(cfg.vocab_size, d, PAD_ID)
        self.src_pos = nn.Embedding(cfg.max_len, d)
        self.tgt_pos = nn.Embedding(cfg.max_len, d)
        self.align = nn.Linear(d, d) if cfg.aligned else None
        self.register_embed = nn.Embedding(cfg.n_registers, d) if cfg.n_registers else None
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_dec_layers))
        self.enc_norm, self.dec_norm = nn.LayerNorm(d), nn.LayerNorm(d)
        self.drop = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(d, cfg.vocab_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        layers = [*self.encoder, *self.decoder]
        tie = self.head if self.cfg.tie_embeddings else None
        init_weights(self, [self.embed, self.tgt_embed], [self.src_pos, self.tgt_pos], layers, tie)
        if self.register_embed is not None:  # zero: a model trained without registers is unchanged
            nn.init.zeros_(self.register_embed.weight)

    def decoder_layers(self) -> list[DecoderLayer]:
        return [cast(DecoderLayer, layer) for layer in self.decoder]

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def encode(self, src: Tensor, register: Tensor | None = None) -> Tensor:
        """src (B, S), register (B,) or None (the first, general) -> memory (B, S, d)."""
        pos = torch.arange(src.size(1), device=src.device)
        x = self.embed(src) + self.src_pos(pos)  # (B, S, d)
        if self.register_embed is not None:
            if register is None:
                register = src.new_zeros(src.size(0))
            x = x + self.register_embed(register)[:, None, :]
        x = self.drop(x)
        mask = self._src_mask(src)
        for layer in self.encoder:
            x = layer(x, mask)
        return self.enc_norm(x)

    @staticmethod
    def _src_mask(src: Tensor) -> Tensor:
        return (src != PAD_ID)[:, None, None, :]  # (B, 1, 1, S) True = attend

    def _aligned(self, memory: Tensor, src: Tensor, length: int) -> Tensor | None:
        """(B, length, d): the projected encoder state at each target position, 0 past the source."""
        if self.align is None:
            return None
        a = self.align(memory) * (src != PAD_ID).unsqueeze(-1).to(memory.dtype)  # (B, S, d)
        # zeros appended and cut, not a branch on the sizes: the ONNX export traces one path
        return torch.cat([a, a.new_zeros(a.size(0), length, a.size(2))], 1)[:, :length]

    def _tgt_input(self, tgt_in: Tensor, start: int, aligned: Tensor | None) -> Tensor:
        pos = torch.arange(start, start + tgt_in.size(1), device=tgt_in.device)
        x = self.tgt_embed(tgt_in) + self.tgt_pos(pos)  # (B, T, d)
        return x if aligned is None else x + aligned

    def decode(self, memory: Tensor, src: Tensor, tgt_in: Tensor) -> Tensor:
        """memory (B, S, d), tgt_in (B, T) -> logits (B, T, V)."""
        return self.logits(self.decode_states(memory, src, tgt_in))

    def decode_states(self, memory: Tensor, src: Tensor, tgt_in: Tensor) -> Tensor:
        """memory (B, S, d), tgt_in (B, T) -> the last decoder layer's states (B, T, d)."""
        aligned = self._aligned(memory, src, tgt_in.size(1))
        x = self.drop(self._tgt_input(tgt_in, 0, aligned))
        mask = self._src_mask(src)
        for layer in self.decoder:
            x = layer(x, memory, mask)
        return x

    def logits(self, x: Tensor) -> Tensor:
        """(..., d) decoder states -> (..., V)."""
        return self.head(self.dec_norm(x))

    def forward(self, src: Tensor, tgt_in: Tensor, register: Tensor | None = None) -> Tensor:
        """src (B, S), tgt_in (B, T) starting with BOS, register (B,) -> logits (B, T, V)."""
        return self.decode(self.encode(src, register), src, tgt_in)

    @staticmethod
    def targets(batch: Batch) -> Tensor:
        """(B, T): what ``forward``'s logits predict, the target ids and EOS."""
        return batch.tgt_out

    # ---- incremental decoding -------------------------------------------------------

    def new_cache(self, memory: Tensor, src: Tensor) -> DecoderCache:
        """Empty self-attention buffers and the cross-attention keys/values of ``memory``."""
        b, h = memory.size(0), self.cfg.n_heads
        dh = self.cfg.d_model // h
        layers = []
        for layer in self.decoder_layers():
            ck, cv = layer.cross_attn.keys_values(memory)  # (B, H, S, dh)
            buf = memory.new_zeros(2, b, h, self.cfg.max_len, dh)
            layers.append(LayerCache(buf[0], buf[1], ck, cv))
        aligned = self._aligned(memory, src, self.cfg.max_len)
        mask = self._src_mask(src)
        return DecoderCache(layers, None if bool(mask.all()) else mask, aligned)  # no padding: no mask

    def step(self, cache: DecoderCache, prev: Tensor, pos: int) -> Tensor:
        """prev (B,) token at position ``pos`` (BOS at 0) -> logits (B, V) for position ``pos``."""
        return self.head(self.step_states(cache, prev, pos))

    def step_states(self, cache: DecoderCache, prev: Tensor, pos: int) -> Tensor:
        """``step`` without the output layer: the normalised decoder state (B, d), whose
        product with a row of ``head.weight`` is that token's logit."""
        if not 0 <= pos < self.cfg.max_len:
            raise ValueError(f"position {pos} outside 0..{self.cfg.max_len - 1}")
        al = None if cache.aligned is None else cache.aligned[:, pos : pos + 1]
        x = self._tgt_input(prev[:, None], pos, al)  # (B, 1, d)
        for layer, lc in zip(self.decoder_layers(), cache.layers, strict=True):
            x = layer.step(x, lc, pos, cache.mem_mask)
        return self.dec_norm(x)[:, 0]  # (B, d)

    @staticmethod
    def reorder_cache(cache: DecoderCache, index: Tensor) -> DecoderCache:
        """Rows ``index`` (B',) of the cache, e.g. the surviving beams, duplicated as needed."""
        return cache.select(index)

    @staticmethod
    def reorder_beams(cache: DecoderCache, parent: Tensor) -> DecoderCache:
        """``reorder_cache`` for beams that stay within their request: the rows of one request
        share the cross-attention keys, so only the self-attention cache moves."""
        layers = [
            LayerCache(c.k.index_select(0, parent), c.v.index_select(0, parent), c.ck, c.cv)
            for c in cache.layers
        ]
        return DecoderCache(layers, cache.mem_mask, cache.aligned)
