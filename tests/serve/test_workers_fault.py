"""Decode workers killed with SIGKILL, as the OOM killer would: real worker processes, real
signals. A dead worker's pool is replaced, the request it held gets a bilingual 503 with
Retry-After, /health says "degraded" (503) until the workers run again, and a killed server
leaves no worker behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from fastapi.testclient import TestClient

from crawler.localredis import free_port, running, spawned_children
from serve.main import create_app
from serve.pool import PooledModel, WorkerLost
from serve.settings import Settings
from tests.serve.conftest import PAIRS

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")


def wait_until(condition: object, timeout: float, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def assert_bilingual_503(r: httpx2.Response) -> None:  # (TestClient's)
    assert r.status_code == 503, r.text
    detail = r.json()["detail"]
    assert " / " in detail and "解码" in detail and "retry" in detail
    assert int(r.headers["Retry-After"]) >= 1


@pytest.fixture
def pooled(settings: Settings, bundle_a: Path, tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    """A server with two decode workers on its own copy of the bundle (a test may move it away)."""
    bundle = tmp_path / "bundle"
    shutil.copytree(bundle_a, bundle)
    update = {"decode_processes": 2, "model_dir": bundle, "worker_restart_wait": 1.0}
    with TestClient(create_app(settings.model_copy(update=update))) as client:
        yield client, bundle


@pytest.mark.slow
def test_a_killed_worker_is_replaced_the_other_answers_and_health_is_degraded_meanwhile(
    pooled: tuple[TestClient, Path],
) -> None:
    client, bundle = pooled
    model = client.app.state.service.model  # type: ignore[attr-defined]
    assert isinstance(model, PooledModel)
    old = list(model.pids)
    r = client.get("/api/v1/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    assert (r.json()["decode_workers"], r.json()["decode_workers_wanted"]) == (2, 2)

    # The replacement cannot start while the bundle is away: the degraded state lasts until it is back.
    away = bundle.with_name("away")
    bundle.rename(away)
    os.kill(old[0], signal.SIGKILL)
    wait_until(lambda: not running(old[0]), 10, "the killed worker ends")
    # the server notices at once or nearly (its threads share two busy cores); then it stays
    # degraded, as its replacement cannot start
    wait_until(lambda: client.get("/api/v1/health").status_code == 503, 10, "health turns degraded")
    r = client.get("/api/v1/health")
    assert r.status_code == 503 and r.json()["status"] == "degraded", r.text
    assert r.json()["decode_workers"] == 1 and int(r.headers["Retry-After"]) >= 1
    # meanwhile the other worker answers, every request
    for upper, _ in PAIRS[:4]:
        r = client.post("/api/v1/generate", json={"upper": upper, "n": 3})
        assert r.status_code == 200 and r.json()["candidates"], r.text
    assert running(old[1]) and old[1] in model.pids  # only the dead worker is replaced

    # with no worker left, a request waits worker_restart_wait for one, then gets the 503
    os.kill(old[1], signal.SIGKILL)
    wait_until(lambda: client.get("/api/v1/health").json()["decode_workers"] == 0, 10, "none alive")
    assert_bilingual_503(client.post("/api/v1/generate", json={"upper": "春风得意"}))

    away.rename(bundle)
    wait_until(lambda: client.get("/api/v1/health").status_code == 200, 180, "the workers run again")
    r = client.post("/api/v1/generate", json={"upper": PAIRS[1][0], "n": 3})
    assert r.status_code == 200 and r.json()["candidates"], r.text
    assert client.get("/api/v1/health").json()["decode_workers"] == 2
    assert model.restarts >= 2 and not set(model.pids) & set(old)


@pytest.mark.slow
def test_a_job_a_dying_worker_held_fails_and_one_it_never_read_goes_to_the_other(
    pooled: tuple[TestClient, Path],
) -> None:
    client, _ = pooled
    model = client.app.state.service.model  # type: ignore[attr-defined]
    assert isinstance(model, PooledModel)
    old = list(model.pids)
    # held: a worker busy with a job (here a long sleep) that it has read dies -> WorkerLost
    lost: list[BaseException] = []

    def hold() -> None:
        try:
            model._in_worker(time.sleep, 60)
        except WorkerLost as exc:
            lost.append(exc)

    holding = threading.Thread(target=hold)
    holding.start()
    wait_until(lambda: model.in_flight > 0, 30, "the job reaches a worker")
    [holder] = [slot.pid for slot in model.slots if slot is not None and slot.jobs]
    time.sleep(1.0)  # an idle worker reads its job at once
    os.kill(holder, signal.SIGKILL)
    holding.join(timeout=30)
    assert lost and not holding.is_alive()
    # the other worker answered meanwhile and answers now
    r = client.post("/api/v1/generate", json={"upper": "海阔天空", "n": 2})
    assert r.status_code == 200 and r.json()["candidates"], r.text
    wait_until(lambda: client.get("/api/v1/health").status_code == 200, 180, "the workers run again")

    # never read: a stopped worker is given the request and killed before it reads it; the
    # request goes to the other worker and is answered
    others = [pid for pid in model.pids if pid not in (holder,)]
    for pid in others:
        os.kill(pid, signal.SIGSTOP)
    answer: list[httpx2.Response] = []
    try:
        asking = threading.Thread(
            target=lambda: answer.append(client.post("/api/v1/generate", json={"upper": "山高水长"}))
        )
        asking.start()
        wait_until(lambda: model.in_flight > 0, 30, "the request reaches a worker")
        [stopped] = [slot.pid for slot in model.slots if slot is not None and slot.jobs]
        for pid in others:
            if pid != stopped:
                os.kill(pid, signal.SIGCONT)
        os.kill(stopped, signal.SIGKILL)
        asking.join(timeout=120)
    finally:
        for pid in others:
            if running(pid):
                os.kill(pid, signal.SIGCONT)
    assert answer and answer[0].status_code == 200, answer[0].text if answer else "no answer"
    wait_until(lambda: client.get("/api/v1/health").status_code == 200, 180, "the workers run again")
    assert holder not in model.pids and stopped not in model.pids and len(model.pids) == 2
    assert not set(model.pids) & {holder, stopped} and len(set(old)) == 2


@pytest.mark.slow
def test_a_lone_killed_worker_is_replaced_and_the_waiting_requests_answered(
    settings: Settings, bundle_a: Path
) -> None:
    """One decode worker: while its replacement starts, requests wait for it (up to
    ``worker_restart_wait``) and are answered, not refused."""
    update = {"decode_processes": 1, "model_dir": bundle_a, "worker_restart_wait": 120.0}
    with TestClient(create_app(settings.model_copy(update=update))) as client:
        model = client.app.state.service.model  # type: ignore[attr-defined]
        assert isinstance(model, PooledModel)
        [old] = model.pids
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: not running(old), 10, "the killed worker ends")
        r = client.post("/api/v1/generate", json={"upper": "海阔天空", "n": 2})
        assert r.status_code == 200 and r.json()["candidates"], r.text
        assert model.restarts == 1 and model.pids != [old]
        assert client.get("/api/v1/health").status_code == 200


@pytest.mark.slow
def test_a_killed_server_leaves_no_decode_worker(bundle_a: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DUILIAN_WORK_DIR": str(tmp_path / "work"),
        "DUILIAN_SERVE_DECODE_PROCESSES": "2",
        "DUILIAN_SERVE_RUNTIME": "torch",
    }
    args = ["--model", str(bundle_a), "--database-url", f"sqlite:///{tmp_path}/f.db", "--port", str(port)]
    server = subprocess.Popen(
        [sys.executable, "-m", "serve", *args, "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    workers: list[int] = []
    try:

        def up() -> bool:
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(up, 240, "the server answers")
        workers = spawned_children(server.pid)
        assert len(workers) == 2, workers
        r = httpx.post(f"http://127.0.0.1:{port}/api/v1/generate", json={"upper": "春风得意"}, timeout=60)
        assert r.status_code == 200, r.text
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
        wait_until(lambda: not any(running(pid) for pid in workers), 15, "the orphaned workers exit")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        for pid in workers:  # only the workers this test's server started
            if running(pid):
                os.kill(pid, signal.SIGKILL)
