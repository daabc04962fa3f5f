"""Shared objects as ``Annotated`` dependencies: settings, the couplet service, the feedback store.

They are ``async`` because they only read app state: FastAPI would run plain functions on
its thread pool, a hop per dependency per request.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from serve.admission import limit
from serve.couplets import CoupletService
from serve.db import FeedbackStore
from serve.settings import Settings


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_service(request: Request) -> CoupletService:
    return request.app.state.service


async def get_store(request: Request) -> FeedbackStore:
    return request.app.state.feedback


async def rate_limit(request: Request) -> None:
    await limit(request.app.state.limiter, request, "rate_limited")


async def admin_rate_limit(request: Request) -> None:
    """The admin endpoint's own, tighter limit: a token cannot be guessed at the API's pace."""
    await limit(request.app.state.admin_limiter, request, "admin_rate_limited")


SettingsDep = Annotated[Settings, Depends(get_settings)]
ServiceDep = Annotated[CoupletService, Depends(get_service)]
StoreDep = Annotated[FeedbackStore, Depends(get_store)]
RateLimited = Depends(rate_limit)
AdminRateLimited = Depends(admin_rate_limit)
