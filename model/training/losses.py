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
The arithmetic is fp32 throughout, as in the unfused loss. ``distillation`` mixes a teacher's
distribution into the target in the same pass; its KL term had written both models' whole
fp32 log-softmax. On CUDA, where the fused kernels are memory-bound and a Python loop of
small blocks would only add launches, they are ``F.cross_entropy`` and ``F.kl_div``.
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from model.net.batch import Batch
from model.net.transformer import PAD_ID

ROWS = 128  # rows per block: 128 x 7,683 fp32 values = 4 MB (measured: 64 rows 7% slower, 16 rows 50%)


def _dot(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise dot products of two (r, V) matrices, without an (r, V) temporary."""
    return torch.bmm(a[:, None, :], b[:, :, None])[:, 0, 0]


def _blocks(
    logits: Tensor,
    targets: Tensor,
    ignore_index: int,
    smoothing: float,
    grad: Tensor | None,
    teacher: Tensor | None = None,
    kd: float = 0.0,
) -> Tensor:
    """The mean loss of the kept rows; when ``grad`` (N, V) is given, it receives the
    gradient of that mean with respect to ``logits``. With ``teacher`` logits (N, V), each
    row's loss is ``1 - kd`` times its cross-entropy plus ``kd`` times KL(teacher || model):
    a cross-entropy against the mixed target ``(1 - kd) * reference + kd * teacher``, less the
    teacher's entropy, so the gradient is the softmax minus that mixed target."""
    n, v = logits.shape
    keep = targets != ignore_index
    weight = keep.float() / keep.sum().clamp(min=1)  # (N,) 1/kept for a kept row, 0 for an ignored one
    safe = targets.masked_fill(~keep, 0)  # ignored rows read column 0, weighted 0
    hard = 1.0 - kd  # the reference's share of the target (kd is 0 without a teacher)
    buf = torch.empty(min(ROWS, n), v, dtype=torch.float32, device=logits.device)
    if teacher is not None:
        tbuf, pbuf = torch.empty_like(buf), torch.empty_like(buf)
    total = torch.zeros((), dtype=torch.float32, device=logits.device)
    for a in range(0, n, ROWS):
        z = buf[: min(ROWS, n - a)]
        z.copy_(logits[a : a + ROWS])  # (r, V) fp32
        w, t = weight[a : a + ROWS], safe[a : a + ROWS, None]
        row = -(hard * (1 - smoothing)) * z.gather(1, t)[:, 0]  # (r,) the loss less the log-sum-exp
        if smoothing:
            row = row - (hard * smoothing) * z.mean(dim=-1)
        if teacher is not None:
            y, p = tbuf[: z.shape[0]], pbuf[: z.shape[0]]
            y.copy_(teacher[a : a + ROWS])
            y.sub_(y.amax(dim=-1, keepdim=True))
            torch.exp(y, out=p)
            tnorm = p.sum(dim=-1, keepdim=True)
            p.div_(tnorm)  # the teacher's distribution
            # KL less the log-sum-exp: sum p log p - sum p z, with log p = y - log tnorm
            row = row + kd * (_dot(p, y) - tnorm.log()[:, 0] - _dot(p, z))
        top = z.amax(dim=-1, keepdim=True)
        z.sub_(top).exp_()
        norm = z.sum(dim=-1, keepdim=True)
        total += ((top + norm.log())[:, 0] + row).mul(w).sum()
        if grad is None:
            continue
        z.mul_(w[:, None] / norm)  # the softmax over the row count, zero on ignored rows
        if smoothing:
            z.sub_((hard * smoothing / v) * w[:, None])
        if teacher is not None:
            z.sub_(p.mul_((kd * w)[:, None]))
        z.scatter_add_(1, t, (-(hard * (1 - smoothing)) * w)[:, None])
        grad[a : a + ROWS].copy_(z)
    return total


class _ChunkedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        logits: Tensor,
        targets: Tensor,
        ignore_index: int,
        smoothing: float,
        teacher: Tensor | None,
        kd: float,
    ) -> Tensor:
        ctx.grad = torch.empty_like(logits)
        return _blocks(logits, targets, ignore_index, smoothing, ctx.grad, teacher, kd)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor, None, None, None, None, None]:
        grad = ctx.grad
        if grad is None:  # the buffer is scaled in place and handed on: it serves once
            raise RuntimeError("backward through cross_entropy twice (retain_graph) is not supported")
        ctx.grad = None
        if grad_out.item() != 1.0:  # a plain loss.backward() skips this pass over N x V values
            grad.mul_(grad_out.to(grad.dtype))
        return grad, None, None, None, None, None


