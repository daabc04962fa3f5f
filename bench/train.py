"""Training throughput: pairs per second and MFU of the `cpu` preset model and of its proposer,
the encoder-only `tagger` preset (and the `gpu` one on CUDA).

MFU = achieved FLOP/s (FLOPs of one training step counted by ``FlopCounterMode``, times
steps per second) over the device's matmul peak in the same dtype, measured in this run.
Batches come from work/data/train.tsv when present, else random ids of the same shape.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from data.paths import data_dir
from model.net.batch import Batch, collate
from model.net.checkpoint import build_model
from model.net.transformer import ModelConfig
from model.training.config import TrainConfig
from model.training.losses import seq2seq_loss
from model.training.precision import compute_context, use_bf16
from model.training.presets import PRESETS
from model.training.trainer import make_optimizer


def matmul_peak(device: torch.device, dtype: torch.dtype, n: int, seconds: float) -> float:
    """Best FLOP/s of an n×n matmul over ``seconds``."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    best, end = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(4):
            a @ b
        _sync(device)
        best = max(best, 4 * 2 * n**3 / (time.perf_counter() - t0))
    return best


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sample_batches(vocab_size: int, batch_tokens: int, count: int) -> list[Batch]:
    """Length-sorted batches of real training pairs when available (typical lengths), else random."""
    path = data_dir() / "train.tsv"
    rng = np.random.default_rng(0)
    if path.exists():
        from data.vocab import Vocab

        vocab = Vocab.from_file(data_dir() / "spm.model")
        with open(path, encoding="utf-8") as f:
            lines = [next(f).rstrip("\n").split("\t") for _ in range(20000)]
        pairs = [(vocab.encode(u), vocab.encode(lo)) for u, lo in lines if len(u) == len(lo)]
    else:
        lengths = rng.choice([5, 7, 7, 7, 11, 12], size=20000)
        pairs = [
            (rng.integers(4, vocab_size, n).tolist(), rng.integers(4, vocab_size, n).tolist())
            for n in lengths
        ]
    order = rng.permutation(len(pairs))
    out: list[Batch] = []
    i = 0
    while len(out) < count:
        chunk = sorted((pairs[j] for j in order[i : i + 4000]), key=lambda p: len(p[0]))
        start = int(rng.integers(0, len(chunk) - 64))
        n = max(1, batch_tokens // (2 * (len(chunk[start][0]) + 1)))
        out.append(collate(chunk[start : start + n]))
        i = (i + 4000) % max(1, len(pairs) - 4000)
    return out


def measure(preset: str, device: torch.device, steps: int, peak_seconds: float) -> dict[str, Any]:
    spec = json.loads((PRESETS / f"{preset}.json").read_text())
    tc = TrainConfig.from_dict({k: v for k, v in spec["train"].items() if k != "threads"})
    vocab_size = 8000
    if (data_dir() / "spm.model").exists():
        from data.vocab import Vocab

        vocab_size = len(Vocab.from_file(data_dir() / "spm.model"))
    model = build_model(ModelConfig(vocab_size=vocab_size, **spec["model"])).to(device)
    opt = make_optimizer(model, tc)
    bf16 = use_bf16(tc.amp, device)
    batches = [b.to(device) for b in sample_batches(vocab_size, tc.batch_tokens, steps + 2)]

    def step(batch: Batch) -> None:
        with compute_context(device, bf16):
            loss = seq2seq_loss(model, batch, tc.label_smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    flops = 0
    for b in batches[:2]:  # warm-up; count the FLOPs of the timed batches separately
        step(b)
    timed = batches[2:]
    with FlopCounterMode(display=False) as counter:
        for b in timed[:1]:
            step(b)
    flops_first = counter.get_total_flops()
    tokens_first = timed[0].src.numel() + timed[0].tgt_in.numel()
    _sync(device)
    t0 = time.perf_counter()
    for b in timed:
        step(b)
    _sync(device)
    seconds = time.perf_counter() - t0
    tokens = sum(b.src.numel() + b.tgt_in.numel() for b in timed)
    flops = flops_first * tokens / tokens_first  # FLOPs scale with (padded) tokens
    dtype = torch.bfloat16 if bf16 else torch.float32
    peak = matmul_peak(device, dtype, 2048 if device.type == "cuda" else 1024, peak_seconds)
    achieved = flops / seconds
    tag = f"{preset}_{device.type}"
    return {
        f"{tag}_params_M": round(model.num_parameters() / 1e6, 2),
        f"{tag}_dtype": str(dtype).removeprefix("torch."),
        f"{tag}_threads": torch.get_num_threads(),
        f"{tag}_pairs_per_s": round(sum(b.size for b in timed) / seconds, 1),
        f"{tag}_achieved_gflops": round(achieved / 1e9, 2),
        f"{tag}_matmul_peak_gflops": round(peak / 1e9, 2),
        f"{tag}_mfu_percent": round(100 * achieved / peak, 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_flush_denormal(True)
    quick = bool(getattr(args, "quick", False))
    steps = 3 if quick else 60  # 20 steps varied by several percent between runs
    figures = measure("tiny" if quick else "cpu", torch.device("cpu"), steps, 1.0 if quick else 3.0)
    if not quick:
        figures.update(measure("tagger", torch.device("cpu"), steps, 3.0))
    if torch.cuda.is_available():
        figures.update(measure("gpu", torch.device("cuda"), 10 if quick else 50, 2.0))
    return figures
