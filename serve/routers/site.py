"""The page: GET / serves web/index.html; its script and style come from /static."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse

from serve.deps import SettingsDep

router = APIRouter(include_in_schema=False)


@router.get("/")
def index(settings: SettingsDep) -> FileResponse:
    return FileResponse(settings.web_dir / "index.html", media_type="text/html; charset=utf-8")
