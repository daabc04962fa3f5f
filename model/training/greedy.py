"""Greedy decoding of exactly as many characters as the source has: a quick check inside training.

The full beam search under the couplet rules is ``model.decoding``; this is only for the
validation BLEU printed while training.
"""

from __future__ import annotations

from typing import Any

import torch

from data.vocab import Vocab
from model.net.checkpoint import CoupletModel
from model.net.tagger import CoupletTagger
from model.net.transformer import EOS_ID, PAD_ID


@torch.no_grad()
def greedy(model: CoupletModel, vocab: Vocab, uppers: list[str], batch_size: int = 256) -> list[str]:
    device = next(model.parameters()).device
    order = sorted(range(len(uppers)), key=lambda i: len(uppers[i]))
    out: list[str] = [""] * len(uppers)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        for i, text in zip(idx, _greedy_batch(model, vocab, [uppers[i] for i in idx], device), strict=True):
            out[i] = text
    return out


def _greedy_batch(model: CoupletModel, vocab: Vocab, uppers: list[str], device: torch.device) -> list[str]:
    lengths = [len(u) for u in uppers]
    src = torch.full((len(uppers), max(lengths)), PAD_ID, dtype=torch.long)
    for i, u in enumerate(uppers):
        src[i, : len(u)] = torch.tensor(vocab.encode(u), dtype=torch.long)
    src = src.to(device)  # (B, S)
    if isinstance(model, CoupletTagger):  # one pass: the best character at each position
        logits = model.encode(src).float()  # (B, S, V)
        logits[..., : EOS_ID + 1] = -torch.inf  # never pad/unk/bos/eos inside the line
        ids = logits.argmax(-1).tolist()
        return [vocab.decode(row[:n]) for row, n in zip(ids, lengths, strict=True)]
    cache: Any = model.new_cache(model.encode(src), src)
    prev = torch.full((len(uppers),), vocab.bos_id, dtype=torch.long, device=device)
    picked = []
    for pos in range(max(lengths)):
        logits = model.step(cache, prev, pos).float()  # (B, V)
        logits[:, : EOS_ID + 1] = -torch.inf
        prev = logits.argmax(-1)
        picked.append(prev)
    ids = torch.stack(picked, 1).tolist()  # (B, S)
    return [vocab.decode(row[:n]) for row, n in zip(ids, lengths, strict=True)]
