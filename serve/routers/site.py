"""The page: GET / serves web/index.html (script and style from /static); GET /docs the API page."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse

from serve.deps import SettingsDep
from serve.openapi30 import downgrade

router = APIRouter(include_in_schema=False)


@router.get("/")
def index(settings: SettingsDep) -> FileResponse:
    return FileResponse(settings.web_dir / "index.html", media_type="text/html; charset=utf-8")


@router.get("/docs")
def api_docs(settings: SettingsDep) -> FileResponse:
    """Swagger UI from the swagger-ui-bundle package's files (mounted at /docs-assets), started
    by web/docs.js: no inline script, so the Content-Security-Policy allows none."""
    return FileResponse(settings.web_dir / "docs.html", media_type="text/html; charset=utf-8")


@router.get("/docs/openapi-3.0.json")
def openapi_30(request: Request) -> JSONResponse:
    """The OpenAPI document in its 3.0 form, which the bundled Swagger UI (4.15) renders."""
    return JSONResponse(downgrade(request.app.openapi()))
