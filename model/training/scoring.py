"""Negative log-likelihood of reference lines, per character, without label smoothing."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from model.net.batch import Batch
from model.net.checkpoint import CoupletModel
from model.net.transformer import EOS_ID, PAD_ID


@torch.no_grad()
def batch_nll(model: CoupletModel, batch: Batch) -> tuple[float, int]:
    """(summed NLL, characters) of the target lines; EOS is not a character and is not counted."""
    logits = model(batch.src, batch.tgt_in, batch.register).float()  # (B, T, V)
    flat = model.targets(batch).flatten()
    nll = F.cross_entropy(logits.flatten(0, 1), flat, reduction="none")  # (B*T,)
    chars = (flat != PAD_ID) & (flat != EOS_ID)
    return float(nll[chars].sum()), int(chars.sum())


def mean_nll(model: CoupletModel, batches: list[Batch]) -> float:
    total, n = 0.0, 0
    device = next(model.parameters()).device
    for b in batches:
        t, c = batch_nll(model, b.to(device))
        total, n = total + t, n + c
    return total / max(n, 1)
