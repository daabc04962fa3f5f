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

import numpy as np

from model.net.batch import Batch


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
