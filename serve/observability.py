"""What an operator sees of the running server: Prometheus metrics at ``GET /metrics``, and a
request id on every response and every log line (serve.logs).

Every metric is recorded in the server process, which is the one Prometheus scrapes: the
queue, the batches handed to the decode workers and how long each took are all seen there, so
the worker processes keep no metrics and prometheus-client's multi-process mode is not needed.
``python -m serve`` runs one uvicorn process; several servers (behind a load balancer) are
several scrape targets. Each app has its own registry (``Metrics.registry``), so apps built
side by side (the tests) count apart.

Labels are bounded: the route is the template that matched (``/api/v1/generate``,
``/static/{path}``; ``unmatched`` for a 404), never the raw path, and the method is one of
the HTTP methods or ``other``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator, Sequence
from typing import Any

import fastapi.routing
from fastapi import APIRouter, HTTPException, Request, Response, status
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, get_route_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve.batching import JobTiming
from serve.logs import REQUEST_ID, new_request_id, sane_request_id

UNMATCHED = "unmatched"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
QUEUE_SECONDS = (0.001, 0.0025, *SECONDS)
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
REFUSALS = ("rate_limited", "admin_rate_limited", "queue_full", "workers_lost")


class Metrics:
    """The app's metrics, in a registry of its own. ``app`` is read at scrape time for what the
    couplet service holds (queue, cache, workers, model), once its lifespan has started it."""

    def __init__(self, app: Any) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "duilian_http_requests",
            "HTTP requests answered, by method, route template and status code",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "duilian_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response, by method and route template",
            ["method", "route"],
            buckets=SECONDS,
            registry=r,
        )
        self.in_flight = Gauge("duilian_http_requests_in_flight", "HTTP requests being handled", registry=r)
        self.refused = Counter(
            "duilian_requests_refused",
            "Requests refused for load: rate_limited and admin_rate_limited (429), queue_full and "
            "workers_lost (503 from generate and alternatives)",
            ["reason"],
            registry=r,
        )
        for reason in REFUSALS:
            self.refused.labels(reason)
        self.withheld = Counter(
            "duilian_candidates_withheld",
            "What the sensitive-word filter kept out of responses (their 'filtered' field, counted "
            "per response, cached answers included), by route: whole candidates from generate, "
            "characters from alternatives",
            ["route"],
            registry=r,
        )
        for route in ("generate", "alternatives"):
            self.withheld.labels(route)
        self.batch_size = Histogram(
            "duilian_decode_batch_size",
            "Lines decoded together in one beam search (one micro-batch handed to a decode worker)",
            buckets=BATCH_SIZES,
            registry=r,
        )
        self.queue_wait = Histogram(
            "duilian_decode_queue_seconds",
            "Time a decode waited in the queue before a decode thread took its batch",
            buckets=QUEUE_SECONDS,
            registry=r,
        )
        self.batch_seconds = Histogram(
            "duilian_decode_batch_seconds",
            "Time one micro-batch took to decode, seen from the server (with a worker process: "
            "sending, decoding, answering back)",
            buckets=SECONDS,
            registry=r,
        )
        r.register(ServiceCollector(app))
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)

    def observe_batch(self, size: int, waits: list[float], seconds: float) -> None:
        """serve.batching's observer: called by a decode thread after each batch."""
        self.batch_size.observe(size)
        for wait in waits:
            self.queue_wait.observe(wait)
        self.batch_seconds.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class ServiceCollector(Collector):
    """What the couplet service holds, read when scraped: the decode queue, the result cache's
    hits and misses, the decode workers, the model's version."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def describe(self) -> list[Any]:
        return []  # its families are not fixed before the service starts: collected at each scrape

    def collect(self) -> Iterator[Any]:
        service = getattr(self.app.state, "service", None)
        if service is None:  # before the lifespan has loaded the model
            return
        yield GaugeMetricFamily(
            "duilian_decode_queue_depth", "Decodes waiting for a decode thread", value=service.batcher.pending
        )
        cache = CounterMetricFamily(
            "duilian_generate_cache_lookups",
            "Generate requests answered from the result cache (hit) or decoded (miss)",
            labels=["result"],
        )
        cache.add_metric(["hit"], service.cache_hits)
        cache.add_metric(["miss"], service.cache_misses)
        yield cache
        alive, wanted = service.workers()
        workers = GaugeMetricFamily(
            "duilian_decode_workers",
            "Decode worker processes alive and wanted (0 and 0: the server process decodes)",
            labels=["state"],
        )
        workers.add_metric(["alive"], alive)
        workers.add_metric(["wanted"], wanted)
        yield workers
        info = GaugeMetricFamily(
            "duilian_model_info", "The model being served (always 1)", labels=["version"]
        )
        info.add_metric([service.model.version], 1)
        yield info


def flat_routes(routes: Sequence[BaseRoute]) -> list[Any]:
    """Every route with its full path: FastAPI from 0.16x keeps an included router as one entry
    of the app's list (``fastapi.routing.iter_route_contexts`` walks into it), older versions
    copy its routes into the list."""
    walk = getattr(fastapi.routing, "iter_route_contexts", None)
    return list(walk(routes)) if walk is not None else list(routes)


def route_template(routes: Sequence[Any], scope: Scope) -> str:
    """The template of the route that takes this request (``/api/v1/generate``,
    ``/static/{path}``), of one that matches it but for the method (405), or ``unmatched``."""
    path, method, partial = get_route_path(scope), scope["method"], UNMATCHED
    for route in routes:
        regex, template = getattr(route, "path_regex", None), getattr(route, "path_format", None)
        if regex is None or template is None or not regex.match(path):
            continue
        methods = getattr(route, "methods", None)
        if not methods or method in methods:
            return str(template)
        if partial == UNMATCHED:
            partial = str(template)
    return partial


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class Observe:
    """The outermost middleware: gives the request its id (the client's ``X-Request-ID`` when
    it is sane, else a new one) for the log lines and the response header, and counts and
    times the request by route template and status.

    The id is set in ``serve.logs.REQUEST_ID`` and left there: each request runs in a task of
    its own (its own copy of the context), and the 500 handler, outside this middleware, logs
    under it and answers with it (``request.state.request_id``)."""

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: Sequence[BaseRoute]) -> None:
        self.app, self.metrics, self.routes = app, metrics, routes
        self._flat: tuple[int, list[Any]] = (-1, [])

    def templates(self) -> list[Any]:
        """The app's routes, flattened again whenever one was added to the app."""
        if self._flat[0] != len(self.routes):
            self._flat = (len(self.routes), flat_routes(self.routes))
        return self._flat[1]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = _header(scope, b"x-request-id")
        rid = given if given is not None and sane_request_id(given) else new_request_id()
        REQUEST_ID.set(rid)
        scope.setdefault("state", {})["request_id"] = rid
        method = scope["method"] if scope["method"] in METHODS else "other"
        route = route_template(self.templates(), scope)  # before routing changes the scope (mounts do)
        code = 500  # unless a response starts: an exception the 500 handler answers outside
        start = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
                headers = [h for h in message.get("headers", []) if h[0].lower() != b"x-request-id"]
                message["headers"] = [*headers, (b"x-request-id", rid.encode())]
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self.metrics.in_flight.dec()
            self.metrics.requests.labels(method, route, str(code)).inc()
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - start)


def server_timing(timing: JobTiming | None) -> str:
    """The ``Server-Timing`` header of a generate response: milliseconds queued and decoding
    (``infer``), or ``cache;desc=hit`` for an answer from the result cache."""
    if timing is None or timing.batch_size == 0:
        return "cache;desc=hit"
    return f"queue;dur={timing.queued * 1000:.3f}, infer;dur={timing.decoding * 1000:.3f}"


router = APIRouter(include_in_schema=False)


@router.get("/metrics")
def metrics(request: Request) -> Response:
    """The Prometheus exposition (text format) of this server's metrics."""
    token: str | None = request.app.state.settings.metrics_token
    if token:
        given = request.headers.get("authorization", "")
        scheme, _, credentials = given.partition(" ")
        ok = scheme.lower() == "bearer" and secrets.compare_digest(
            credentials.strip().encode("latin-1", "replace"), token.encode("utf-8")
        )
        if not ok:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                detail="指标需要令牌 / /metrics wants the header Authorization: Bearer <token>.",
                headers={"WWW-Authenticate": "Bearer"},
            )
    return Response(request.app.state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
