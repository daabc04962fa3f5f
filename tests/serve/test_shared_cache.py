"""The result cache shared through a real Redis (Settings.shared_cache): an answer one server
decoded is a hit on another given the same Redis, the same answer to the byte; a reload's new
model does not read the old one's answers; with Redis gone, servers decode as before."""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from crawler.localredis import LocalRedis
from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import PAIRS, wait_known

pytestmark = pytest.mark.redis

QUERY = {"upper": PAIRS[1][0], "n": 3}


def servers(settings: Settings, redis_url: str, stack: ExitStack, count: int = 2) -> list[TestClient]:
    # eager PyTorch: no ONNX export at start-up (the cache is what is tested, not the engine)
    shared = settings.model_copy(update={"redis_url": redis_url, "shared_cache": True, "runtime": "torch"})
    clients = [stack.enter_context(TestClient(create_app(shared))) for _ in range(count)]
    for c in clients:
        wait_known(c.app)  # type: ignore[arg-type]
    return clients


def hit(r: object) -> bool:
    return "cache;desc=hit" in r.headers["Server-Timing"]  # type: ignore[attr-defined]


def test_an_answer_decoded_by_one_server_is_a_hit_on_another(settings: Settings, redis_url: str) -> None:
    with ExitStack() as stack:
        a, b = servers(settings, redis_url, stack)
        first = a.post("/api/v1/generate", json=QUERY)
        assert first.status_code == 200 and not hit(first)
        second = b.post("/api/v1/generate", json=QUERY)
        assert second.status_code == 200 and hit(second)  # b never decoded it
        assert second.json() == first.json()
        assert b.app.state.service.shared.hits == 1  # type: ignore[attr-defined]
        other = b.post("/api/v1/generate", json={**QUERY, "n": 2})  # another query: decoded
        assert other.status_code == 200 and not hit(other)


def test_a_reloaded_model_does_not_read_the_old_models_answers(
    settings: Settings, redis_url: str, bundle_b: Path
) -> None:
    with ExitStack() as stack:
        a, b = servers(settings, redis_url, stack)
        assert a.post("/api/v1/generate", json=QUERY).status_code == 200
        reloaded = b.post(
            "/api/v1/admin/reload", json={"model_dir": str(bundle_b)}, headers={"X-Admin-Token": "test-token"}
        )
        assert reloaded.status_code == 200, reloaded.text
        r = b.post("/api/v1/generate", json=QUERY)
        assert r.status_code == 200 and not hit(r) and r.json()["model_version"] == "test-b"


def test_without_redis_the_servers_decode_as_before(settings: Settings) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server missing (bash scripts/sysdeps.sh installs it)")
    redis = LocalRedis()
    with ExitStack() as stack:
        (a,) = servers(settings, redis.start(), stack, count=1)
        assert a.post("/api/v1/generate", json=QUERY).status_code == 200
        redis.stop()  # Redis goes; the server stays
        r = a.post("/api/v1/generate", json={**QUERY, "n": 2})
        assert r.status_code == 200 and not hit(r) and r.json()["candidates"]
        again = a.post("/api/v1/generate", json={**QUERY, "n": 2})
        assert again.status_code == 200 and hit(again)  # its own cache goes on
        assert a.app.state.service.shared.failures == 1  # type: ignore[attr-defined]


def test_the_shared_cache_needs_a_redis() -> None:
    with pytest.raises(ValidationError, match="shared_cache needs redis_url"):
        Settings(shared_cache=True)
