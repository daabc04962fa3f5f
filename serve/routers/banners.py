"""GET /api/v1/banners: 横批 for a couplet, ranked by fit to its theme (``Library.banners_for``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
from starlette.concurrency import run_in_threadpool

from duilian.banners import BANNERS_SHOWN
from serve.deps import RateLimited, ServiceDep, SettingsDep
from serve.errors import ErrorBody, refusals
from serve.schemas import BannersResponse, ToneMode
from serve.validation import clean_couplet

router = APIRouter(tags=["couplets"], dependencies=[RateLimited], responses=refusals(429))


@router.get(
    "/banners",
    response_model=BannersResponse,
    responses={
        422: {"model": ErrorBody, "description": "a line refused; `detail` says why, in Chinese and English"},
        404: {"model": ErrorBody, "description": "the served model has no 横批 table"},
    },
)
async def banners(
    settings: SettingsDep,
    service: ServiceDep,
    upper: Annotated[str, Query(max_length=200, description="上联")],
    lower: Annotated[str, Query(max_length=200, description="下联, as long as the upper line")],
    n: Annotated[int, Query(ge=1, le=BANNERS_SHOWN, description="how many 横批")] = BANNERS_SHOWN,
    tone_mode: ToneMode = "modern",
) -> BannersResponse:
    """Up to five four-character 横批 for the couplet, best fit to its theme first, with tone marks."""
    up, low = clean_couplet(upper, lower, settings.max_chars)
    found = await run_in_threadpool(service.model.banners_for, up, low, tone_mode, n)
    if found is None:
        raise HTTPException(  # no 横批 for this model at all: not a passing fault of the server's (503)
            status.HTTP_404_NOT_FOUND,
            detail="这个模型没有横批表 / The served model has no 横批 table.",
        )
    return BannersResponse(upper=up, lower=low, banners=found)
