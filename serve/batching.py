"""Micro-batching: requests that wait together and ask the same of the same model are decoded
in one ``generate_batch`` call, on worker threads, so the event loop never runs the model.

A worker takes the oldest waiting job and every later job that can share its beam search
(same model, same options, same line length), up to ``max_batch``; the others keep their
places in the queue. Lines of ``long_chars`` or more are the long lane: a worker takes a short
line first, and a long one only while fewer than ``long_workers`` workers decode long lines, so
a burst of long lines (a second and more each) always leaves a worker to the short ones.
One beam search over 16 lines costs about four times one line's on a
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

from duilian.engine import set_decode_threads
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
    long: bool = False  # in the long lane

    def batch_key(self) -> tuple[int, Any, int]:
        return id(self.model), replace(self.query, upper=""), len(self.query.upper)


class DecodeBatcher:
    def __init__(
        self,
        oversample: int,
        workers: int = 2,
        threads: int = 1,
        max_batch: int = 16,
        long_chars: int = 0,
        long_workers: int = 1,
    ) -> None:
        self.oversample = oversample
        self.threads = threads
        self.max_batch = max_batch
        self.long_chars = long_chars  # 0: no long lane
        # at least one worker keeps to short lines (one worker alone: it takes both, short first)
        self.long_workers = max(1, min(long_workers, workers - 1))
        self._long_running = 0
        self.long_seconds = 1.0  # a long batch's decode, a moving average (Retry-After's estimate)
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

    def is_long(self, query: Any) -> bool:
        return self.long_chars > 0 and len(query.upper) >= self.long_chars

    @property
    def long_pending(self) -> int:
        """Long lines waiting for a worker."""
        with self._ready:
            return sum(j.long for j in self._jobs)

    def long_wait(self) -> float:
        """About how long a long line submitted now would wait, in seconds."""
        return (self.long_pending + 1) * self.long_seconds / self.long_workers

    def holds(self, model: Answerer) -> bool:
        """Whether a job for ``model`` is waiting or being decoded."""
        with self._ready:
            return any(j.model is model for j in (*self._jobs, *self._busy))

    def submit(self, model: Answerer, query: Any) -> Future[Any]:
        job = _Job(model, query, long=self.is_long(query))
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

    def _first(self) -> _Job | None:
        """The oldest short job, else the oldest long one if the long lane has a worker free."""
        oldest_long = None
        for job in self._jobs:
            if not job.long:
                return job
            oldest_long = oldest_long or job
        return oldest_long if self._long_running < self.long_workers else None

    def _take(self) -> list[_Job] | None:
        """The first job (``_first``) and the later ones that share its batch key; None once
        closed and empty."""
        with self._ready:
            while (first := self._first()) is None:
                if self._closed and not self._jobs:
                    return None
                self._ready.wait()
            key, batch = first.batch_key(), [first]
            for job in self._jobs:
                if len(batch) >= self.max_batch:
                    break
                if job is not first and job.batch_key() == key:
                    batch.append(job)
            taken = {id(j) for j in batch}
            self._jobs = deque(j for j in self._jobs if id(j) not in taken)
            self._busy.append(first)
            self._long_running += first.long
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
                    self._long_running -= batch[0].long
                    self._ready.notify_all()  # a long-lane worker free: a waiting long line may go

    def _settle(self, batch: list[_Job]) -> None:
        """Each job's future gets its answer, or the exception its line (or the batch) raised;
        its timing is filled in first, so that it is there when its request wakes."""
        started = time.perf_counter()
        try:
            answers = batch[0].model.answer_batch([j.query for j in batch], self.oversample)
        except Exception as exc:  # a bug must fail these requests, never the worker
            log.exception("decoding failed")
            answers = [exc] * len(batch)
        ended = time.perf_counter()
        if batch[0].long:
            self.long_seconds = 0.7 * self.long_seconds + 0.3 * (ended - started)
        self._timed(batch, started, ended)
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
