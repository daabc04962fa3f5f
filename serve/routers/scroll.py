"""GET /api/v1/scroll.svg: a couplet drawn as a 春联 to print or embed (serve/scroll.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from data.text import is_han
from duilian.inputs import SCROLL_CHARS
from serve.deps import RateLimited, SettingsDep
from serve.errors import ErrorBody, refusals
from serve.scroll import BannerOrder, scroll_svg
from serve.validation import clean_couplet, clean_line, refuse

router = APIRouter(tags=["couplets"], dependencies=[RateLimited], responses=refusals(429))

MAX_BANNER = 8  # a 横批 is four characters as a rule; a few more are taken
SVG_MEDIA_TYPE = "image/svg+xml"
# An SVG opened on its own is a document: it may not run or fetch anything.
SVG_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "public, max-age=86400",
}


def clean_banner(raw: str | None) -> str:
    if raw is None or not raw.strip():
        return ""
    banner = clean_line(raw, MAX_BANNER, ("横批", "The banner"))
    if not all(is_han(ch) for ch in banner):
        raise refuse("横批只能是汉字", "The banner must be Chinese characters only.")
    return banner


@router.get(
    "/scroll.svg",
    response_class=Response,
    responses={
        200: {
            "content": {SVG_MEDIA_TYPE: {"schema": {"type": "string"}}},
            "description": "the 春联 as an SVG document sized in millimetres (strips 1.2 m tall); "
            "the upper line on the right strip, the lower on the left, each top to bottom; "
            "punctuation is not drawn",
        },
        422: {
            "model": ErrorBody,
            "description": "a line or the banner refused; `detail` says why, in Chinese and English",
        },
    },
)
async def scroll(
    settings: SettingsDep,
    upper: Annotated[str, Query(max_length=200, description="上联, drawn on the right strip")],
    lower: Annotated[
        str, Query(max_length=200, description="下联, drawn on the left strip; as long as the upper line")
    ],
    banner: Annotated[
        str | None, Query(max_length=32, description=f"横批 (optional): 1 to {MAX_BANNER} Chinese characters")
    ] = None,
    order: Annotated[
        BannerOrder,
        Query(description="the banner's reading order: rtl (right to left, traditional) or ltr"),
    ] = "rtl",
) -> Response:
    """The couplet as a 春联: two red strips and the 横批 across the top, as SVG (every text escaped)."""
    up, low = clean_couplet(upper, lower, min(settings.max_chars, SCROLL_CHARS))
    svg = scroll_svg(up, low, clean_banner(banner), order)
    return Response(svg, media_type=SVG_MEDIA_TYPE, headers=SVG_HEADERS)
