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

import csv
import io
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, cast

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from tqdm import tqdm

from data.files import atomic_file
from model.net.batch import Batch
from model.net.checkpoint import CorruptCheckpoint, load_checkpoint, verified
from model.net.transformer import PAD_ID, check_field_types
from model.training.batches import prefetch
from model.training.errors import TrainingDiverged
from model.training.losses import cross_entropy, distillation


@dataclass
class TrainConfig:
    lr: float = 1e-3
    min_lr_ratio: float = 0.05  # cosine decay ends at lr * min_lr_ratio
    warmup_steps: int = 400
    weight_decay: float = 0.01
    beta2: float = 0.98
    label_smoothing: float = 0.1
    # with a teacher (``Trainer``'s): the share of the loss that is the KL divergence of the
    # model's token distributions from the teacher's, the rest the reference lines' cross-entropy
    distill_weight: float = 0.5
    clip_norm: float = 1.0
    batch_tokens: int = 4096  # padded source + target tokens per batch (per rank)
    max_steps: int = 0  # 0: no step limit
    max_minutes: float = 0.0  # wall-clock training budget across resumes; 0: none
    max_epochs: int = 0  # 0: no epoch limit
    eval_every: int = 500
    save_every: int = 500
    keep_last: int = 3
    patience: int = 0  # evaluations without improvement before stopping; 0: never
    seed: int = 1234
    amp: str = "auto"  # bf16 autocast: "bf16", "off", or "auto" (on where bf16 matmuls are fast)
    threads: int = 0  # torch threads on CPU; 0: leave as is
    log_every: int = 50
    # keep the character embeddings (and the output layer tied to them) as initialised: the
    # lower_to_upper model shares the upper_to_lower model's table in a bundle (--init-from)
    freeze_embeddings: bool = False

    def __post_init__(self) -> None:
        check_field_types(self)
        positive = ("lr", "batch_tokens", "eval_every", "save_every", "keep_last", "log_every")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        not_negative = ("warmup_steps", "weight_decay", "clip_norm", "max_steps", "max_minutes")
        for name in (*not_negative, "max_epochs", "patience", "threads"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        for name in ("min_lr_ratio", "distill_weight"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        for name in ("beta2", "label_smoothing"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.amp not in ("auto", "bf16", "off"):
            raise ValueError(f"amp must be auto, bf16 or off, got {self.amp!r}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown training option(s): {', '.join(sorted(unknown))}")
        return cls(**d)


class PairSource(Protocol):
    """Where batches come from: index lists per epoch, and how to turn one into tensors."""

    def epoch_batches(self, epoch: int, seed: int) -> list[list[int]]: ...

    def collate(self, indices: list[int]) -> Batch: ...


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls) -> Dist:
        return cls(
            int(os.environ.get("RANK", 0)),
            int(os.environ.get("WORLD_SIZE", 1)),
            int(os.environ.get("LOCAL_RANK", 0)),
        )


# The options that shape a stretch of training (its learning-rate course, loss and length):
# resuming with any of them changed starts a new stretch, whose early stopping counts only
# its own evaluations (a warm restart's first evaluations are worse than the best before it).
SCHEDULE = (
    "lr",
    "min_lr_ratio",
    "warmup_steps",
    "label_smoothing",
    "distill_weight",
    "max_steps",
    "max_minutes",
    "max_epochs",
    "patience",
)


@dataclass
class TrainState:
    step: int = 0
    epoch: int = 0
    batch_pos: int = 0  # index of the next batch in this epoch's list (before rank split)
    pairs_seen: int = 0
    elapsed: float = 0.0  # training seconds, summed across resumes
    best: float = math.inf  # best validation metric (lower is better)
    bad_evals: int = 0
    stop_reason: str = ""


@dataclass
class Hooks:
    """What the caller plugs in: validation, saving, and progress text."""

    evaluate: Callable[[nn.Module], dict[str, float]] | None = None
    save: Callable[..., object] | None = None  # save(path, model, **state)
    metric: str = "valid_loss"  # the key of evaluate()'s result that early stopping watches
    on_log: Callable[[dict[str, Any]], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


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
                _truncate_csv(self.out / "train_log.csv", 0)
                _truncate_csv(self.out / "valid_log.csv", 0)
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
            _truncate_csv(self.out / "train_log.csv", self.state.step)
            _truncate_csv(self.out / "valid_log.csv", self.state.step)
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
        window = _Window(self.state.elapsed)
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
            _append_csv(self.out / "valid_log.csv", row)
            tqdm.write("valid " + " ".join(f"{k}={_fmt(v)}" for k, v in row.items()))
        return metrics

    def log_train(self, lr: float, window: _Window, bar: tqdm) -> None:
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
            _append_csv(self.out / "train_log.csv", row)
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


class _Window:
    """Mean loss and pairs per second since the last log line."""

    def __init__(self, elapsed: float) -> None:
        self.t_end = elapsed
        self.reset()

    def reset(self) -> None:
        self.losses: list[torch.Tensor] = []
        self.pairs = 0
        self.t_start = self.t_end

    def add(self, loss: torch.Tensor, pairs: int, elapsed: float) -> None:
        self.losses.append(loss)
        self.pairs += pairs
        self.t_end = elapsed

    def mean_loss(self) -> float:
        return float(torch.stack(self.losses).float().mean()) if self.losses else 0.0

    def rate(self) -> float:
        span = self.t_end - self.t_start
        return self.pairs / span if span > 0 else 0.0


def _fmt(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _append_csv(path: Path, row: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with open(path, "a", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def _row_step(row: dict[str, str | None]) -> int | None:
    try:
        return int(row.get("step") or "")
    except ValueError:  # a row cut short by a kill
        return None


def _truncate_csv(path: Path, step: int) -> None:
    """Drop rows written after ``step`` (and rows cut short) by a run that was killed before
    its next checkpoint, rewriting the file atomically; with nothing left, remove it. A row is
    cut short when it has too few or too many fields, or when it is the last and the file does
    not end with its newline (a value cut in the middle, \"1500\" written as \"15\")."""
    if not path.exists():
        return
    text = path.read_text(encoding="utf-8")
    cut = not text.endswith("\n")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = list(reader)
    names = list(reader.fieldnames or [])
    whole = rows[:-1] if cut else rows
    keep = [
        r
        for r in whole
        if (s := _row_step(r)) is not None and s <= step and None not in r and None not in r.values()
    ]
    if len(keep) == len(rows):
        return
    if not keep:
        path.unlink()
        return
    with atomic_file(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=names)
        writer.writeheader()
        writer.writerows(keep)
