"""POST /api/v1/generate: lower lines for an upper line."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response, status
from starlette.concurrency import run_in_threadpool

from model.decoding.plan import ConstraintError
from serve.banners import banner_table, with_banners
from serve.batching import JOB_TIMING, JobTiming
from serve.couplets import Busy, Query, WorkerLost
from serve.deps import RateLimited, ServiceDep, SettingsDep
from serve.observability import Metrics, server_timing
from serve.routers.info import RESTART_RETRY_AFTER
from serve.schemas import GenerateRequest, GenerateResponse
from serve.validation import clean_chars, clean_line, clean_locks, refuse

router = APIRouter(tags=["couplets"], dependencies=[RateLimited])


@router.post("/generate", response_model=GenerateResponse)
async def generate(
    body: GenerateRequest, settings: SettingsDep, service: ServiceDep, request: Request, response: Response
) -> GenerateResponse:
    """Candidates for ``upper``, each with its tones and rule report, and the training-set flag.

    The response's ``Server-Timing`` header says how long the decode waited in the queue and
    how long it took (``queue;dur=…, infer;dur=…`` in milliseconds), or ``cache;desc=hit``."""
    metrics: Metrics = request.app.state.metrics
    if body.n > settings.max_candidates:
        raise refuse(
            f"最多可以要 {settings.max_candidates} 个下联", f"At most {settings.max_candidates} candidates."
        )
    upper = clean_line(body.upper, settings.max_chars)
    query = Query(
        upper=upper,
        n=body.n,
        tone_mode=body.tone_mode,
        locks=clean_locks(body.locks, upper),
        required_first=clean_chars(body.required_first, ("藏头字", "The required first character")),
        required_chars=clean_chars(body.required_chars, ("嵌字", "The required characters")),
        fast=body.fast,
        diverse=body.diverse,
    )
    if query.required_first is not None and len(query.required_first) != 1:
        raise refuse("藏头只能是一个字", "The required first character must be one character.")
    timing = JobTiming()  # filled in by the decode thread that decodes this request's batch
    token = JOB_TIMING.set(timing)
    try:
        answer = await service.generate(query)
    except Busy as exc:
        metrics.refused.labels("queue_full").inc()
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            detail="服务器正忙，请稍后再试 / The server is busy; please retry shortly.",
            headers={"Retry-After": "1"},
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
    finally:
        JOB_TIMING.reset(token)
    response.headers["Server-Timing"] = server_timing(timing)
    metrics.withheld.inc(answer.filtered)
    table = await run_in_threadpool(banner_table, settings, service.model)  # loaded on first use
    if table is None:
        return answer
    # about 2 ms a candidate: off the event loop
    candidates = await run_in_threadpool(
        with_banners, answer.candidates, table, answer.upper, query.tone_mode
    )
    return answer.model_copy(update={"candidates": candidates})
