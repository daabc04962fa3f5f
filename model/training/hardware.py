"""The hardware a run trains on: the device, CPU threads, and a batch size that fits in memory."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from model.net.transformer import ModelConfig
from model.training.config import Dist, TrainConfig
from model.training.errors import UsageError


def pick_device(d: Dist, wanted: str) -> torch.device:
    if wanted == "cuda" or (wanted == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UsageError("--device cuda but no CUDA device is available")
        torch.cuda.set_device(d.local_rank)
        return torch.device("cuda", d.local_rank)
    return torch.device("cpu")


def setup_cpu(threads: int) -> None:
    torch.set_flush_denormal(True)  # denormals slowed a collapsing run to a crawl
    if threads:
        torch.set_num_threads(threads)


def estimate_memory(cfg: ModelConfig, n_params: int, batch_tokens: int, bf16: bool) -> dict[str, int]:
    """Bytes: fp32 weights, grads, AdamW moments, and activations of one batch (rough)."""
    width = 2 if bf16 else 4
    per_layer_token = 34 * cfg.d_model + 2 * cfg.d_ff  # pre-norm layer, Korthikanti-style count
    layers = cfg.n_enc_layers + 1.5 * cfg.n_dec_layers  # decoder layers hold cross-attention too
    per_token = layers * per_layer_token * width + cfg.vocab_size * (width + 8) / 2  # logits: target half
    return {
        "weights": 4 * n_params,
        "grads": 4 * n_params,
        "optimizer": 8 * n_params,
        "activations": int(batch_tokens * per_token),
    }


def available_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        meminfo = Path("/proc/meminfo").read_text()
        kb = next(int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemAvailable"))
        return kb * 1024
    except (OSError, StopIteration):
        return 4 << 30


def fit_batch(cfg: ModelConfig, n_params: int, tc: TrainConfig, device: torch.device) -> int:
    """The preset's batch, halved until the estimate fits in 60% of free memory."""
    budget = 0.6 * available_memory(device)
    tokens = tc.batch_tokens
    while tokens > 256 and sum(estimate_memory(cfg, n_params, tokens, tc.amp != "off").values()) > budget:
        tokens //= 2
    return tokens


def describe(cfg: ModelConfig, n_params: int, tc: TrainConfig, device: torch.device) -> str:
    mem = estimate_memory(cfg, n_params, tc.batch_tokens, tc.amp != "off")
    parts = ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in mem.items())
    return f"model: {n_params / 1e6:.2f}M parameters on {device}; training memory estimate: {parts}"


def hardware_description() -> str:
    """The training machine in a few words, for the model card and a packed run's record."""
    if torch.cuda.is_available():
        return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    return f"CPU, {os.cpu_count()} cores, {torch.get_num_threads()} threads"
