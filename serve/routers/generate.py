"""POST /api/v1/generate: lower lines for an upper line (or upper lines for a lower line)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response, status

from duilian.inputs import InputError, given_line, make_query
from model.decoding.plan import ConstraintError
from serve.admission import charge
from serve.batching import JOB_TIMING, JobTiming
from serve.couplets import Busy
from serve.deps import RateLimited, ServiceDep, SettingsDep
from serve.errors import refusals
from serve.observability import Metrics, server_timing
from serve.pool import WorkerLost
from serve.routers.info import RESTART_RETRY_AFTER
from serve.schemas import GenerateRequest, GenerateResponse
from serve.validation import refused

router = APIRouter(tags=["couplets"], dependencies=[RateLimited], responses=refusals(429, 503))


BUSY = {
    "queue_full": "服务器正忙，请稍后再试 / The server is busy; please retry shortly.",
    "long_lane_full": "长联排队已满，请 {s} 秒后再试 / Too many long lines are waiting; retry in {s} s.",
}


@contextmanager
def decode_refusals(metrics: Metrics) -> Iterator[None]:
    """A decode's refusals as HTTP errors, counted: a full queue or a lost worker (503 with
    ``Retry-After``), an impossible request (422, the constraint named in Chinese and English)."""
    try:
        yield
    except Busy as exc:
        metrics.refused.labels(exc.reason).inc()
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            detail=BUSY[exc.reason].format(s=exc.retry_after),
            headers={"Retry-After": str(exc.retry_after)},
        ) from exc
    except WorkerLost as exc:
        metrics.refused.labels("workers_lost").inc()
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            detail="解码进程意外退出，正在重启，请几秒后再试 / A decoding worker stopped unexpectedly and is "
            "being restarted; please retry in a few seconds.",
            headers={"Retry-After": RESTART_RETRY_AFTER},
        ) from exc
    except ConstraintError as exc:  # its message names the constraint, in Chinese and English
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=str(exc)) from exc
    except ValueError as exc:  # e.g. classical tones without a 入声 table
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, detail=f"请求无法处理 / Cannot do this request: {exc}"
        ) from exc


@router.post("/generate", response_model=GenerateResponse)
async def generate(
    body: GenerateRequest, settings: SettingsDep, service: ServiceDep, request: Request, response: Response
) -> dict[str, Any]:
    """Candidates for ``upper``, each with its tones and rule report, and the training-set flag.

    The response's ``Server-Timing`` header says how long the decode waited in the queue and
    how long it took (``queue;dur=…, infer;dur=…`` in milliseconds), or ``cache;desc=hit``."""
    metrics: Metrics = request.app.state.metrics
    try:  # the command line reads its input through the same function
        line, direction = given_line(body.upper, body.lower, body.direction)
        query = make_query(
            line,
            body.n,
            body.tone_mode,
            body.locks,
            body.required_first,
            body.required_chars,
            body.fast,
            body.diverse,
            direction,
            body.register_,
            max_chars=settings.max_chars,
            max_asked=settings.max_candidates,
        )
    except InputError as exc:
        raise refused(exc) from exc
    await charge(request, query)  # its characters × candidates from the client's budget, or 429
    timing = JobTiming()  # filled in by the decode thread that decodes this request's batch
    token = JOB_TIMING.set(timing)
    try:
        with decode_refusals(metrics):
            answer = await service.generate(query)
    finally:
        JOB_TIMING.reset(token)
    response.headers["Server-Timing"] = server_timing(timing)
    metrics.withheld.labels("generate").inc(answer.filtered)
    return answer.as_json()  # finished in the decode thread: known lines, 横批 (Library.finish)
