"""Shared objects as ``Annotated`` dependencies: settings, the couplet service, the feedback store.

They are ``async`` because they only read app state: FastAPI would run plain functions on
its thread pool, a hop per dependency per request.
"""

from __future__ import annotations

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


async def rate_limit(request: Request) -> None:
    limiter: RateLimiter = request.app.state.limiter
    client = request.client.host if request.client else "unknown"
    wait = limiter.allow(client)
    if wait > 0:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            detail=f"请求太频繁，请 {wait:.0f} 秒后再试 / Too many requests; retry in {wait:.0f} s.",
            headers={"Retry-After": str(max(1, round(wait)))},
        )


SettingsDep = Annotated[Settings, Depends(get_settings)]
ServiceDep = Annotated[CoupletService, Depends(get_service)]
StoreDep = Annotated[FeedbackStore, Depends(get_store)]
RateLimited = Depends(rate_limit)
