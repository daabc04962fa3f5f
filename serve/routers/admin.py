"""POST /api/v1/admin/reload: swap in a newly trained bundle without failing a request."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, status

from serve.deps import AdminRateLimited, ServiceDep, SettingsDep
from serve.errors import refusals
from serve.schemas import ReloadRequest, ReloadResponse

router = APIRouter(
    prefix="/admin", tags=["admin"], dependencies=[AdminRateLimited], responses=refusals(400, 401, 403, 429)
)


def token_matches(given: str, wanted: str) -> bool:
    """In constant time, on bytes: the header as it came (HTTP headers are read as Latin-1, so any
    value encodes back) against the configured token in UTF-8; any other text is just wrong."""
    return secrets.compare_digest(given.encode("latin-1", "replace"), wanted.encode("utf-8"))


@router.post("/reload", response_model=ReloadResponse)
def reload_model(
    body: ReloadRequest,
    settings: SettingsDep,
    service: ServiceDep,
    x_admin_token: Annotated[str | None, Header()] = None,
) -> ReloadResponse:
    """Load the bundle (default: the configured one) beside the serving model, then switch to it."""
    if not settings.admin_token:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, detail="未开启重新加载 / Reload is disabled (no admin token set)."
        )
    if not x_admin_token or not token_matches(x_admin_token, settings.admin_token):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, detail="管理令牌不对 / Wrong or missing X-Admin-Token."
        )
    path = Path(body.model_dir) if body.model_dir else settings.model_dir
    try:
        version, previous, seconds = service.reload(path)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST, detail=f"模型加载失败，继续使用旧模型 / Could not load {path}: {exc}"
        ) from exc
    return ReloadResponse(version=version, previous_version=previous, seconds=round(seconds, 3))
