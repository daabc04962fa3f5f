"""POST /api/v1/check: a couplet a person wrote, checked against the couplet rules (duilian/check.py)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from pydantic import Field

from duilian.check import CheckReport, check_with
from serve.deps import RateLimited, ServiceDep, SettingsDep
from serve.errors import ErrorBody, refusals
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


@router.post(
    "/check",
    response_model=CheckReport,
    responses={
        422: {"model": ErrorBody, "description": "a line refused; `detail` says why, in Chinese and English"}
    },
)
def check(body: CheckRequest, settings: SettingsDep, service: ServiceDep) -> CheckReport:
    """Every couplet rule kept or broken and where, clause by clause, with each character's tone, the
    word pairs and how well they pair, and whether the couplet is one of the model's training pairs.
    Lines of unequal length are checked too (the length rule says where they part)."""
    upper = clean_line(body.upper, settings.max_chars)
    lower = clean_line(body.lower, settings.max_chars, ("下联", "The lower line"))
    try:  # service.model read once: a reload mid-request does not mix two models
        return check_with(service.model, upper, lower, body.tone_mode)
    except ValueError as exc:  # e.g. classical tones without a 入声 table
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, detail=f"请求无法处理 / Cannot do this request: {exc}"
        ) from exc
