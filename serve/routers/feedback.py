"""POST /api/v1/feedback: a vote on a candidate, or a person's own lower line."""

from __future__ import annotations

from fastapi import APIRouter, status

from data.rules import check
from serve.couplets import report_out
from serve.db import Feedback
from serve.deps import RateLimited, SettingsDep, StoreDep
from serve.schemas import FeedbackRequest, FeedbackResponse
from serve.validation import clean_line, refuse

router = APIRouter(tags=["feedback"], dependencies=[RateLimited])


@router.post("/feedback", response_model=FeedbackResponse, status_code=status.HTTP_201_CREATED)
def post_feedback(body: FeedbackRequest, settings: SettingsDep, store: StoreDep) -> FeedbackResponse:
    """Store the feedback and return its id, with the pair's rule report."""
    upper = clean_line(body.upper, settings.max_chars)
    lower = clean_line(body.lower, settings.max_chars, ("下联", "The lower line"))
    if body.kind == "vote" and body.vote is None:
        raise refuse("投票要给出 vote：1 或 -1", "A vote needs `vote`: 1 or -1.")
    row = Feedback(
        kind=body.kind,
        upper=upper,
        lower=lower,
        vote=body.vote if body.kind == "vote" else None,
        model_version=body.model_version,
    )
    return FeedbackResponse(
        id=store.add(row), kind=row.kind, report=report_out(check(upper, lower).as_dict())
    )
