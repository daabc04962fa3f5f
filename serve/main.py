"""Assembles the app: settings, lifespan (model, database, known lines), routers, page, errors."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Any, cast

import uvicorn
from fastapi import FastAPI, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from swagger_ui_bundle import swagger_ui_path

from serve.couplets import CoupletService, Engine, Served, extra_filter, load_served
from serve.db import FeedbackStore, make_engine
from serve.errors import refusals
from serve.logs import configure_logging
from serve.observability import Metrics, Observe
from serve.observability import router as metrics_router
from serve.ratelimit import make_limiter
from serve.routers import admin, alternatives, banners, check, compose, feedback, generate, info, scroll, site
from serve.settings import Settings
from serve.shared_cache import SharedCache

log = logging.getLogger("serve")


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings.log_setup())  # python -m serve did already; an app run otherwise too
        load = functools.partial(
            load_served,
            extra=extra_filter(settings),
            engine=Engine(settings.int8, settings.runtime, settings.graph_cache),
            processes=settings.decode_processes,
            threads=settings.torch_threads,
            restart_wait=settings.worker_restart_wait,
            logs=settings.log_setup(),  # the decode workers log as the server does
            banners=settings.banners,
        )

        def loader(path: Path) -> Served:
            model = load(path)
            model.warm_banners()  # at start-up and on a reload, before the model serves
            return model

        model = await run_in_threadpool(loader, settings.model_dir)
        app.state.service = CoupletService(
            model,
            oversample=settings.oversample,
            cache_size=settings.cache_size,
            concurrency=settings.decode_concurrency,
            threads=settings.torch_threads,
            max_batch=settings.max_batch,
            max_pending=settings.max_pending,
            long_chars=settings.long_line_chars,
            long_workers=settings.long_lane_workers,
            long_pending=settings.long_lane_pending,
            loader=loader,
        )
        app.state.service.batcher.observer = app.state.metrics.observe_batch
        if settings.shared_cache and settings.redis_url:
            app.state.service.shared = SharedCache(settings.redis_url)
        engine = make_engine(settings.database_url)
        app.state.feedback = FeedbackStore(engine)
        app.state.limiter = make_limiter(
            settings.redis_url, "api", settings.rate_limit_per_minute, settings.rate_limit_burst
        )
        app.state.admin_limiter = make_limiter(
            settings.redis_url, "admin", settings.admin_rate_limit_per_minute, settings.admin_rate_limit_burst
        )
        app.state.cost_limiter = make_limiter(  # characters × candidates (serve/admission.py)
            settings.redis_url, "cost", settings.cost_per_minute, settings.cost_burst
        )
        if settings.known_pairs is not None:  # tens of seconds for the full corpus: not on the way up
            threading.Thread(
                target=app.state.service.load_known, args=(settings.known_pairs,), daemon=True
            ).start()
        log.info("serving model %s from %s", model.version, settings.model_dir)
        yield
        app.state.service.close()
        for limiter in (app.state.limiter, app.state.admin_limiter, app.state.cost_limiter):
            await limiter.close()
        if app.state.service.shared is not None:
            await app.state.service.shared.close()
        engine.dispose()

    app = FastAPI(
        title="对联 duilian",
        summary="Lower lines (下联) for an upper line (上联) under the couplet rules",
        version="1",
        lifespan=lifespan,
        docs_url=None,  # served by the site router from local assets: no CDN, works offline
        redoc_url=None,
        redirect_slashes=False,  # a redirect would be built from the request's Host header
        # operationId = the route's function (generate, alternatives, post_feedback): the names
        # a client generated from the document gives its calls (tests/serve/test_generated_client.py)
        generate_unique_id_function=lambda route: route.name,
        # any route: a body that is no JSON, the body limit, our bilingual 422 (serve/errors.py)
        responses=refusals(400, 413, 422),
    )
    app.state.settings = settings
    app.state.metrics = Metrics(app)
    for router in (
        generate.router,
        alternatives.router,
        banners.router,
        check.router,
        compose.router,
        scroll.router,
        feedback.router,
        info.router,
        admin.router,
    ):
        app.include_router(router, prefix="/api/v1")
    app.include_router(site.router)
    if settings.metrics:
        app.include_router(metrics_router)
    app.mount("/static", StaticFiles(directory=settings.web_dir), name="static")
    app.mount("/docs-assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(Observe, metrics=app.state.metrics, routes=app.router.routes)  # outermost
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)
    return app


# The page's and /docs's policy: their own scripts and styles only (data: images: the page's empty
# favicon, Swagger UI's icons), nothing framed, nothing sent elsewhere.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


def run(settings: Settings, host: str, port: int) -> None:
    """Serve the site under uvicorn until it is stopped (``python -m serve``). uvicorn's own
    lines (start-up, access log) go through the same handler as ours: in the chosen format, with
    the request id (``log_config=None``: uvicorn installs no handlers of its own)."""
    configure_logging(settings.log_setup())
    app = create_app(settings)
    uvicorn.run(
        app, host=host, port=port, log_level=settings.log_level, log_config=None, **uvicorn_options(settings)
    )


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """How uvicorn must run this app. Its default believes X-Forwarded-For from 127.0.0.1, so a
    client on the same host (or behind a proxy that passes the header on) could name itself
    anew in every request and never meet the rate limit: forwarded headers are read only from
    the proxies the operator lists in ``trusted_proxies``."""
    proxies = [p.strip() for p in settings.trusted_proxies.split(",") if p.strip()]
    return {
        "proxy_headers": bool(proxies),
        "forwarded_allow_ips": ",".join(proxies) if proxies else "",
        "server_header": False,
    }


class SecurityHeaders:
    """Adds the security headers to every response (the page, the API, its errors, static files)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = CSP  # the API page too: Swagger UI sets its styles through the DOM, which CSP allows

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(b"content-security-policy", csp.encode()), *SECURITY_HEADERS]
                message["headers"] = [*message.get("headers", []), *(h for h in extra if h[0] not in names)]
            await send(message)

        await self.app(scope, receive, with_headers)


