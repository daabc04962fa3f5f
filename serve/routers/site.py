"""The page: GET / serves web/index.html (script and style from /static); GET /docs the API page."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

from serve.deps import SettingsDep

router = APIRouter(include_in_schema=False)


@router.get("/")
def index(settings: SettingsDep) -> FileResponse:
    return FileResponse(settings.web_dir / "index.html", media_type="text/html; charset=utf-8")


@router.get("/docs")
def api_docs() -> HTMLResponse:
    """Swagger UI from the swagger-ui-bundle package's files, mounted at /docs-assets."""
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="对联 duilian API",
        swagger_js_url="/docs-assets/swagger-ui-bundle.js",
        swagger_css_url="/docs-assets/swagger-ui.css",
        swagger_favicon_url="/docs-assets/favicon-32x32.png",
    )
