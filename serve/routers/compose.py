"""POST /api/v1/compose: whole couplets from a head (藏头, a name) or keywords (嵌字), duilian/compose.py."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from duilian.compose import Composition, compose, make_compose_request
from duilian.inputs import InputError
from serve.couplets import Busy
from serve.deps import RateLimited, ServiceDep, SettingsDep
from serve.errors import ErrorBody, refusals
from serve.observability import Metrics
from serve.routers.generate import decode_refusals
from serve.schemas import Request as Body
from serve.schemas import ToneMode
from serve.validation import refused

router = APIRouter(tags=["couplets"], dependencies=[RateLimited], responses=refusals(429, 503))


class ComposeRequest(Body):
    head: str | None = Field(
        None,
        max_length=16,
        description="藏头: 2 characters (the upper line begins with the first, the lower with the second), "
        "or one for each clause (4 for a pattern of two clauses: the upper line's clauses begin with the "
        "first two, the lower's with the last two)",
    )
    keywords: str | None = Field(
        None,
        max_length=16,
        description="嵌字: characters to place in the couplet, the 1st, 3rd ... in the upper line, the 2nd, "
        "4th ... in the lower (head or keywords, or both, must be given)",
    )
    length: int | str = Field(
        7,
        description='characters a line: 5, 7, 9, 11 ..., or clause lengths such as "4,7" (at most 4 clauses)',
    )
    n: int = Field(3, description="how many couplets, 1 to 10")
    tone_mode: ToneMode = Field(
        "modern", description="modern, lenient, or classical (古声: the 平水韵's 入声 characters oblique)"
    )
    seed: int = Field(0, ge=0, le=2**31 - 1, description="another seed gives other couplets; 0 the best")


@router.post(
    "/compose",
    response_model=Composition,
    responses={
        422: {
            "model": ErrorBody,
            "description": "input refused (a head that is not Chinese characters or of the wrong length, an "
            "unknown pattern, a character in both lines), or no couplet of that pattern could be written; "
            "`detail` says why, in Chinese and English",
        },
    },  # its 429 and 503 (with Retry-After) are the router's
)
async def compose_couplets(
    body: ComposeRequest, settings: SettingsDep, service: ServiceDep, request: Request
) -> dict[str, Any]:
    """Whole couplets (upper line, lower line, 横批) for a head or keywords, best first, each keeping
    every rule: the hard rules, the upper line ending 仄 and the lower 平, 马蹄韵 where there are
    clauses; each with the check of POST /api/v1/check. The same request always gets the same
    couplets (another `seed`, other ones)."""
    metrics: Metrics = request.app.state.metrics
    try:
        query = make_compose_request(
            body.head, body.keywords, body.length, body.n, body.tone_mode, body.seed, settings.max_candidates
        )
    except InputError as exc:
        raise refused(exc) from exc
    with decode_refusals(metrics):
        if service.pending >= service.max_pending:  # shed load as generate does
            raise Busy
        model = service.model  # one read: a reload mid-request does not mix two models
        found = await asyncio.to_thread(compose, model, query)
    return found.as_json()
