"""What a training run is told and what it keeps: its options (``TrainConfig``), where its
batches come from (``PairSource``), its place among ranks (``Dist``), the state a checkpoint
carries (``TrainState``) and what its caller plugs in (``Hooks``)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from torch import nn

from model.net.batch import Batch
from model.net.transformer import check_field_types


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
