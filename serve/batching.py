"""Micro-batching: requests that arrive together and ask the same of the same model are decoded
in one ``generate_batch`` call, on worker threads, so the event loop never runs the model.

A worker takes the oldest job and every job queued behind it (up to ``max_batch``), groups
them by (model, options), and answers each group at once; a beam search step costs about
the same for one line as for eight, so under load throughput grows with the batch.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import torch

log = logging.getLogger(__name__)


class Answerer(Protocol):
    def answer_batch(self, queries: list[Any], oversample: int) -> list[Any]: ...


@dataclass
class _Job:
    model: Answerer
    query: Any
    future: Future[Any] = field(default_factory=Future)


class DecodeBatcher:
    def __init__(self, oversample: int, workers: int = 2, threads: int = 1, max_batch: int = 16) -> None:
        self.oversample = oversample
        self.threads = threads
        self.max_batch = max_batch
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._threads = [
            threading.Thread(target=self._work, name=f"decode-{i}", daemon=True)
            for i in range(max(workers, 1))
        ]
        for t in self._threads:
            t.start()

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    def submit(self, model: Answerer, query: Any) -> Future[Any]:
        job = _Job(model, query)
        self._queue.put(job)
        return job.future

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(timeout=30)

    def _take(self) -> list[_Job] | None:
        first = self._queue.get()
        if first is None:
            return None
        jobs = [first]
        while len(jobs) < self.max_batch:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None:  # closing: finish this batch, leave the signal for the loop
                self._queue.put(None)
                break
            jobs.append(job)
        return jobs

    def _work(self) -> None:
        # Per thread: OpenMP's thread count is not inherited by threads Python starts, and
        # workers each using every core fight over them (several times slower on 2 cores).
        torch.set_num_threads(self.threads)
        while (jobs := self._take()) is not None:
            groups: dict[tuple[int, Any], list[_Job]] = {}
            for job in jobs:
                groups.setdefault((id(job.model), replace(job.query, upper="")), []).append(job)
            for group in groups.values():
                _settle(group, self.oversample)


def _settle(group: list[_Job], oversample: int) -> None:
    """Each job's future gets its answer, or the exception its line (or the batch) raised."""
    try:
        answers = group[0].model.answer_batch([j.query for j in group], oversample)
    except Exception as exc:  # a bug must fail these requests, never the worker
        log.exception("decoding failed")
        answers = [exc] * len(group)
    for job, result in zip(group, answers, strict=True):
        if isinstance(result, Exception):
            job.future.set_exception(result)
        else:
            job.future.set_result(result)
