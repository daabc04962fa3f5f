"""POST /api/v1/check: a couplet a person wrote, checked against the couplet rules (duilian/check.py)."""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter, HTTPException, status
from fastapi.concurrency import run_in_threadpool
from pydantic import Field

from data.pairing import PairingTable
from duilian.check import CheckReport, check_with
from duilian.suggest import Unsuggestable, plan
from duilian.suggestions import BUSY, NOT_ASKED, Suggestions, unavailable
from serve.couplets import Busy, CoupletService
from serve.deps import RateLimited, ServiceDep, SettingsDep
from serve.errors import ErrorBody, refusals
from serve.pool import WorkerLost
from serve.schemas import Request, ToneMode
from serve.validation import clean_line

router = APIRouter(tags=["couplets"], dependencies=[RateLimited], responses=refusals(429))


class CheckRequest(Request):
    upper: str = Field(..., max_length=200, description="上联, at most 100 characters")
    lower: str = Field(
        ...,
        max_length=200,
        description="下联, at most 100 characters (a length unlike the upper's is reported)",
    )
    tone_mode: ToneMode = Field(
        "modern", description="modern, lenient, or classical (古声: the 平水韵's 入声 characters oblique)"
    )
    suggest: bool = Field(
        True,
        description="suggest characters where the lower line is weak (the alternatives search, run by a "
        "decode worker; false: the check alone, and `suggestions` says they were not asked for)",
    )


@router.post(
    "/check",
    response_model=CheckReport,
    responses={
        422: {"model": ErrorBody, "description": "a line refused; `detail` says why, in Chinese and English"}
    },
)
async def check(body: CheckRequest, settings: SettingsDep, service: ServiceDep) -> CheckReport:
    """Every couplet rule kept or broken and where, clause by clause, with each character's tone, the
    word pairs and how well they pair, whether the couplet is one of the model's training pairs, and
    suggestions: for the lower line's weakest places (a broken rule first, then the weakest word
    pairs), the characters that mend them with the rest of the line kept, each judged by the rules.
    Lines of unequal length are checked too (the length rule says where they part)."""
    upper = clean_line(body.upper, settings.max_chars)
    lower = clean_line(body.lower, settings.max_chars, ("下联", "The lower line"))
    model = service.model  # read once: a reload mid-request does not mix two models' checks
    try:
        report = await run_in_threadpool(check_with, model, upper, lower, body.tone_mode)
    except ValueError as exc:  # e.g. classical tones without a 入声 table
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, detail=f"请求无法处理 / Cannot do this request: {exc}"
        ) from exc
    if not body.suggest:
        return replace(report, suggestions=unavailable(NOT_ASKED))
    return replace(report, suggestions=await suggestions(service, report, model.bundle.pairing))


async def suggestions(
    service: CoupletService, report: CheckReport, pairing: PairingTable | None
) -> Suggestions:
    """duilian.suggest's suggestions, all places of the line in one decode worker's call; a busy
    server or a lost worker gives the check without them, saying why."""
    try:
        plan(report, pairing)  # (lines that do not align say so, busy or not)
    except Unsuggestable as exc:
        return exc.answer
    try:
        return await service.suggestions(report)
    except (Busy, WorkerLost):
        return unavailable(BUSY)
