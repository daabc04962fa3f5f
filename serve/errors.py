"""The API's refusals as its OpenAPI document states them: every error body is ``ErrorBody``
(``{"detail": "中文 / English"}``, what serve/main.py's handlers send), and each route lists
the statuses it can answer with (``refusals``), so a client generated from the document reads
our errors as they are (docs/ARCHITECTURE.md, "The API's contract")."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    detail: str = Field(
        description="what is wrong, in Chinese and then in English, joined by ' / '",
        examples=["上联不能有阿拉伯数字，请写成汉字 / The upper line must not contain digits."],
    )


RETRY_AFTER = {
    "Retry-After": {
        "description": "whole seconds to wait before the next request",
        "schema": {"type": "integer", "minimum": 1},
    }
}

WHY = {
    400: "a body that is not JSON in UTF-8, or (reload) a model folder that does not load",
    401: "a wrong or missing token",
    403: "the route is switched off on this server",
    404: "nothing of the kind here",
    413: "the body is larger than the server takes (`max_body_bytes`, 64 KiB by default)",
    422: "refused: a field missing, of the wrong type or out of range, or a request the schema cannot "
    "rule out: a line with Latin letters, Arabic digits or no Chinese character, longer than 100 "
    "characters once normalised, `upper` and `lower` both given, a lock pattern or a 藏头 / 嵌字 that "
    "the couplet rules cannot keep, a position with no character to replace",
    429: "too many requests from this client, or (generate) its decode budget spent (a request costs "
    "its characters × candidates): retry after `Retry-After` seconds",
    503: "the model cannot answer now (its decode workers are restarting, the queue is full, or too many "
    "long lines wait): retry after `Retry-After` seconds",
}


def refusals(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route (or a router) for these statuses, each with ``ErrorBody``."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in statuses:
        out[code] = {"model": ErrorBody, "description": WHY[code]}
        if code in (429, 503):  # a 503 of a decode says when to retry too (serve/routers/generate.py)
            out[code]["headers"] = RETRY_AFTER
    return out
