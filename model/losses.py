"""Cross-entropy over a large vocabulary, computed in row chunks.

``F.cross_entropy`` on bf16 logits under autocast first copies the whole (N, V) logit matrix
to fp32, then writes fp32 log-probabilities, a zero-filled gradient, the gradient of the
log-softmax and its bf16 copy: about eight passes over N x V values that do not fit in the
cache (800 target positions x 7,683 characters = 6M values per `cpu` preset batch). Here each
block of rows is read once in the forward pass (fp32 log-sum-exp) and once in the backward
pass (softmax minus the smoothed one-hot, written straight in the logits' dtype), while the
block is still in the cache. The arithmetic is fp32 throughout, as in the unfused loss.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

ROWS = 64  # rows per block: 64 x 7,683 fp32 values = 2 MB, about one core's L2


class _ChunkedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: Tensor, targets: Tensor, ignore_index: int, smoothing: float) -> Tensor:
        n = logits.size(0)
        keep = targets != ignore_index
        count = keep.sum().clamp(min=1)
        lse = torch.empty(n, dtype=torch.float32, device=logits.device)
        total = torch.zeros((), dtype=torch.float32, device=logits.device)
        safe = targets.masked_fill(~keep, 0)
        for a in range(0, n, ROWS):
            z = logits[a : a + ROWS].float()  # (r, V)
            block = torch.logsumexp(z, dim=-1)  # (r,)
            lse[a : a + ROWS] = block
            row = block - (1 - smoothing) * z.gather(1, safe[a : a + ROWS, None])[:, 0]
            if smoothing:
                row = row - smoothing * z.mean(dim=-1)
            total += (row * keep[a : a + ROWS]).sum()
        ctx.save_for_backward(logits, safe, keep, lse, count)
        ctx.smoothing = smoothing
        return total / count

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:
        logits, safe, keep, lse, count = ctx.saved_tensors
        n, v = logits.shape
        eps = ctx.smoothing
        scale = (grad / count).float()
        out = torch.empty_like(logits)
        for a in range(0, n, ROWS):
            p = torch.exp(logits[a : a + ROWS].float() - lse[a : a + ROWS, None])  # softmax, (r, V)
            if eps:
                p -= eps / v
            p.scatter_add_(1, safe[a : a + ROWS, None], p.new_full((p.size(0), 1), -(1 - eps)))
            p *= (keep[a : a + ROWS, None] * scale).to(p.dtype)
            out[a : a + ROWS] = p
        return out, None, None, None


def cross_entropy(logits: Tensor, targets: Tensor, ignore_index: int, label_smoothing: float = 0.0) -> Tensor:
    """Mean cross-entropy of ``logits`` (N, V) against ``targets`` (N,), rows whose target is
    ``ignore_index`` left out; the same value and gradient as ``F.cross_entropy`` with
    ``ignore_index`` and ``label_smoothing``, in fp32 whatever the logits' dtype."""
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        shapes = f"{tuple(logits.shape)} and {tuple(targets.shape)}"
        raise ValueError(f"logits (N, V) and targets (N,) expected, got {shapes}")
    return _ChunkedCrossEntropy.apply(logits, targets, ignore_index, float(label_smoothing))
