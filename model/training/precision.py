"""What a training or validation step computes in: bf16 autocast where it pays, and on a CPU
PyTorch's plain attention kernel."""

from __future__ import annotations

import time
from contextlib import ExitStack

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def use_bf16(amp: str, device: torch.device) -> bool:
    """Whether to autocast to bf16. "auto": on CUDA with bf16 support; on a CPU only when a bf16
    matmul beats fp32 (CPUs without AVX512-BF16/AMX emulate it, about 100x slower)."""
    if amp not in ("auto", "bf16", "off"):
        raise ValueError(f"amp must be auto, bf16 or off, not {amp!r}")
    if amp != "auto":
        return amp == "bf16"
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return bf16_matmul_speedup() > 1.0


def compute_context(device: torch.device, bf16: bool) -> ExitStack:
    """What a training or validation step runs under: bf16 autocast when ``bf16``, and on a CPU
    PyTorch's plain attention kernel. Couplet lines are short (at most 34 positions), and for
    such short sequences its CPU flash-attention kernel costs more than the attention itself:
    its backward took 22% of a `cpu` preset step, and the plain kernel trained that preset 37%
    faster (EXPERIMENTS.md §14). A CPU training step now bypasses both with
    ``model.net.transformer.short_attention`` (§15); validation, without autograd, keeps the plain
    kernel. On CUDA the default choice stays."""
    stack = ExitStack()
    if bf16:
        stack.enter_context(torch.autocast(device.type, dtype=torch.bfloat16))
    if device.type == "cpu":
        stack.enter_context(sdpa_kernel(SDPBackend.MATH))
    return stack


def bf16_matmul_speedup(n: int = 256, trials: int = 7, repeat: int = 3) -> float:
    """fp32 time / bf16 time of an n×n matmul on this CPU (a few milliseconds). Each dtype's
    time is its best of ``trials`` interleaved trials: a single timing of a few milliseconds
    on a shared machine once came out below 1.0 on a CPU where bf16 is twice as fast, and
    that run would have trained in fp32 at half the speed."""
    mats = {dtype: torch.randn(n, n).to(dtype) for dtype in (torch.float32, torch.bfloat16)}
    best = dict.fromkeys(mats, float("inf"))
    for a in mats.values():
        a @ a  # the first call builds the kernel
    for _ in range(trials):
        for dtype, a in mats.items():
            t0 = time.perf_counter()
            for _ in range(repeat):
                a @ a
            best[dtype] = min(best[dtype], time.perf_counter() - t0)
    return best[torch.float32] / best[torch.bfloat16]
