"""POST /api/v1/feedback: a vote on a candidate, or a person's own lower line."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated

from fastapi import APIRouter, Header, Response, status

from data.rules import check
from model.decoding.answer import report_json
from serve.db import Feedback, KeyReused
from serve.deps import RateLimited, SettingsDep, StoreDep
from serve.errors import refusals
from serve.schemas import FeedbackRequest, FeedbackResponse
from serve.validation import clean_line, refuse

router = APIRouter(tags=["feedback"], dependencies=[RateLimited], responses=refusals(429))


IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,128}")  # printable ASCII, no spaces: a UUID fits


@router.post("/feedback", response_model=FeedbackResponse, status_code=status.HTTP_201_CREATED)
def post_feedback(
    body: FeedbackRequest,
    settings: SettingsDep,
    store: StoreDep,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(
            description="optional, up to 128 printable ASCII characters (a UUID): a post retried "
            "with the same key and body is stored once and answered as the first time"
        ),
    ] = None,
) -> FeedbackResponse:
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
    if idempotency_key is None:
        row_id = store.add(row)
    else:
        if not IDEMPOTENCY_KEY.fullmatch(idempotency_key):
            raise refuse(
                "Idempotency-Key 须为 1 到 128 个可见 ASCII 字符",
                "Idempotency-Key must be 1 to 128 printable ASCII characters.",
            )
        fields = [row.kind, row.upper, row.lower, row.vote, row.model_version]
        fingerprint = hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode()).hexdigest()
        try:
            row_id, replayed = store.add_once(row, idempotency_key, fingerprint)
        except KeyReused:
            raise refuse(
                "这个 Idempotency-Key 已用于另一条反馈",
                "This Idempotency-Key was already used with a different body.",
            ) from None
        if replayed:
            response.headers["Idempotent-Replayed"] = "true"
    return FeedbackResponse.model_validate(
        {"id": row_id, "kind": row.kind, "report": report_json(check(upper, lower))}
    )
