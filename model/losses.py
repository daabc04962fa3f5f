"""Cross-entropy over a large vocabulary, computed in row blocks on the CPU.

``F.cross_entropy`` on bf16 logits under autocast first copies the whole (N, V) logit matrix
to fp32, then writes fp32 log-probabilities, a zero-filled gradient, the gradient of the
log-softmax and its bf16 copy: about eight passes over N x V values that do not fit in the
cache (800 target positions x 7,683 characters = 6M values per `cpu` preset batch). Here each
block of rows is copied once into one reused fp32 buffer, and while it is in the cache the
forward pass computes both the loss (log-sum-exp) and the gradient (softmax minus the
smoothed one-hot, over the row count), which it keeps in the logits' dtype; the backward
pass hands it on, scaled only when the loss was. One exponential per value instead of two,
and no fresh buffer per block: the exponential is most of the cost (EXPERIMENTS.md §15).
The arithmetic is fp32 throughout, as in the unfused loss. On CUDA, where the fused kernels
are memory-bound and a Python loop of small blocks would only add launches, it is
``F.cross_entropy``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

ROWS = 128  # rows per block: 128 x 7,683 fp32 values = 4 MB (measured: 64 rows 7% slower, 16 rows 50%)


def _blocks(
    logits: Tensor, targets: Tensor, ignore_index: int, smoothing: float, grad: Tensor | None
) -> Tensor:
    """The mean loss of the kept rows; when ``grad`` (N, V) is given, it receives the
    gradient of that mean with respect to ``logits``."""
    n, v = logits.shape
    keep = targets != ignore_index
    weight = keep.float() / keep.sum().clamp(min=1)  # (N,) 1/kept for a kept row, 0 for an ignored one
    safe = targets.masked_fill(~keep, 0)  # ignored rows read column 0, weighted 0
    buf = torch.empty(min(ROWS, n), v, dtype=torch.float32, device=logits.device)
    total = torch.zeros((), dtype=torch.float32, device=logits.device)
    for a in range(0, n, ROWS):
        z = buf[: min(ROWS, n - a)]
        z.copy_(logits[a : a + ROWS])  # (r, V) fp32
        w, t = weight[a : a + ROWS], safe[a : a + ROWS, None]
        row = -(1 - smoothing) * z.gather(1, t)[:, 0]  # (r,) the loss less the log-sum-exp
        if smoothing:
            row = row - smoothing * z.mean(dim=-1)
        top = z.amax(dim=-1, keepdim=True)
        z.sub_(top).exp_()
        norm = z.sum(dim=-1, keepdim=True)
        total += ((top + norm.log())[:, 0] + row).mul(w).sum()
        if grad is None:
            continue
        z.mul_(w[:, None] / norm)  # the softmax over the row count, zero on ignored rows
        if smoothing:
            z.sub_((smoothing / v) * w[:, None])
        z.scatter_add_(1, t, (-(1 - smoothing) * w)[:, None])
        grad[a : a + ROWS].copy_(z)
    return total


class _ChunkedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: Tensor, targets: Tensor, ignore_index: int, smoothing: float) -> Tensor:
        ctx.grad = torch.empty_like(logits)
        return _blocks(logits, targets, ignore_index, smoothing, ctx.grad)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor, None, None, None]:
        grad = ctx.grad
        if grad is None:  # the buffer is scaled in place and handed on: it serves once
            raise RuntimeError("backward through cross_entropy twice (retain_graph) is not supported")
        ctx.grad = None
        if grad_out.item() != 1.0:  # a plain loss.backward() skips this pass over N x V values
            grad.mul_(grad_out.to(grad.dtype))
        return grad, None, None, None


def cross_entropy(logits: Tensor, targets: Tensor, ignore_index: int, label_smoothing: float = 0.0) -> Tensor:
    """Mean cross-entropy of ``logits`` (N, V) against ``targets`` (N,), rows whose target is
    ``ignore_index`` left out; the same value and gradient as ``F.cross_entropy`` with
    ``ignore_index`` and ``label_smoothing``, in fp32 whatever the logits' dtype."""
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        shapes = f"{tuple(logits.shape)} and {tuple(targets.shape)}"
        raise ValueError(f"logits (N, V) and targets (N,) expected, got {shapes}")
    smoothing = float(label_smoothing)
    if logits.device.type != "cpu":
        return F.cross_entropy(logits.float(), targets, ignore_index=ignore_index, label_smoothing=smoothing)
    if torch.is_grad_enabled() and logits.requires_grad:
        return _ChunkedCrossEntropy.apply(logits, targets, ignore_index, smoothing)
    return _blocks(logits, targets, ignore_index, smoothing, None)
