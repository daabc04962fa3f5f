"""Admission: whether a client's request is let in, by its count and by its cost.

Every API request takes one token of its client's request bucket (``rate_limit_per_minute``).
A generate request also takes its cost, the characters of its line times the candidates it
asks for, from its client's cost bucket (``cost_per_minute``, ``cost_burst``): a 100-character
line with 10 candidates costs 1,000, a 7-character one 70, about as their decodes differ
(docs/MEASUREMENTS.md). Both buckets are ``serve.ratelimit`` limiters, in Redis when the
servers share one, so a client's budget holds across replicas. Over either: 429 with
``Retry-After`` and a bilingual detail, before anything is decoded.

Where a line is decoded is the batcher's lane (serve/batching.py): lines of ``long_line_chars``
or more are decoded by at most ``long_lane_workers`` decode threads, behind the short lines,
and at most ``long_lane_pending`` of them wait (beyond: 503 with ``Retry-After``), so a burst of
long lines neither takes every decode worker nor queues for minutes.
"""

from __future__ import annotations

import math

from fastapi import HTTPException, Request, status

from duilian.inputs import Query
from serve.ratelimit import RateLimiter


def request_cost(query: Query) -> int:
    """What a generate request costs its client: characters × candidates asked."""
    return len(query.upper) * query.n


def client_of(request: Request) -> str:
    # The socket peer, unless the server was told to believe a proxy's X-Forwarded-For
    # (Settings.trusted_proxies, applied by uvicorn before the app sees the request).
    return request.client.host if request.client else "unknown"


def too_many(request: Request, wait: float, reason: str, zh: str, en: str) -> HTTPException:
    """The 429 of a spent bucket, counted under ``reason``; whole seconds, the same in the body
    and in ``Retry-After``."""
    request.app.state.metrics.refused.labels(reason).inc()
    seconds = max(1, math.ceil(wait))
    return HTTPException(
        status.HTTP_429_TOO_MANY_REQUESTS,
        detail=f"{zh}，请 {seconds} 秒后再试 / {en}; retry in {seconds} s.",
        headers={"Retry-After": str(seconds)},
    )


async def limit(limiter: RateLimiter, request: Request, reason: str) -> None:
    """One request of this client, or 429."""
    wait = await limiter.take(client_of(request))
    if wait > 0:
        raise too_many(request, wait, reason, "请求太频繁", "Too many requests")


async def charge(request: Request, query: Query) -> None:
    """The request's cost from its client's cost bucket, or 429 (nothing is taken then)."""
    limiter: RateLimiter = request.app.state.cost_limiter
    cost = request_cost(query)
    wait = await limiter.take(client_of(request), cost)
    if wait > 0:
        raise too_many(
            request,
            wait,
            "over_budget",
            f"解码额度已用完（每次请求计字数×候选数，此次 {cost}）",
            f"This client's decoding budget is spent (a request costs characters × candidates, "
            f"this one {cost})",
        )
