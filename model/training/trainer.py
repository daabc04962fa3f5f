"""A generic sequence-to-sequence training loop: it knows batches, a loss, and hooks, not couplets.

Resumable: every checkpoint carries optimizer, RNG and position-in-epoch state, and the
batch order is a pure function of (seed, epoch), so a run killed and started again with
the same command ends with the same weights as an uninterrupted one. A checkpoint that does
not load or fails its sum (model.net.checkpoint) is named on stderr, set aside as
``step-N.pt.corrupt`` and skipped: the run resumes from the newest good one, and the logs lose
the rows written after it. A NaN or infinite loss or gradient norm stops the run
(``TrainingDiverged``) before anything is saved or logged with it. Runs under
``torchrun`` as DDP (gloo on CPU, NCCL on CUDA), each rank taking every world-th batch.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from model.net.batch import Batch
from model.net.checkpoint import CorruptCheckpoint, load_checkpoint, verified
from model.training.batches import prefetch
from model.training.config import SCHEDULE, Dist, Hooks, PairSource, TrainConfig, TrainState
from model.training.errors import TrainingDiverged
from model.training.losses import distill_loss, seq2seq_loss
from model.training.precision import compute_context, use_bf16
from model.training.train_log import Window, append_csv, fmt_value, truncate_csv


def lr_factor(cfg: TrainConfig, step: int, progress: float) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine decay over ``progress`` in [0, 1]."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    p = min(max(progress, 0.0), 1.0)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * p))


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in named if p.dim() >= 2 and "embed" not in n and "pos" not in n]
    rest = [p for n, p in named if not (p.dim() >= 2 and "embed" not in n and "pos" not in n)]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    # the fused kernel updates all parameters in one pass (CPU and CUDA); on the `cpu` preset
    # it measured within noise of the loop (1,449 against 1,444 pairs/s, EXPERIMENTS.md §14)
    fused = all(p.device.type in ("cpu", "cuda") and p.dtype == torch.float32 for p in model.parameters())
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, cfg.beta2), eps=1e-8, fused=fused)


class Trainer:
    def __init__(
        self,
        model: nn.Module,
        cfg: TrainConfig,
        data: PairSource,
        out_dir: str | os.PathLike[str],
        hooks: Hooks,
        device: torch.device,
        dist_info: Dist | None = None,
        teacher: nn.Module | None = None,
    ) -> None:
        self.raw = model.to(device)
        self.teacher = None if teacher is None else teacher.to(device).eval().requires_grad_(False)
        self.cfg, self.data, self.hooks, self.device = cfg, data, hooks, device
        self.out = Path(out_dir)
        self.dist = dist_info or Dist()
        self.model: nn.Module = model
        if self.dist.world > 1:
            ids = [device.index] if device.type == "cuda" else None
            self.model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        if cfg.freeze_embeddings:
            for name, p in self.raw.named_parameters():
                if "embed" in name:
                    p.requires_grad_(False)
        self.opt = make_optimizer(self.raw, cfg)
        self.state = TrainState()
        self.new_stretch: dict[str, tuple[Any, Any]] = {}  # schedule options a resume changed: (old, new)
        self.ckpt_dir = self.out / "checkpoints"
        self.bf16 = use_bf16(cfg.amp, device)
        # set on the device when a step's loss or gradient norm is not finite; read (one wait for
        # the device) only before a log line, a validation or a save
        self.diverged = torch.zeros((), dtype=torch.bool, device=device)
        self.finite_at = 0  # the last step checked finite

    # ---- checkpoints ---------------------------------------------------------------

    def checkpoints(self) -> list[Path]:
        return sorted(self.ckpt_dir.glob("step-*.pt"))

    def newest_good_checkpoint(self) -> dict[str, Any] | None:
        """The newest checkpoint that loads and matches its sum; each one that does not is named
        on stderr and set aside (renamed ``*.corrupt``, by the main rank)."""
        for path in reversed(self.checkpoints()):
            try:
                ckpt = load_checkpoint(path)
            except FileNotFoundError:  # another rank set it aside already
                continue
            except CorruptCheckpoint as e:
                print(
                    f"skipping checkpoint {e}; set aside as {path.name}.corrupt", file=sys.stderr, flush=True
                )
                if self.dist.main:
                    path.replace(path.with_name(path.name + ".corrupt"))
                continue
            if not verified(ckpt) and self.dist.main:
                print(f"checkpoint {path} has no payload sum (written before sums): loaded unverified",
                      file=sys.stderr, flush=True)  # fmt: skip
            return ckpt
        return None

    def resume(self) -> bool:
        """Continue from the newest good checkpoint in ``out_dir``, if any; the logs keep only
        the rows up to its step (none without one: a run killed before its first checkpoint
        starts again from step 0 and writes them again)."""
        ckpt = self.newest_good_checkpoint()
        if ckpt is None:
            if self.dist.main:
                truncate_csv(self.out / "train_log.csv", 0)
                truncate_csv(self.out / "valid_log.csv", 0)
            return False
        self.raw.load_state_dict(ckpt["state_dict"])
        self.opt.load_state_dict(ckpt["optimizer"])
        self.state = TrainState(**ckpt["trainer"])
        before = ckpt.get("train_config") or {}
        now = asdict(self.cfg)
        self.new_stretch = {k: (before[k], now[k]) for k in SCHEDULE if k in before and before[k] != now[k]}
        if self.new_stretch:  # a warm restart or a longer budget: its evaluations start afresh
            self.state.bad_evals = 0
        torch.set_rng_state(ckpt["rng"]["torch"])
        if self.device.type == "cuda" and "cuda" in ckpt["rng"]:
            torch.cuda.set_rng_state(ckpt["rng"]["cuda"], self.device)
        if self.dist.main:
            truncate_csv(self.out / "train_log.csv", self.state.step)
            truncate_csv(self.out / "valid_log.csv", self.state.step)
        self.finite_at = self.state.step
        return True

    def check_finite(self) -> None:
        """``TrainingDiverged`` when a step since the last check had a NaN or infinite loss or
        gradient norm (on any rank: every rank calls this at the same steps)."""
        bad = self.diverged
        if self.dist.world > 1:
            bad = bad.to(torch.int32)
            dist.all_reduce(bad, op=dist.ReduceOp.MAX)
        if bool(bad):
            raise TrainingDiverged(
                f"training diverged: the loss or gradient norm became NaN or infinite after step "
                f"{self.finite_at} (by step {self.state.step}); stopped without saving or logging "
                f"anything after step {self.finite_at}. Try a lower lr or more warmup_steps"
            )
        self.finite_at = self.state.step

    def save_checkpoint(self) -> None:
        self.check_finite()
        if not self.dist.main or self.hooks.save is None:
            return
        rng = {"torch": torch.get_rng_state()}
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        path = self.ckpt_dir / f"step-{self.state.step:08d}.pt"
        self.hooks.save(
            path,
            self.raw,
            step=self.state.step,
            best_valid=self.state.best,
            optimizer=self.opt.state_dict(),
            trainer=asdict(self.state),
            rng=rng,
            train_config=asdict(self.cfg),
        )
        for old in self.checkpoints()[: -self.cfg.keep_last]:
            old.unlink(missing_ok=True)

    # ---- the loop ------------------------------------------------------------------

    def batches(self, epoch: int, start: int) -> Iterator[Batch]:
        """This rank's batches from (epoch, start) onwards; runs on the prefetch thread, so it
        only reads the state: the loop records each batch's ``where`` after its step."""
        while not self.cfg.max_epochs or epoch < self.cfg.max_epochs:
            order = self.data.epoch_batches(epoch, self.cfg.seed)
            usable = len(order) - len(order) % self.dist.world
            for pos in range(start, usable, self.dist.world):
                batch = self.data.collate(order[pos + self.dist.rank])
                batch.where = (epoch, pos)
                yield batch
            epoch, start = epoch + 1, 0

    def computing(self) -> ExitStack:
        return compute_context(self.device, self.bf16)

    def train_step(self, batch: Batch) -> torch.Tensor:
        """One optimizer step; the loss as a detached tensor on the device, read only when a log
        line is due (reading it each step would wait for the GPU every step)."""
        self.model.train()
        with self.computing():
            if self.teacher is None:
                loss = seq2seq_loss(self.model, batch, self.cfg.label_smoothing, self.raw)
            else:
                loss = distill_loss(
                    self.model,
                    self.teacher,
                    batch,
                    self.cfg.distill_weight,
                    self.cfg.label_smoothing,
                    self.raw,
                )
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.diverged |= ~torch.isfinite(loss.detach())
        if self.cfg.clip_norm:
            norm = nn.utils.clip_grad_norm_(self.raw.parameters(), self.cfg.clip_norm)
            self.diverged |= ~torch.isfinite(norm)
        self.opt.step()
        return loss.detach()

    def progress(self) -> float:
        parts = [0.0]
        if self.cfg.max_steps:
            parts.append(self.state.step / self.cfg.max_steps)
        if self.cfg.max_minutes:
            parts.append(self.state.elapsed / (60 * self.cfg.max_minutes))
        return max(parts)

    def set_lr(self) -> float:
        lr = self.cfg.lr * lr_factor(self.cfg, self.state.step, self.progress())
        for g in self.opt.param_groups:
            g["lr"] = lr
        return lr

    def synced_elapsed(self, seconds: float) -> float:
        """Training time agreed by all ranks (the slowest), so they schedule and stop alike."""
        if self.dist.world == 1:
            return seconds
        t = torch.tensor([seconds], dtype=torch.float64, device=self.device)  # NCCL: on the GPU
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def should_stop(self) -> bool:
        s, c = self.state, self.cfg
        if c.max_steps and s.step >= c.max_steps:
            s.stop_reason = "max_steps"
        elif c.max_minutes and s.elapsed >= 60 * c.max_minutes:
            s.stop_reason = "max_minutes"
        elif c.patience and s.bad_evals >= c.patience:
            s.stop_reason = "early_stopping"
        return bool(s.stop_reason)

    def run(self) -> TrainState:
        self.state.stop_reason = ""
        if self.should_stop():
            return self.state
        total = self.cfg.max_steps or None
        bar = tqdm(
            total=total, initial=self.state.step, disable=not self.dist.main, mininterval=10, desc="train"
        )
        window = Window(self.state.elapsed)
        pin = self.device.type == "cuda"
        start, base = time.perf_counter(), self.state.elapsed
        with interrupt_flag(self.dist.world == 1) as interrupted:
            for batch in prefetch(self.batches(self.state.epoch, self.state.batch_pos), pin=pin):
                batch = batch.to(self.device, non_blocking=pin)
                lr = self.set_lr()
                loss = self.train_step(batch)
                s = self.state
                s.step, s.epoch, s.batch_pos = s.step + 1, batch.where[0], batch.where[1] + self.dist.world
                s.pairs_seen += batch.size * self.dist.world
                s.elapsed = self.synced_elapsed(base + time.perf_counter() - start)
                window.add(loss, batch.size * self.dist.world, s.elapsed)
                bar.update(1)
                if s.step % self.cfg.log_every == 0:
                    self.log_train(lr, window, bar)
                if s.step % self.cfg.eval_every == 0:
                    self.validate()
                if interrupted.is_set():
                    s.stop_reason = "interrupted"
                if self.should_stop() or s.step % self.cfg.save_every == 0:
                    self.save_checkpoint()
                if s.stop_reason:
                    break
        bar.close()
        self.state.stop_reason = self.state.stop_reason or "max_epochs"
        if self.state.step % self.cfg.eval_every:
            self.validate()
        self.save_checkpoint()
        return self.state

    # ---- validation and logs -------------------------------------------------------

    def validate(self) -> dict[str, float]:
        self.check_finite()
        if self.hooks.evaluate is None:
            return {}
        t0 = time.perf_counter()
        self.model.eval()
        with torch.no_grad(), self.computing():
            metrics = self.hooks.evaluate(self.raw)
        self.model.train()
        value = metrics.get(self.hooks.metric, math.inf)
        if value < self.state.best:
            self.state.best, self.state.bad_evals = value, 0
            if self.dist.main and self.hooks.save is not None:
                self.hooks.save(self.out / "best.pt", self.raw, step=self.state.step, best_valid=value)
        else:
            self.state.bad_evals += 1
        row = {"step": self.state.step, "minutes": round(self.state.elapsed / 60, 3), **metrics}
        row["eval_seconds"] = round(time.perf_counter() - t0, 2)
        if self.dist.main:
            append_csv(self.out / "valid_log.csv", row)
            tqdm.write("valid " + " ".join(f"{k}={fmt_value(v)}" for k, v in row.items()))
        return metrics

    def log_train(self, lr: float, window: Window, bar: tqdm) -> None:
        self.check_finite()
        loss, rate = window.mean_loss(), window.rate()
        window.reset()
        s = self.state
        row = {
            "step": s.step,
            "epoch": s.epoch,
            "minutes": round(s.elapsed / 60, 3),
            "pairs_seen": s.pairs_seen,
            "lr": lr,
            "train_loss": round(loss, 4),
            "pairs_per_s": round(rate, 1),
        }
        bar.set_postfix(loss=f"{loss:.3f}", pairs_s=f"{rate:.0f}", refresh=False)
        if self.dist.main:
            append_csv(self.out / "train_log.csv", row)
            if self.hooks.on_log:
                self.hooks.on_log(row)


@contextmanager
def interrupt_flag(wanted: bool) -> Iterator[threading.Event]:
    """While training: the first SIGINT (Ctrl-C, or ``timeout -s INT`` on a lent machine) only
    sets the event, so the loop stops after its step, validates and saves; a second one
    interrupts at once. ``wanted`` False (several ranks, which must stop at the same step) or
    outside the main thread: SIGINT keeps its usual KeyboardInterrupt."""
    event = threading.Event()
    if not wanted or threading.current_thread() is not threading.main_thread():
        yield event
        return

    def first(signum: int, frame: object) -> None:
        event.set()
        signal.signal(signal.SIGINT, previous)  # the next Ctrl-C is the usual one
        print("\ninterrupted: stopping after this step to validate and save", flush=True)

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield event
    finally:
        signal.signal(signal.SIGINT, previous)
