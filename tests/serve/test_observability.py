"""Observability through the real app: Prometheus metrics that move with real requests (read
back with prometheus-client's own parser), the request id on every response and log line, the
Server-Timing header of generate, JSON log lines from the server and from a decode worker."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from contextvars import copy_context
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from crawler.localredis import free_port
from serve.batching import JOB_TIMING, JobTiming
from serve.couplets import CoupletService, Query
from serve.logs import REQUEST_ID
from serve.main import create_app
from serve.observability import Metrics
from serve.settings import Settings
from tests.serve.conftest import BAD_WORD, wait_known

GENERATED_ID = re.compile(r"[0-9a-f]{32}")
Labels = frozenset[tuple[str, str]]


def scrape(client: TestClient, **headers: str) -> dict[tuple[str, Labels], float]:
    r = client.get("/metrics", headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return parse(r.text)


def parse(text: str) -> dict[tuple[str, Labels], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict[tuple[str, Labels], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@contextmanager
def app_client(settings: Settings, **changes: Any) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update=changes))
    with TestClient(app, raise_server_exceptions=False) as c:
        wait_known(app)
        yield c


# --- metrics ---------------------------------------------------------------------------------


def test_requests_are_counted_by_route_template_and_status(client: TestClient) -> None:
    before = scrape(client)
    assert client.post("/api/v1/generate", json={"upper": "春风得意", "n": 2}).status_code == 200
    assert client.get("/api/v1/health").status_code == 200
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/nowhere/8c1f2e").status_code == 404
    assert client.get("/api/v1/generate").status_code == 405
    assert client.post("/api/v1/generate", json={"upper": "abc"}).status_code == 422
    after = scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    counted = "duilian_http_requests_total"
    assert moved(counted, method="POST", route="/api/v1/generate", status="200") == 1
    assert moved(counted, method="GET", route="/api/v1/health", status="200") == 1
    assert moved(counted, method="GET", route="/static/{path}", status="200") == 1
    assert moved(counted, method="GET", route="unmatched", status="404") == 1
    assert moved(counted, method="GET", route="/api/v1/generate", status="405") == 1
    assert moved(counted, method="POST", route="/api/v1/generate", status="422") == 1
    assert moved(counted, method="GET", route="/metrics", status="200") == 1  # the first scrape
    latency = "duilian_http_request_duration_seconds"
    assert moved(f"{latency}_count", method="POST", route="/api/v1/generate") == 2
    assert moved(f"{latency}_sum", method="POST", route="/api/v1/generate") > 0
    routes = {dict(labels).get("route") for _, labels in after}
    assert not any(r and ("nowhere" in r or "app.js" in r) for r in routes), routes  # never raw paths


def test_a_generate_moves_the_decode_metrics_and_a_repeat_hits_the_cache(client: TestClient) -> None:
    before = scrape(client)
    first = client.post("/api/v1/generate", json={"upper": "山高水长", "n": 3})
    again = client.post("/api/v1/generate", json={"upper": "山高水长", "n": 3})
    assert first.status_code == again.status_code == 200
    after = scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("duilian_decode_batch_size_count") == 1  # the repeat was never decoded
    assert moved("duilian_decode_batch_size_sum") == 1
    assert moved("duilian_decode_queue_seconds_count") == 1
    assert moved("duilian_decode_batch_seconds_count") == 1
    assert moved("duilian_generate_cache_lookups_total", result="miss") == 1
    assert moved("duilian_generate_cache_lookups_total", result="hit") == 1
    assert value(after, "duilian_decode_queue_depth") == 0  # nothing waits now
    assert value(after, "duilian_model_info", version="test-a") == 1
    assert value(after, "duilian_decode_workers", state="wanted") == 0  # decode_processes=0
    assert value(after, "process_resident_memory_bytes") > 0
    # Server-Timing: the decode's queue and inference time, in ms; the cache hit says so
    header = first.headers["server-timing"]
    assert re.fullmatch(r"queue;dur=\d+\.\d{3}, infer;dur=\d+\.\d{3}", header), header
    timing = dict(re.findall(r"(\w+);dur=(\d+\.\d+)", header))
    assert float(timing["infer"]) > 0 and float(timing["queue"]) >= 0
    assert again.headers["server-timing"] == "cache;desc=hit"


def test_a_429_is_counted(settings: Settings) -> None:
    with app_client(settings, rate_limit_per_minute=1, rate_limit_burst=1) as c:
        assert c.post("/api/v1/generate", json={"upper": "春风得意"}).status_code == 200
        assert c.post("/api/v1/generate", json={"upper": "春风得意"}).status_code == 429
        samples = scrape(c)  # /metrics is not rate-limited: a scraper is not a client
        assert value(samples, "duilian_requests_refused_total", reason="rate_limited") == 1
        assert value(samples, "duilian_requests_refused_total", reason="queue_full") == 0
        assert (
            value(
                samples, "duilian_http_requests_total", method="POST", route="/api/v1/generate", status="429"
            )
            == 1
        )


def test_a_503_for_a_full_queue_is_counted(settings: Settings) -> None:
    with app_client(settings, max_pending=0) as c:  # no decode may wait: every decode is refused
        r = c.post("/api/v1/generate", json={"upper": "春风得意"})
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        samples = scrape(c)
        assert value(samples, "duilian_requests_refused_total", reason="queue_full") == 1
        assert (
            value(
                samples, "duilian_http_requests_total", method="POST", route="/api/v1/generate", status="503"
            )
            == 1
        )


def test_candidates_withheld_by_the_sensitive_filter_are_counted(
    settings: Settings, bad_bundle: Path
) -> None:
    with app_client(settings, model_dir=bad_bundle) as c:
        body = c.post("/api/v1/generate", json={"upper": "春风", "n": 3}).json()
        assert body["filtered"] >= 1 and all(BAD_WORD not in x["text"] for x in body["candidates"]), body
        samples = scrape(c)
        assert value(samples, "duilian_candidates_withheld_total", route="generate") == body["filtered"]
        assert ("duilian_candidates_withheld_total", frozenset({("route", "alternatives")})) in samples
        assert value(samples, "duilian_candidates_withheld_total", route="alternatives") == 0


class Gate:
    """A model stand-in for the batcher (what it decodes is not the point here): it answers
    once let through, and notes the request ids its decode thread runs under."""

    version = "gate"

    def __init__(self) -> None:
        self.open = threading.Event()
        self.entered = threading.Event()
        self.ids: list[str] = []

    def answer_batch(self, queries: list[Query], oversample: int) -> list[object]:
        self.ids.append(REQUEST_ID.get())
        self.entered.set()
        assert self.open.wait(timeout=30)
        return [q.upper for q in queries]


def test_queue_depth_and_batch_sizes_as_the_batcher_hands_out_batches() -> None:
    gate = Gate()
    service = CoupletService(gate, oversample=0, cache_size=0, concurrency=1)  # type: ignore[arg-type]
    app = FastAPI()
    app.state.service = service
    metrics = Metrics(app)
    service.batcher.observer = metrics.observe_batch
    timings = [JobTiming() for _ in range(3)]

    def submit(rid: str, upper: str, timing: JobTiming) -> Future[Any]:  # as a request does
        REQUEST_ID.set(rid)
        JOB_TIMING.set(timing)
        return service.batcher.submit(gate, Query(upper, 1))

    try:
        futures = [copy_context().run(submit, "r1", "春风", timings[0])]
        assert gate.entered.wait(timeout=30)  # r1 is being decoded alone; r2 and r3 wait
        for rid, upper, timing in zip(("r2", "r3"), ("山高", "花开"), timings[1:], strict=True):
            futures.append(copy_context().run(submit, rid, upper, timing))
        assert value(parse(metrics.exposition().decode()), "duilian_decode_queue_depth") == 2
        gate.open.set()
        assert [f.result(timeout=30) for f in futures] == ["春风", "山高", "花开"]
    finally:
        gate.open.set()
        service.close()
    samples = parse(metrics.exposition().decode())
    assert value(samples, "duilian_decode_queue_depth") == 0
    assert value(samples, "duilian_decode_batch_size_count") == 2  # r1 alone, then r2 and r3 together
    assert value(samples, "duilian_decode_batch_size_sum") == 3
    assert value(samples, "duilian_decode_batch_size_bucket", le="1.0") == 1
    assert value(samples, "duilian_decode_queue_seconds_count") == 3
    assert gate.ids == ["r1", "r2,r3"]  # the decode thread logs under the ids of its batch
    assert [t.batch_size for t in timings] == [1, 2, 2]
    assert timings[1].queued > 0 and timings[0].decoding > 0


def test_metrics_can_be_turned_off_or_need_a_token(settings: Settings) -> None:
    with app_client(settings, metrics=False) as c:
        assert c.get("/metrics").status_code == 404
    with app_client(settings, metrics_token="s3cret") as c:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
            r = c.get("/metrics", headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", (headers, r.text)
        assert value(scrape(c, Authorization="Bearer s3cret"), "duilian_http_requests_total",
                     method="GET", route="/metrics", status="401") == 3  # fmt: skip


def test_metrics_is_not_in_the_api_document(client: TestClient) -> None:
    assert "/metrics" not in client.get("/openapi.json").json()["paths"]


# --- request ids and headers -----------------------------------------------------------------


def test_a_sane_request_id_is_echoed_on_every_response(client: TestClient) -> None:
    rid = {"X-Request-ID": "abc-123_X.y:Z"}
    responses = [
        client.get("/", headers=rid),
        client.get("/metrics", headers=rid),
        client.get("/nowhere", headers=rid),
        client.post("/api/v1/generate", json={"upper": "春风得意"}, headers=rid),
        client.post("/api/v1/generate", json={"upper": "abc"}, headers=rid),
        client.post(
            "/api/v1/generate", content=b"x" * 5000, headers={**rid, "content-type": "application/json"}
        ),
    ]
    assert [r.status_code for r in responses] == [200, 200, 404, 200, 422, 413]
    for r in responses:
        assert r.headers.get_list("x-request-id") == ["abc-123_X.y:Z"], r.request.url
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], r.request.url  # still
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    "given", [b"", b"two words", b"x" * 129, "caf\u00e9".encode("latin-1"), b"<script>", b"a\tb", b"id;x=1"]
)
def test_a_bad_request_id_is_replaced(client: TestClient, given: bytes) -> None:
    r = client.get("/api/v1/health", headers={b"X-Request-ID": given})
    assert r.status_code == 200
    assert GENERATED_ID.fullmatch(r.headers["x-request-id"]), r.headers["x-request-id"]


def test_each_request_without_an_id_gets_its_own(client: TestClient) -> None:
    ids = {client.get("/api/v1/health").headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3 and all(GENERATED_ID.fullmatch(i) for i in ids)


def add_failing_route(c: TestClient) -> None:
    app = c.app
    assert isinstance(app, FastAPI)

    def fail() -> None:
        raise RuntimeError("broken on purpose")

    app.add_api_route("/api/v1/fail", fail)


def test_a_500_carries_the_request_id_and_headers_is_counted_and_logged_as_json(
    settings: Settings, capfd: pytest.CaptureFixture[str]
) -> None:
    with app_client(settings, log_json=True) as c:
        add_failing_route(c)
        r = c.get("/api/v1/fail", headers={"X-Request-ID": "req-500"})
        assert r.status_code == 500 and r.headers["x-request-id"] == "req-500"
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
        assert "broken" not in r.text  # the client never gets the trace
        samples = scrape(c)
        assert (
            value(samples, "duilian_http_requests_total", method="GET", route="/api/v1/fail", status="500")
            == 1
        )
    lines = [json.loads(line) for line in capfd.readouterr().err.splitlines() if line.startswith("{")]
    error = [x for x in lines if x["logger"] == "serve" and x["level"] == "ERROR"]
    assert len(error) == 1, lines
    assert error[0]["request_id"] == "req-500" and "broken on purpose" in error[0]["exc_info"]
    assert error[0]["process"] == os.getpid()


def test_text_log_lines_carry_the_request_id(settings: Settings, capfd: pytest.CaptureFixture[str]) -> None:
    with app_client(settings) as c:
        add_failing_route(c)
        assert c.get("/api/v1/fail", headers={"X-Request-ID": "req-text"}).status_code == 500
    err = capfd.readouterr().err
    assert re.search(r"ERROR serve \[req-text\] unhandled error on GET /api/v1/fail", err), err


# --- python -m serve with JSON logs and a decode worker --------------------------------------


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s: {what}")
        time.sleep(0.1)


def wait_healthy(server: subprocess.Popen[bytes], url: str, log_file: Path, seconds: float = 240) -> None:
    """Until the server process answers its health check; its log if it dies first."""

    def up() -> bool:
        assert server.poll() is None, log_file.read_text()
        try:
            return httpx.get(f"{url}/api/v1/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(up, seconds, "the server answers")


@pytest.mark.slow
def test_json_logs_of_the_server_and_its_decode_worker_carry_the_request_id(
    bundle_a: Path, tmp_path: Path
) -> None:
    port, log_file = free_port(), tmp_path / "server.log"
    env = {
        **os.environ,
        "DUILIAN_WORK_DIR": str(tmp_path / "work"),
        "DUILIAN_SERVE_DECODE_PROCESSES": "1",
        "DUILIAN_SERVE_RUNTIME": "torch",
        "DUILIAN_SERVE_LOG_JSON": "true",
    }
    args = ["--model", str(bundle_a), "--database-url", f"sqlite:///{tmp_path}/f.db", "--port", str(port)]
    with log_file.open("w") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "serve", *args, "--log-level", "debug"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(server, url, log_file)
        r = httpx.post(
            f"{url}/api/v1/generate",
            json={"upper": "春风得意"},
            headers={"X-Request-ID": "req-w1"},
            timeout=60,
        )
        assert r.status_code == 200 and r.headers["x-request-id"] == "req-w1", r.text
        assert "infer;dur=" in r.headers["server-timing"]
        samples = parse(httpx.get(f"{url}/metrics", timeout=10).text)
        assert value(samples, "duilian_decode_workers", state="alive") == 1
        assert value(samples, "duilian_decode_batch_size_count") == 1
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]  # every line is JSON
    assert all({"time", "level", "logger", "message", "request_id", "process"} <= set(x) for x in lines)
    mine = [x for x in lines if x["request_id"] == "req-w1"]
    access = [x for x in mine if x["logger"] == "uvicorn.access"]
    assert len(access) == 1 and "POST /api/v1/generate" in access[0]["message"], mine
    worker = [x for x in mine if x["process"] != server.pid]  # the decode worker's line about it
    assert worker and worker[0]["logger"] == "serve.pool", mine
    assert "decoded 1 lines" in worker[0]["message"], mine
    started = [x for x in lines if x["logger"] == "uvicorn.error" and "Uvicorn running" in x["message"]]
    assert started and started[0]["process"] == server.pid and started[0]["request_id"] == "-"