class BodyLimit:
    """Refuses a request body over ``max_bytes`` with a 413 in the API's JSON form: at once
    when its Content-Length says so, else (a body sent in chunks) as soon as it has read more.
    (FastAPI's own ``max_body_size`` answers in plain text, and replaces any response to a
    request whose length is over it, so it is not used.)"""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    def too_large(self) -> HTTPException:
        return HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE,
            f"请求体太大，上限 {self.max_bytes} 字节 / The body is larger than {self.max_bytes} bytes.",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_bytes:
            error = self.too_large()
            await JSONResponse(status_code=error.status_code, content={"detail": error.detail})(
                scope, receive, send
            )
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b"")) if message["type"] == "http.request" else 0
            if seen > self.max_bytes:
                raise self.too_large()  # inside the route: its handler answers in JSON
            return message

        await self.app(scope, limited, send)


# The framework's own refusals, in English only, said in both languages like the API's own.
FRAMEWORK_DETAILS = {
    "There was an error parsing the body": "请求体无法读取，须为 UTF-8 编码的 JSON / "
    "The body could not be read: send JSON encoded in UTF-8.",
}
TYPE_PROBLEMS = {  # pydantic's error types for a value of the wrong JSON type, said in Chinese
    "int_type": "须为整数",
    "bool_type": "须为 true 或 false",
    "string_type": "须为字符串",
    "literal_error": "取值不在允许的范围内",
    "string_pattern_mismatch": "格式不对",
    "string_too_long": "太长",
    "greater_than_equal": "太小",
    "missing": "缺少此项",
    "extra_forbidden": "不认识这个字段",
}
BODY_PROBLEMS = {  # pydantic's error types for a body that is not a JSON object
    "json_invalid": "请求体不是合法的 JSON / The body is not valid JSON",
    "model_attributes_type": "请求体须为 JSON 对象 / The body must be a JSON object "
    "(sent with Content-Type: application/json)",
}


STATUS_DETAILS = {  # the framework's refusals by status, when their detail is the bare phrase
    404: "没有这个地址 / Not found: no such page or endpoint.",
    405: "这个地址不接受这种请求方法 / Method not allowed for this endpoint (see the Allow header).",
}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if isinstance(exc.detail, str) and exc.detail in FRAMEWORK_DETAILS:
        return JSONResponse(status_code=exc.status_code, content={"detail": FRAMEWORK_DETAILS[exc.detail]})
    if exc.status_code in STATUS_DETAILS and exc.detail == HTTPStatus(exc.status_code).phrase:
        return JSONResponse(
            status_code=exc.status_code,
            content={"detail": STATUS_DETAILS[exc.status_code]},
            headers=exc.headers,
        )
    return cast(JSONResponse, await http_exception_handler(request, exc))


async def _invalid_request(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()

    def field(e: dict[str, object]) -> str:
        loc = e.get("loc", ())
        return ".".join(str(p) for p in loc if p != "body") if isinstance(loc, tuple | list) else ""

    zh = "；".join(
        f"{field(e)} {TYPE_PROBLEMS[kind]}" for e in errors if (kind := str(e.get("type"))) in TYPE_PROBLEMS
    )
    problems = "; ".join(
        BODY_PROBLEMS.get(e.get("type", ""), "") or f"{field(e)}: {e.get('msg', '')}" for e in errors
    )
    return JSONResponse(
        status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        content={"detail": f"请求格式不对{'：' + zh if zh else ''} / Invalid request: {problems}"},
    )


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    # Logged here with its traceback; the client gets a plain message, never the trace.
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    # Answered outside the middleware (Starlette's outermost layer), so the request id and the
    # security headers are put on here.
    rid = getattr(request.state, "request_id", None)
    return JSONResponse(
        status_code=status.HTTP_500_INTERNAL_SERVER_ERROR,
        content={"detail": "服务器出错了，请稍后再试 / Internal server error; please try again."},
        headers={
            "Content-Security-Policy": CSP,
            **{k.decode(): v.decode() for k, v in SECURITY_HEADERS},
            **({"X-Request-ID": rid} if rid else {}),
        },
    )
