"""POST /api/v1/alternatives: the characters that may replace one character of a lower line."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from duilian.inputs import MAX_ALTERNATIVES, InputError, make_alternatives_query
from serve.deps import RateLimited, ServiceDep, SettingsDep
from serve.errors import ErrorBody, refusals
from serve.observability import Metrics
from serve.routers.generate import decode_refusals
from serve.schemas import AlternativesRequest, AlternativesResponse
from serve.validation import refused

router = APIRouter(tags=["couplets"], dependencies=[RateLimited], responses=refusals(429, 503))


@router.post(
    "/alternatives",
    response_model=AlternativesResponse,
    responses={
        422: {
            "model": ErrorBody,
            "description": "input refused, or no character fits there under the rules; `detail` says "
            "why, in Chinese and English",
        },
    },  # its 503 (with Retry-After) is the router's
)
async def alternatives(
    body: AlternativesRequest, settings: SettingsDep, service: ServiceDep, request: Request
) -> dict[str, Any]:
    """The best characters for one position of a lower line, the rest of the line kept, best first.

    Each listed character keeps every rule the search keeps (punctuation and repeats mirrored: a
    position of a repeat group changes with all its copies, listed in `positions`; no character
    of the upper line; the tone at the end; no character twice unless mirrored; the locks, 藏头
    and 嵌字; no filtered word). They are ranked by the search's score of the whole line with
    each (the model's teacher-forced log-probability plus the pairing table, the tagger's opinion
    and the tone preferences); the line's own character is listed too when it keeps the rules."""
    metrics: Metrics = request.app.state.metrics
    try:
        query = make_alternatives_query(
            body.upper,
            body.lower,
            body.position,
            body.n,
            body.tone_mode,
            body.locks,
            body.required_first,
            body.required_chars,
            body.direction,
            max_chars=settings.max_chars,
            max_asked=MAX_ALTERNATIVES,
        )
    except InputError as exc:
        raise refused(exc) from exc
    with decode_refusals(metrics):
        answer = await service.alternatives(query)
    metrics.withheld.labels("alternatives").inc(answer.filtered)
    return answer.as_json()  # validated as AlternativesResponse by the route
