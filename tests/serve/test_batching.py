"""Micro-batching: lines decoded together get the answers they would get alone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from model.decode import ConstraintError
from serve.couplets import Busy, CoupletService, LoadedModel, Query
from serve.schemas import GenerateResponse
from tests.serve.conftest import PAIRS


@pytest.fixture(scope="module")
def model(bundle_a: Path) -> LoadedModel:
    return LoadedModel.load(bundle_a)


def test_batch_answers_equal_single_answers(model: LoadedModel) -> None:
    queries = [Query(u, 3) for u, _ in PAIRS]
    together = model.answer_batch(queries, 2)
    alone = [model.answer_batch([q], 2)[0] for q in queries]
    assert together == alone
    assert all(isinstance(a, GenerateResponse) and len(a.candidates) == 3 for a in together)


def test_one_impossible_line_fails_alone(model: LoadedModel) -> None:
    too_long = "春" * (model.bundle.model.cfg.max_len + 1)
    answers = model.answer_batch([Query("春风得意", 2), Query(too_long, 2), Query("山高水长", 2)], 2)
    assert isinstance(answers[0], GenerateResponse) and isinstance(answers[2], GenerateResponse)
    assert isinstance(answers[1], ConstraintError)


def test_concurrent_requests_with_mixed_options(model: LoadedModel) -> None:
    service = CoupletService(model, oversample=2, cache_size=0, concurrency=2)

    async def many() -> list[GenerateResponse | BaseException]:
        queries = [Query(u, n) for u, _ in PAIRS for n in (1, 4)] + [Query("春风得意", 2, locks="春___")]
        return await asyncio.gather(*(service.generate(q) for q in queries), return_exceptions=True)

    try:
        answers = asyncio.run(many())
    finally:
        service.close()
    *good, locked = answers
    assert [len(a.candidates) for a in good if isinstance(a, GenerateResponse)] == [1, 4] * len(PAIRS)
    assert isinstance(locked, ConstraintError)  # 春 is in the upper line: no lower line may reuse it


def test_too_many_waiting_is_busy(model: LoadedModel) -> None:
    service = CoupletService(model, oversample=2, cache_size=0, concurrency=1, max_pending=0)
    try:
        with pytest.raises(Busy):
            asyncio.run(service.generate(Query("春风得意", 1)))
    finally:
        service.close()