def _check(logits: Tensor, targets: Tensor) -> None:
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        shapes = f"{tuple(logits.shape)} and {tuple(targets.shape)}"
        raise ValueError(f"logits (N, V) and targets (N,) expected, got {shapes}")


def _chunked(
    logits: Tensor, targets: Tensor, ignore_index: int, smoothing: float, teacher: Tensor | None, kd: float
) -> Tensor:
    if torch.is_grad_enabled() and logits.requires_grad:
        return _ChunkedCrossEntropy.apply(logits, targets, ignore_index, smoothing, teacher, kd)
    return _blocks(logits, targets, ignore_index, smoothing, None, teacher, kd)


def cross_entropy(logits: Tensor, targets: Tensor, ignore_index: int, label_smoothing: float = 0.0) -> Tensor:
    """Mean cross-entropy of ``logits`` (N, V) against ``targets`` (N,), rows whose target is
    ``ignore_index`` left out; the same value and gradient as ``F.cross_entropy`` with
    ``ignore_index`` and ``label_smoothing``, in fp32 whatever the logits' dtype."""
    _check(logits, targets)
    smoothing = float(label_smoothing)
    if logits.device.type != "cpu":
        return F.cross_entropy(logits.float(), targets, ignore_index=ignore_index, label_smoothing=smoothing)
    return _chunked(logits, targets, ignore_index, smoothing, None, 0.0)


def distillation(
    logits: Tensor,
    teacher: Tensor,
    targets: Tensor,
    ignore_index: int,
    weight: float,
    label_smoothing: float = 0.0,
) -> Tensor:
    """``1 - weight`` times ``cross_entropy`` plus ``weight`` times KL(teacher || model) of the
    rows' distributions, both averaged over the kept rows (``F.kl_div``'s "batchmean" over
    them); the teacher's logits (N, V) get no gradient. On a CPU it is one blocked pass, as
    the cross-entropy: neither model's log-softmax is ever written out whole."""
    _check(logits, targets)
    if teacher.shape != logits.shape:
        raise ValueError(
            f"teacher logits {tuple(teacher.shape)} differ from the model's {tuple(logits.shape)}"
        )
    smoothing, kd, teacher = float(label_smoothing), float(weight), teacher.detach()
    if logits.device.type != "cpu":
        keep = targets != ignore_index
        ce = cross_entropy(logits, targets, ignore_index, smoothing)
        theirs = teacher[keep].float().log_softmax(-1)
        kl = F.kl_div(logits[keep].float().log_softmax(-1), theirs, reduction="batchmean", log_target=True)
        return (1 - kd) * ce + kd * kl
    return _chunked(logits, targets, ignore_index, smoothing, teacher, kd)


def seq2seq_loss(
    model: nn.Module, batch: Batch, label_smoothing: float, raw: nn.Module | None = None
) -> torch.Tensor:
    """Cross-entropy of ``model(src, tgt_in)`` against ``targets(batch)`` of the raw model
    (the encoder-decoder predicts tgt_out, the tagger the lower line at each position);
    ``raw`` is the module under a DDP wrapper, whose forward must still be the call."""
    logits = model(batch.src, batch.tgt_in, batch.register)  # (B, T, V)
    targets = cast(Any, raw or model).targets(batch).flatten()
    return cross_entropy(logits.flatten(0, 1), targets, PAD_ID, label_smoothing)


def distill_loss(
    model: nn.Module,
    teacher: nn.Module,
    batch: Batch,
    weight: float,
    label_smoothing: float,
    raw: nn.Module | None = None,
) -> torch.Tensor:
    """Word-level knowledge distillation (Kim and Rush, EMNLP 2016): ``1 - weight`` times the
    cross-entropy of ``seq2seq_loss`` plus ``weight`` times KL(teacher || model) of the token
    distributions at every target position, the teacher reading the same reference prefix.
    The teacher's distribution over all characters says far more per position than the one
    reference character, which is what lets a smaller model (one decoder layer) learn from
    a trained one faster than from the pairs alone."""
    logits = model(batch.src, batch.tgt_in, batch.register).flatten(0, 1)  # (B*T, V)
    targets = cast(Any, raw or model).targets(batch).flatten()
    with torch.no_grad():
        theirs = teacher(batch.src, batch.tgt_in, batch.register).flatten(0, 1)
    return distillation(logits, theirs, targets, PAD_ID, weight, label_smoothing)
