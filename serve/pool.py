"""Decode worker processes: ``PooledModel``, the bundle's ``Library`` whose decodes run in
worker processes, each holding its own ``LoadedModel`` (the pool, its watchdog, restarts).

Python's global lock keeps decode threads of one process from running side by side, so the
server hands its batches to processes; a worker that dies fails only the jobs it held.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from data.sensitive import SensitiveFilter
from duilian.check import CheckReport
from duilian.engine import Engine, set_decode_threads
from duilian.inputs import AlternativesQuery, Query
from duilian.service import Library, LoadedModel
from duilian.suggestions import Suggestions
from model.decoding.answer import Alternatives, Answer
from model.store.bundle import load_bundle
from serve.logs import NO_REQUEST, REQUEST_ID, LogSetup, configure_logging

log = logging.getLogger(__name__)


_WORKER_MODEL: LoadedModel | None = None  # in a decode worker process: its copy of the model


def _exit_with_parent(interval: float = 1.0) -> None:
    """In a decode worker: end this process as soon as the server that started it is gone,
    however it went (SIGKILL included), so no worker is left holding its model under PID 1.

    It waits on its parent sentinel (a pipe whose other end only the server holds, closed by
    the kernel when the server dies) and checks its parent's pid as well (the forkserver's,
    which ends with the server). Not ``PR_SET_PDEATHSIG``: the worker's parent is the
    forkserver, and that signal follows the *thread* that started a process."""
    parent, ppid = multiprocessing.parent_process(), os.getppid()
    sentinels = [parent.sentinel] if parent is not None and parent.sentinel is not None else []
    while True:
        if (sentinels and wait(sentinels, timeout=interval)) or os.getppid() != ppid:
            os._exit(EXIT_PARENT_GONE)
        if not sentinels:
            time.sleep(interval)


EXIT_PARENT_GONE = 3


def _start_worker(
    path: Path,
    extra: SensitiveFilter | None,
    engine: Engine,
    threads: int,
    logs: LogSetup | None = None,
    env: dict[str, str] | None = None,
) -> None:
    global _WORKER_MODEL
    if env is not None:  # the server's environment as it is now (a forkserver keeps that of its start)
        os.environ.clear()
        os.environ.update(env)
    if logs is not None:  # the server's log format, in this process too
        configure_logging(logs)
    threading.Thread(target=_exit_with_parent, name="parent-watch", daemon=True).start()
    set_decode_threads(threads)
    # lazy: a worker decodes and never looks up the known lower lines (the server process does),
    # so it does not decompress them (about a second of each start and restart, and their memory)
    _WORKER_MODEL = LoadedModel.load(path, extra, engine, lazy=True)
    log.info("decode worker %d ready with model %s", os.getpid(), _WORKER_MODEL.version)


def _worker_answer(
    queries: list[Query], oversample: int, request_id: str = NO_REQUEST
) -> list[Answer | Exception]:
    REQUEST_ID.set(request_id)  # the ids of the batch's requests, for this worker's log lines
    start = time.perf_counter()
    answers = _worker_model().answer_batch(queries, oversample)
    log.debug("decoded %d lines in %.3f s", len(queries), time.perf_counter() - start)
    return answers


def _worker_alternatives(query: AlternativesQuery, request_id: str = NO_REQUEST) -> Alternatives:
    REQUEST_ID.set(request_id)
    return _worker_model().alternatives(query)


def _worker_suggestions(report: CheckReport, request_id: str = NO_REQUEST) -> Suggestions:
    REQUEST_ID.set(request_id)
    return _worker_model().suggestions(report)


def _worker_model() -> LoadedModel:
    if _WORKER_MODEL is None:
        raise RuntimeError("decode worker started without its model")
    return _WORKER_MODEL


def _worker_main(conn: Connection, start_args: tuple[Any, ...]) -> None:
    """A decode worker's life: load the model, say so (``("ready", pid)``, or ``("failed",
    why)``), then answer one job at a time on ``conn``, ``(fn, args)`` -> ``("ok", result)`` or
    ``("error", exception)``, until the server closes its end."""
    try:
        _start_worker(*start_args)
    except BaseException as exc:  # the bundle went missing, no memory: the server says why
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):  # the server closed its end, or is gone
            return
        try:
            reply: tuple[str, Any] = ("ok", fn(*args))
        except Exception as exc:  # a ConstraintError is the request's answer, raised there
            reply = ("error", exc)
        try:
            conn.send(reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:  # never die of an odd result
            conn.send(("error", RuntimeError(f"decode worker could not send its answer: {exc}")))


class WorkerLost(Exception):
    """A decode worker died (killed, out of memory) with this request in its hands, or no
    worker came back in time: the request is refused with a 503, never retried (the request
    itself may be what killed the worker)."""


PRELOAD = "serve.worker_preload"  # what the forkserver imports once, for every worker it forks


def _context() -> multiprocessing.context.BaseContext:
    """Workers are forked from a forkserver (a fresh process that only imports; never a fork
    of this server, which runs threads) that has imported the service and jieba's dictionary
    once (serve/worker_preload.py; not ONNX Runtime, whose import starts threads, nor PyTorch,
    which a worker needs only to export graphs the cache lacks): a replacement worker skips
    those imports."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([PRELOAD])
    return context


