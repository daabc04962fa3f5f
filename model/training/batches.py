"""Length-bucketed batches of token-id pairs, prepared ahead on a thread.

A pair is two integer sequences (source, target). Batches hold pairs of similar length
so little is padding; their order is a pure function of (seed, epoch), so a resumed run
sees exactly the batches an uninterrupted run would.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from data.vocab import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Batch:
    src: Tensor  # (B, S) source ids, PAD_ID-padded
    tgt_in: Tensor  # (B, T) BOS + target ids
    tgt_out: Tensor  # (B, T) target ids + EOS
    where: tuple[int, int] = (0, 0)  # (epoch, position in the epoch's batch list), for resuming

    @property
    def size(self) -> int:
        return int(self.src.size(0))

    def to(self, device: torch.device, non_blocking: bool = False) -> Batch:
        src, tgt_in, tgt_out = (
            t.to(device, non_blocking=non_blocking) for t in (self.src, self.tgt_in, self.tgt_out)
        )
        return Batch(src, tgt_in, tgt_out, self.where)

    def pin_memory(self) -> Batch:
        return Batch(self.src.pin_memory(), self.tgt_in.pin_memory(), self.tgt_out.pin_memory(), self.where)


def collate(pairs: Sequence[tuple[Sequence[int] | np.ndarray, Sequence[int] | np.ndarray]]) -> Batch:
    b = len(pairs)
    s = max(len(src) for src, _ in pairs)
    t = max(len(tgt) for _, tgt in pairs) + 1
    src = np.full((b, s), PAD_ID, dtype=np.int64)
    tgt_in = np.full((b, t), PAD_ID, dtype=np.int64)
    tgt_out = np.full((b, t), PAD_ID, dtype=np.int64)
    for i, (x, y) in enumerate(pairs):
        src[i, : len(x)] = x
        tgt_in[i, 0] = BOS_ID
        tgt_in[i, 1 : len(y) + 1] = y
        tgt_out[i, : len(y)] = y
        tgt_out[i, len(y)] = EOS_ID
    return Batch(torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out))


def bucket_batches(lengths: Sequence[int], batch_tokens: int, seed: int, epoch: int) -> list[list[int]]:
    """Index lists of batches: shuffled, sorted by length in large chunks, cut by a token budget.

    The budget counts the padded (longest) length of source plus target per pair.
    """
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    lens = np.asarray(lengths)
    chunk = max(1, batch_tokens // 4) * 32
    batches: list[list[int]] = []
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        part = part[np.argsort(lens[part], kind="stable")]
        batches.extend(_cut(part, lens, batch_tokens))
    rng.shuffle(batches)
    return batches


def _cut(sorted_idx: np.ndarray, lens: np.ndarray, batch_tokens: int) -> list[list[int]]:
    out: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in sorted_idx.tolist():
        longest_if = max(longest, int(lens[i]))
        if current and longest_if * 2 * (len(current) + 1) > batch_tokens:
            out.append(current)
            current, longest_if = [], int(lens[i])
        current.append(i)
        longest = longest_if
    if current:
        out.append(current)
    return out


def prefetch(batches: Iterator[Batch], depth: int = 4, pin: bool = False) -> Iterator[Batch]:
    """Collate ahead on a daemon thread (and pin memory for asynchronous copies to a GPU)."""
    q: queue.Queue[Batch | None] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def work() -> None:
        try:
            for b in batches:
                if stop.is_set():
                    return
                q.put(b.pin_memory() if pin else b)
        finally:
            q.put(None)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        while (item := q.get()) is not None:
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # unblock a worker waiting on a full queue
            with contextlib.suppress(queue.Empty):
                q.get(timeout=0.05)
