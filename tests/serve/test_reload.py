"""Swapping in a newly trained model under concurrent requests fails none of them."""

from __future__ import annotations

import random
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from model.store.layout import WEIGHTS_FILE as MODEL_FILE
from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import PAIRS, LiveServer, wait_known

TOKEN = {"X-Admin-Token": "test-token"}


def test_reload_needs_the_token(client: TestClient) -> None:
    assert client.post("/api/v1/admin/reload", json={}).status_code == 401
    assert client.post("/api/v1/admin/reload", json={}, headers={"X-Admin-Token": "nope"}).status_code == 401


def test_failed_reload_keeps_the_old_model(client: TestClient, tmp_path: Path) -> None:
    r = client.post("/api/v1/admin/reload", json={"model_dir": str(tmp_path / "none")}, headers=TOKEN)
    assert r.status_code == 400 and "Could not load" in r.json()["detail"]
    assert client.get("/api/v1/health").json()["model_version"] == "test-a"


def test_a_bundle_that_differs_from_its_sums_is_refused_and_the_old_model_keeps_answering(
    client: TestClient, tmp_path: Path, bundle_b: Path
) -> None:
    bundle = tmp_path / "b"
    shutil.copytree(bundle_b, bundle)
    data = (bundle / MODEL_FILE).read_bytes()
    middle = len(data) // 2
    (bundle / MODEL_FILE).write_bytes(
        data[:middle] + random.Random(25).randbytes(4096) + data[middle + 4096 :]
    )
    r = client.post("/api/v1/admin/reload", json={"model_dir": str(bundle)}, headers=TOKEN)
    assert r.status_code == 400, r.text
    detail = r.json()["detail"]
    assert detail.startswith("模型加载失败，继续使用旧模型 / Could not load") and "\n" not in detail
    assert f"{bundle / MODEL_FILE}: damaged or replaced" in detail
    answer = client.post("/api/v1/generate", json={"upper": PAIRS[0][0], "n": 2})
    assert answer.status_code == 200 and answer.json()["model_version"] == "test-a"
    assert client.get("/api/v1/health").json()["model_version"] == "test-a"
    shutil.copy(bundle_b / MODEL_FILE, bundle / MODEL_FILE)  # mended: the same request now loads it
    r = client.post("/api/v1/admin/reload", json={"model_dir": str(bundle)}, headers=TOKEN)
    assert r.status_code == 200 and r.json()["version"] == "test-b"


@pytest.mark.slow
@pytest.mark.parametrize("processes", [0, 2])
def test_reload_under_load_fails_no_request(
    settings: Settings, bundle_a: Path, bundle_b: Path, processes: int
) -> None:
    """With the model in the server process, and in worker processes (retired after the swap)."""
    with LiveServer(create_app(settings.model_copy(update={"decode_processes": processes}))) as live:
        wait_known(live.app)
        hammer_while_reloading(live, bundle_a, bundle_b)


def hammer_while_reloading(live: LiveServer, bundle_a: Path, bundle_b: Path) -> None:
    stop = threading.Event()
    results: list[tuple[int, str]] = []
    lock = threading.Lock()

    def hammer(worker: int) -> None:
        with httpx.Client(base_url=live.url, timeout=30) as http:
            i = 0
            while not stop.is_set():
                upper = PAIRS[(worker + i) % len(PAIRS)][0]
                r = http.post("/api/v1/generate", json={"upper": upper, "n": 3})
                with lock:
                    results.append((r.status_code, r.json().get("model_version", r.text)))
                i += 1

    workers = [threading.Thread(target=hammer, args=(w,)) for w in range(6)]
    for t in workers:
        t.start()
    try:
        while len(results) < 10 and all(t.is_alive() for t in workers):
            time.sleep(0.01)  # some answers from the first model before swapping
        with httpx.Client(base_url=live.url, timeout=60) as admin:
            for target, version in [(bundle_b, "test-b"), (bundle_a, "test-a"), (bundle_b, "test-b")]:
                r = admin.post("/api/v1/admin/reload", json={"model_dir": str(target)}, headers=TOKEN)
                assert r.status_code == 200, r.text
                assert r.json()["version"] == version
    finally:
        stop.set()
        for t in workers:
            t.join(timeout=30)
    assert len(results) >= 20
    assert [code for code, _ in results if code != 200] == []
    assert {v for _, v in results} == {"test-a", "test-b"}
    with httpx.Client(base_url=live.url) as http:
        assert http.get("/api/v1/health").json()["model_version"] == "test-b"
