"""Micro-batching: lines decoded together get the answers they would get alone."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest

from duilian.inputs import Query
from duilian.service import LoadedModel
from model.decoding.answer import Answer
from model.decoding.plan import ConstraintError
from serve.batching import DecodeBatcher
from serve.couplets import Busy, CoupletService
from tests.serve.conftest import PAIRS


@pytest.fixture(scope="module")
def model(bundle_a: Path) -> LoadedModel:
    return LoadedModel.load(bundle_a)


def test_batch_answers_equal_single_answers(model: LoadedModel) -> None:
    queries = [Query(u, 3) for u, _ in PAIRS]
    together = model.answer_batch(queries, 2)
    alone = [model.answer_batch([q], 2)[0] for q in queries]
    assert all(isinstance(a, Answer) and len(a.candidates) == 3 for a in together + alone)
    for t, a in zip(together, alone, strict=True):
        assert isinstance(t, Answer) and isinstance(a, Answer)
        # a batched matmul may round differently in the last bits: texts equal, scores close
        assert [c.text for c in t.candidates] == [c.text for c in a.candidates]
        assert [c.score for c in t.candidates] == pytest.approx([c.score for c in a.candidates], abs=1e-4)
        assert replace(t, candidates=[]) == replace(a, candidates=[])


def test_one_impossible_line_fails_alone(model: LoadedModel) -> None:
    too_long = Query("春" * 101, 2)  # past data.text.LONGEST_LINE
    answers = model.answer_batch([Query("春风得意", 2), too_long, Query("山高水长", 2)], 2)
    assert isinstance(answers[0], Answer) and isinstance(answers[2], Answer)
    assert isinstance(answers[1], ConstraintError)


def test_concurrent_requests_with_mixed_options(model: LoadedModel) -> None:
    service = CoupletService(model, oversample=2, cache_size=0, concurrency=2)

    async def many() -> list[Answer | BaseException]:
        queries = [Query(u, n) for u, _ in PAIRS for n in (1, 4)] + [Query("春风得意", 2, locks="春___")]
        return await asyncio.gather(*(service.generate(q) for q in queries), return_exceptions=True)

    try:
        answers = asyncio.run(many())
    finally:
        service.close()
    *good, locked = answers
    assert [len(a.candidates) for a in good if isinstance(a, Answer)] == [1, 4] * len(PAIRS)
    assert isinstance(locked, ConstraintError)  # 春 is in the upper line: no lower line may reuse it


def test_too_many_waiting_is_busy(model: LoadedModel) -> None:
    service = CoupletService(model, oversample=2, cache_size=0, concurrency=1, max_pending=0)
    try:
        with pytest.raises(Busy):
            asyncio.run(service.generate(Query("春风得意", 1)))
    finally:
        service.close()


class Recorder:
    """An answerer that records each batch it is given; the first batch waits for a signal."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = threading.Event()

    def answer_batch(self, queries: list[Query], oversample: int) -> list[str]:
        self.release.wait(10)
        self.batches.append([q.upper for q in queries])
        return [q.upper for q in queries]


def test_batcher_groups_same_length_lines_in_arrival_order() -> None:
    recorder = Recorder()
    batcher = DecodeBatcher(oversample=0, workers=1, max_batch=2)
    try:
        first = batcher.submit(recorder, Query("春风", 1))
        time.sleep(0.2)  # the worker holds the first job; the rest queue behind it
        lines = ["山高水长", "明月", "花开富贵", "清风", "天天向上", "春风", "东西"]
        futures = [batcher.submit(recorder, Query(u, 1)) for u in lines]
        futures.append(batcher.submit(recorder, Query("莺歌燕舞", 3)))  # other options: its own batch
        recorder.release.set()
        assert [f.result(10) for f in [first, *futures]] == ["春风", *lines, "莺歌燕舞"]
    finally:
        batcher.close()
    assert recorder.batches == [
        ["春风"],
        ["山高水长", "花开富贵"],
        ["明月", "清风"],
        ["天天向上"],
        ["春风", "东西"],
        ["莺歌燕舞"],
    ]


