"""Shared objects as ``Annotated`` dependencies: settings, the couplet service, the feedback store.

They are ``async`` because they only read app state: FastAPI would run plain functions on
its thread pool, a hop per dependency per request.
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from serve.couplets import CoupletService
from serve.db import FeedbackStore
from serve.ratelimit import RateLimiter
from serve.settings import Settings


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_service(request: Request) -> CoupletService:
    return request.app.state.service


async def get_store(request: Request) -> FeedbackStore:
    return request.app.state.feedback


def _limit(limiter: RateLimiter, request: Request, reason: str) -> None:
    # The socket peer, unless the server was told to believe a proxy's X-Forwarded-For
    # (Settings.trusted_proxies, applied by uvicorn before the app sees the request).
    client = request.client.host if request.client else "unknown"
    wait = limiter.allow(client)
    if wait > 0:
        request.app.state.metrics.refused.labels(reason).inc()
        seconds = max(1, math.ceil(wait))  # whole seconds, the same in the body and in Retry-After
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            detail=f"请求太频繁，请 {seconds} 秒后再试 / Too many requests; retry in {seconds} s.",
            headers={"Retry-After": str(seconds)},
        )


async def rate_limit(request: Request) -> None:
    _limit(request.app.state.limiter, request, "rate_limited")


async def admin_rate_limit(request: Request) -> None:
    """The admin endpoint's own, tighter limit: a token cannot be guessed at the API's pace."""
    _limit(request.app.state.admin_limiter, request, "admin_rate_limited")


SettingsDep = Annotated[Settings, Depends(get_settings)]
ServiceDep = Annotated[CoupletService, Depends(get_service)]
StoreDep = Annotated[FeedbackStore, Depends(get_store)]
RateLimited = Depends(rate_limit)
AdminRateLimited = Depends(admin_rate_limit)
