"""Micro-batching: requests that wait together and ask the same of the same model are decoded
in one ``generate_batch`` call, on worker threads, so the event loop never runs the model.

A worker takes the oldest waiting job and every later job that can share its beam search
(same model, same options, same line length), up to ``max_batch``; the others keep their
places in the queue. One beam search over 16 lines costs about four times one line's on a
CPU, so under load the throughput grows with the batch, while a lone request goes at once.

Each job keeps the request id it was submitted under (serve.logs), and its timings: a request
that wants them sets a ``JobTiming`` in ``JOB_TIMING`` before it submits (the generate route,
for its Server-Timing header). ``observer``, when set, is told of every batch decoded: its size,
how long each of its jobs waited, how long the decode took (serve.observability's metrics).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from duilian.service import set_decode_threads
from serve.logs import REQUEST_ID

log = logging.getLogger(__name__)


@dataclass
class JobTiming:
    """Where a decode's time went, in seconds: waiting in the queue for a decode thread, and
    the decode of its batch (in a worker process: sending, decoding, answering back)."""

    queued: float = 0.0
    decoding: float = 0.0
    batch_size: int = 0


JOB_TIMING: ContextVar[JobTiming | None] = ContextVar("job_timing", default=None)


class BatchObserver(Protocol):
    def __call__(self, size: int, waits: list[float], seconds: float) -> None: ...


class Answerer(Protocol):
    def answer_batch(self, queries: list[Any], oversample: int) -> list[Any]: ...


class Finisher(Protocol):
    def __call__(self, model: Any, query: Any, answer: Any) -> Any: ...


@dataclass
class _Job:
    model: Answerer
    query: Any  # a frozen dataclass with an ``upper`` field
    future: Future[Any] = field(default_factory=Future)
    request_id: str = field(default_factory=REQUEST_ID.get)
    timing: JobTiming | None = field(default_factory=JOB_TIMING.get)
    submitted: float = field(default_factory=time.perf_counter)

    def batch_key(self) -> tuple[int, Any, int]:
        return id(self.model), replace(self.query, upper=""), len(self.query.upper)


class DecodeBatcher:
    def __init__(self, oversample: int, workers: int = 2, threads: int = 1, max_batch: int = 16) -> None:
        self.oversample = oversample
        self.threads = threads
        self.max_batch = max_batch
        self.observer: BatchObserver | None = None
        # what each answer gets in the decode thread before its request wakes (the server: its
        # known lines and 横批, ``Library.finish``): no extra hop, and a cached answer has them
        self.finish: Finisher | None = None
        self._jobs: deque[_Job] = deque()
        self._busy: list[_Job] = []  # the first job of each batch being decoded
        self._ready = threading.Condition()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"decode-{i}", daemon=True)
            for i in range(max(workers, 1))
        ]
        for t in self._threads:
            t.start()

    @property
    def pending(self) -> int:
        return len(self._jobs)

    def holds(self, model: Answerer) -> bool:
        """Whether a job for ``model`` is waiting or being decoded."""
        with self._ready:
            return any(j.model is model for j in (*self._jobs, *self._busy))

    def submit(self, model: Answerer, query: Any) -> Future[Any]:
        job = _Job(model, query)
        with self._ready:
            self._jobs.append(job)
            self._ready.notify()
        return job.future

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        for t in self._threads:
            t.join(timeout=30)

    def _take(self) -> list[_Job] | None:
        """The oldest job and the later ones that share its batch key; None once closed and empty."""
        with self._ready:
            while not self._jobs and not self._closed:
                self._ready.wait()
            if not self._jobs:
                return None
            first = self._jobs.popleft()
            key, batch, others = first.batch_key(), [first], list[_Job]()
            while self._jobs and len(batch) < self.max_batch:
                job = self._jobs.popleft()
                (batch if job.batch_key() == key else others).append(job)
            self._jobs.extendleft(reversed(others))
            self._busy.append(first)
            return batch

    def _work(self) -> None:
        # Per thread: OpenMP's thread count is not inherited by threads Python starts, and
        # workers each using every core fight over them (several times slower on 2 cores).
        set_decode_threads(self.threads)
        while (batch := self._take()) is not None:
            # this thread's log lines (and the worker's) name the requests of the batch
            token = REQUEST_ID.set(",".join(dict.fromkeys(j.request_id for j in batch)))
            try:
                self._settle(batch)
            finally:
                REQUEST_ID.reset(token)
                with self._ready:
                    self._busy.remove(batch[0])

    def _settle(self, batch: list[_Job]) -> None:
        """Each job's future gets its answer, or the exception its line (or the batch) raised;
        its timing is filled in first, so that it is there when its request wakes."""
        started = time.perf_counter()
        try:
            answers = batch[0].model.answer_batch([j.query for j in batch], self.oversample)
        except Exception as exc:  # a bug must fail these requests, never the worker
            log.exception("decoding failed")
            answers = [exc] * len(batch)
        self._timed(batch, started, time.perf_counter())
        for job, result in zip(batch, answers, strict=True):
            if isinstance(result, Exception):
                job.future.set_exception(result)
            else:
                job.future.set_result(self._finished(job, result))

    def _finished(self, job: _Job, answer: Any) -> Any:
        if self.finish is None:
            return answer
        try:
            return self.finish(job.model, job.query, answer)
        except Exception:  # the answer goes out without what finishing adds, never not at all
            log.exception("finishing an answer failed")
            return answer

    def _timed(self, batch: list[_Job], started: float, ended: float) -> None:
        waits = [started - j.submitted for j in batch]
        for job, wait in zip(batch, waits, strict=True):
            if job.timing is not None:
                job.timing.queued, job.timing.decoding = wait, ended - started
                job.timing.batch_size = len(batch)
        if self.observer is not None:
            try:
                self.observer(len(batch), waits, ended - started)
            except Exception:  # metrics must never stop a decode thread
                log.exception("batch observer failed")