def test_finish_runs_in_the_decode_thread_and_never_loses_an_answer() -> None:
    """``finish`` (the server's 横批) is applied to each answer before its request wakes; an
    answer whose finishing fails goes out as it is, and the other answers are finished."""
    recorder = Recorder()
    recorder.release.set()
    batcher = DecodeBatcher(oversample=0, workers=1)
    threads: list[str] = []

    def finish(model: object, query: Query, answer: str) -> str:
        threads.append(threading.current_thread().name)
        if query.upper == "明月":
            raise RuntimeError("broken table")
        return answer + "+"

    batcher.finish = finish
    try:
        futures = [batcher.submit(recorder, Query(u, 1)) for u in ["春风", "明月", "清风"]]
        assert [f.result(10) for f in futures] == ["春风+", "明月", "清风+"]
    finally:
        batcher.close()
    assert len(threads) == 3 and all(name.startswith("decode-") for name in threads)


class Gate:
    """An answerer whose long lines (5 characters or more) wait until released; short ones
    answer at once. It records the lines as their decodes start."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.release = threading.Event()

    def answer_batch(self, queries: list[Query], oversample: int) -> list[str]:
        self.started.extend(q.upper for q in queries)
        if len(queries[0].upper) >= 5:
            self.release.wait(10)
        return [q.upper for q in queries]


def test_long_lines_take_one_worker_and_short_lines_go_first() -> None:
    gate = Gate()
    batcher = DecodeBatcher(oversample=0, workers=2, long_chars=5, long_workers=1)
    try:
        longs = [batcher.submit(gate, Query(u, 1)) for u in ("一帆风顺年", "万事如意步步", "绿水青山千秋画")]
        time.sleep(0.2)  # one worker decodes the first long line; the lane holds the others back
        assert gate.started == ["一帆风顺年"] and batcher.long_pending == 2
        shorts = [batcher.submit(gate, Query(u, 1)) for u in ("春风", "明月照")]
        assert [f.result(5) for f in shorts] == ["春风", "明月照"]  # the free worker, at once
        assert not any(f.done() for f in longs)
        gate.release.set()
        assert [f.result(10) for f in longs] == ["一帆风顺年", "万事如意步步", "绿水青山千秋画"]
    finally:
        gate.release.set()
        batcher.close()
    assert gate.started[:3] == ["一帆风顺年", "春风", "明月照"]


def test_without_a_lane_long_lines_take_every_worker() -> None:
    gate = Gate()
    batcher = DecodeBatcher(oversample=0, workers=2)  # long_chars 0: no lane, as before
    try:
        longs = [batcher.submit(gate, Query(u, 1)) for u in ("一帆风顺年", "万事如意步步", "绿水青山千秋画")]
        time.sleep(0.2)
        short = batcher.submit(gate, Query("春风", 1))
        time.sleep(0.2)
        assert not short.done() and len(gate.started) == 2  # both workers hold a long line
        gate.release.set()
        assert short.result(10) == "春风" and len([f.result(10) for f in longs]) == 3
    finally:
        gate.release.set()
        batcher.close()


class ServedGate(Gate):
    version = "gate"

    def finish(self, query: Query, answer: str, known: object) -> str:
        return answer


def test_a_full_long_lane_is_busy_with_its_wait_and_short_lines_still_go() -> None:
    gate = ServedGate()
    service = CoupletService(
        cast(LoadedModel, gate),
        oversample=0,
        cache_size=0,
        concurrency=2,
        long_chars=5,
        long_workers=1,
        long_pending=1,
    )

    async def scene() -> tuple[list[object], object]:
        first = asyncio.ensure_future(service.generate(Query("一帆风顺年", 1)))  # decoding
        await asyncio.sleep(0.2)
        second = asyncio.ensure_future(service.generate(Query("万事如意步步", 1)))  # waiting: the lane's one
        await asyncio.sleep(0.2)
        refused: list[object] = []
        try:
            await service.generate(Query("绿水青山千秋画", 1))
        except Busy as exc:
            refused = [exc.reason, exc.retry_after]
        short = await asyncio.wait_for(service.generate(Query("春风", 1)), 5)
        gate.release.set()
        await asyncio.gather(first, second)
        return refused, short

    try:
        refused, short = asyncio.run(scene())
    finally:
        gate.release.set()
        service.close()
    assert refused == ["long_lane_full", 2]  # two long lines ahead, about a second each at first
    assert short == "春风"