class _Unsent(Exception):
    """A job that never reached its worker (dead): another worker may take it."""


class _Slot:
    """One decode worker: a process of its own, and the server's end of its pipe. One job at a
    time goes down the pipe (``lock``); ``jobs`` counts those holding or waiting for it. A
    plain pipe, not a ``ProcessPoolExecutor``: its feeder and result threads cost the server
    0.55 ms of CPU a job where the pipe costs 0.12 (a round trip, measured), and the worker's
    death is simply the end of the pipe."""

    def __init__(self, context: Any, start_args: tuple[Any, ...]) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, start_args), daemon=True)
        self.process.start()
        child.close()  # the worker's end lives in the worker only: its death closes the pipe
        self.lock = threading.Lock()
        self.jobs = 0
        self.pid = 0
        self.lost = False

    def ready(self) -> int:
        """Wait until the worker has loaded its model; its pid (RuntimeError if it failed)."""
        try:
            kind, value = self.conn.recv()
        except (EOFError, OSError) as exc:
            self.stop()
            code = self.process.exitcode
            raise RuntimeError(f"decode worker exited while starting (exit code {code})") from exc
        if kind != "ready":
            self.stop()
            raise RuntimeError(f"decode worker did not start: {value}")
        self.pid = int(value)
        return self.pid

    def broken(self) -> bool:
        if self.lost:
            return True
        try:  # by the sentinel, which tells even when another waitpid caller reaped it
            return bool(wait([self.process.sentinel], timeout=0))
        except (ValueError, OSError):  # closed: stopped
            return True

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in the worker; WorkerLost if it dies holding the job. ``_Unsent`` if it
        never read it (dead already, its death not yet told by its sentinel, which the forkserver
        sets once it has reaped it; or dead with the job still unread in its socket, which the
        kernel tells by resetting the connection, where a worker that had read it ends cleanly)."""
        with self.lock:
            if self.lost:
                raise _Unsent
            try:
                self.conn.send((fn, args))
            except OSError as exc:  # a broken pipe: nobody reads its other end
                self.lost = True
                raise _Unsent from exc
            try:
                kind, value = self.conn.recv()
            except ConnectionResetError as exc:  # it closed with the job unread: it never had it
                self.lost = True
                raise _Unsent from exc
            except (EOFError, OSError) as exc:  # its end closed with nothing unread: it held the job
                self.lost = True
                raise WorkerLost("a decode worker died while decoding this request") from exc
        if kind == "error":
            raise value
        return value

    def stop(self, timeout: float = 10.0) -> None:
        """End the worker (once it has answered the job in its hands) and wait for it."""
        with self.lock:
            self.lost = True
            self.conn.close()  # its recv ends: it returns
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout)


class PooledModel(Library):
    """The bundle's ``Library`` (no models, no decoder: what the server answers itself, the
    model info, the known lower lines and the 横批) whose decodes run in worker processes, each
    holding its own ``LoadedModel``: Python's global lock keeps decode threads of one process
    from running side by side (docs/EXPERIMENTS.md).

    Each worker is on its own (``_Slot``) and a job goes to the one holding fewest. A worker
    that dies fails only the jobs it held (``WorkerLost``: a 503); the others go on answering
    at once while a watchdog thread starts its replacement (again after a pause while starting
    fails), and ``healthy`` is False until it runs. With no worker alive, new jobs wait up to
    ``restart_wait`` seconds for one."""

    def __init__(
        self,
        path: Path,
        extra: SensitiveFilter | None,
        engine: Engine,
        processes: int,
        threads: int,
        restart_wait: float = 30.0,
        logs: LogSetup | None = None,
        banners: Path | None = None,
    ) -> None:
        super().__init__(load_bundle(path), extra, banners)
        self.processes, self.restart_wait = processes, restart_wait
        self._start_args = (path, extra, engine, threads, logs)
        self.restarts = 0  # workers started after one died
        self._changed = threading.Condition()  # a worker replaced, or one broke, or a job ended
        self._closed = False
        self.slots: list[_Slot | None] = list(self._start_slots(processes))
        self._watchdog = threading.Thread(target=self._watch, name="pool-watchdog", daemon=True)
        self._watchdog.start()

    def _start_slots(self, count: int) -> list[_Slot]:
        """``count`` workers, started side by side; each has loaded the model when this returns."""
        env = dict(os.environ)  # the forkserver's environment is that of its start: pass this one
        context = _context()
        slots = [_Slot(context, (*self._start_args, env)) for _ in range(count)]
        try:
            for slot in slots:
                slot.ready()
        except BaseException:
            for slot in slots:
                slot.stop(timeout=1.0)
            raise
        return slots

    def _working(self) -> list[_Slot]:
        return [s for s in self.slots if s is not None and not s.broken()]

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids, as started (a dead one's until it is replaced)."""
        return [s.pid for s in self.slots if s is not None]

    @property
    def healthy(self) -> bool:
        """All its workers are alive (False from a worker's death until its replacement runs)."""
        return not self._closed and len(self._working()) == self.processes

    @property
    def alive(self) -> int:
        """Worker processes alive now."""
        return len(self._working())

    @property
    def in_flight(self) -> int:
        """Jobs in the workers' hands now."""
        with self._changed:
            return sum(s.jobs for s in self.slots if s is not None)

    def _watch(self) -> None:
        while True:
            try:
                self._keep_workers()
                return
            except Exception:  # never let the watchdog die: it is the only one restarting workers
                log.exception("decode worker watchdog")

    def _keep_workers(self) -> None:
        pause = 0.5
        while True:
            with self._changed:
                while not self._closed and all(s is not None and not s.broken() for s in self.slots):
                    self._changed.wait(timeout=0.2)
                if self._closed:
                    return
                index = next(i for i, s in enumerate(self.slots) if s is None or s.broken())
                dead, self.slots[index] = self.slots[index], None
                self._changed.notify_all()
            if dead is not None:
                log.error("decode worker %d of model %s died; starting another", dead.pid, self.version)
                threading.Thread(target=dead.stop, name="worker-reaper", daemon=True).start()
            try:
                [slot] = self._start_slots(1)
            except Exception as exc:  # the model went missing, no memory: try again after a pause
                log.error("a decode worker did not start (%s); trying again in %.1f s", exc, pause)
                with self._changed:
                    self._changed.wait(timeout=pause)
                pause = min(pause * 2, 10.0)
                continue
            with self._changed:
                if self._closed:
                    slot.stop()
                    return
                self.slots[index], pause = slot, 0.5
                self.restarts += 1
                self._changed.notify_all()
            log.info("decode worker %d of model %s running: %s", slot.pid, self.version, self.pids)

    def _take_slot(self) -> _Slot:
        """The working worker holding fewest jobs (waiting up to ``restart_wait`` for one),
        its count of jobs raised."""
        deadline = time.monotonic() + self.restart_wait
        with self._changed:
            while True:
                if self._closed:
                    raise WorkerLost("this model's decode workers were retired")
                working = self._working()
                if working:
                    slot = min(working, key=lambda s: s.jobs)
                    slot.jobs += 1
                    return slot
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WorkerLost("no decode worker is running")
                self._changed.wait(timeout=min(left, 0.2))

    def answer_batch(self, queries: list[Query], oversample: int) -> list[Answer | Exception]:
        return self._in_worker(_worker_answer, queries, oversample, REQUEST_ID.get())

    def alternatives(self, query: AlternativesQuery) -> Alternatives:
        """``LoadedModel.alternatives`` in a worker (its ConstraintError raised here)."""
        found: Alternatives = self._in_worker(_worker_alternatives, query, REQUEST_ID.get())
        return found

    def suggestions(self, report: CheckReport) -> Suggestions:
        """``LoadedModel.suggestions`` in a worker."""
        found: Suggestions = self._in_worker(_worker_suggestions, report, REQUEST_ID.get())
        return found

    def _in_worker(self, fn: Callable[..., Any], *args: Any) -> Any:
        for _ in range(self.processes + 1):  # a job no worker received goes to another, or waits
            slot = self._take_slot()
            try:
                return slot.call(fn, *args)
            except _Unsent:
                continue
            finally:
                with self._changed:
                    slot.jobs -= 1
                    self._changed.notify_all()
        raise WorkerLost("no decode worker is running")

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._watchdog.join(timeout=60)
        for slot in self.slots:
            if slot is not None:
                slot.stop()
