"""The run's logs: a window of losses between log lines, and the CSV files a resume cuts back
to its checkpoint's step."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import torch

from data.files import atomic_file


class Window:
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


def fmt_value(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def append_csv(path: Path, row: dict[str, Any]) -> None:
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


def truncate_csv(path: Path, step: int) -> None:
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
