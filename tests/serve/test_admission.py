"""Cost-aware admission (serve/admission.py) on real servers: two uvicorn servers on loopback
sharing one real Redis, as replicas do. A request's cost, characters × candidates, is taken
from its client's decode budget in Redis; a client of long lines over its budget gets 429 with
Retry-After and a bilingual detail from either server, while another client's short lines are
served."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest
import redis

from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import LiveServer, wait_known

pytestmark = pytest.mark.redis

LONG = "绿水青山千秋画卷红梅白雪万里诗篇春风得意"  # 20 characters: the long lane's, here
BUDGET, PER_MINUTE = 400, 600  # 400 at once, 10 a second


@pytest.fixture
def servers(settings: Settings, redis_url: str) -> Iterator[list[LiveServer]]:
    shared = settings.model_copy(
        update={
            "redis_url": redis_url,
            "cost_per_minute": PER_MINUTE,
            "cost_burst": BUDGET,
            "long_line_chars": 20,
        }
    )
    with ExitStack() as stack:
        live = [stack.enter_context(LiveServer(create_app(shared))) for _ in range(2)]
        for server in live:
            wait_known(server.app)
        yield live


def client(server: LiveServer, address: str) -> httpx.Client:
    """An HTTP client whose connections come from ``address`` (one of 127/8): a client of its own."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=server.url, timeout=30, transport=transport)


def tokens(redis_url: str, address: str) -> float:
    held = redis.Redis.from_url(redis_url).hget(f"duilian:ratelimit:cost:{address}", "tokens")
    assert held is not None
    return float(held)


def test_a_long_line_client_over_budget_gets_429_while_short_lines_are_served(
    servers: list[LiveServer], redis_url: str
) -> None:
    a, b = servers
    with client(a, "127.0.0.31") as long_a, client(b, "127.0.0.31") as long_b:
        first = long_a.post("/api/v1/generate", json={"upper": LONG, "n": 10})
        assert first.status_code == 200 and len(first.json()["candidates"]) == 10
        left = tokens(redis_url, "127.0.0.31")
        assert BUDGET - 200 <= left < BUDGET - 200 + 20  # 20 characters × 10 candidates, and refill
        second = long_a.post("/api/v1/generate", json={"upper": LONG, "n": 10})
        assert second.status_code == 200  # 200 of 400 left: one more
        over = [long_b.post("/api/v1/generate", json={"upper": LONG, "n": 10}) for _ in range(2)]
    for refused in over:  # the other server counts the same budget
        assert refused.status_code == 429, refused.text
        seconds = int(refused.headers["Retry-After"])
        assert 1 <= seconds <= 21  # (200 - what is left) / 10 a second
        zh, en = refused.json()["detail"].split(" / ")
        assert "额度" in zh and f"{seconds} 秒" in zh
        assert "budget" in en and "this one 200" in en and f"retry in {seconds} s" in en
    with client(a, "127.0.0.32") as short_a, client(b, "127.0.0.32") as short_b:
        for http in (short_a, short_b, short_a):
            r = http.post("/api/v1/generate", json={"upper": "春风得意", "n": 5})
            assert r.status_code == 200 and len(r.json()["candidates"]) == 5
    assert BUDGET - 60 <= tokens(redis_url, "127.0.0.32") < BUDGET  # 3 × 4 characters × 5
    metrics = httpx.get(f"{b.url}/metrics").text
    assert 'duilian_requests_refused_total{reason="over_budget"} 2.0' in metrics


def test_a_refused_request_takes_nothing_and_the_budget_refills(
    servers: list[LiveServer], redis_url: str
) -> None:
    a, _ = servers
    with client(a, "127.0.0.33") as http:
        assert http.post("/api/v1/generate", json={"upper": LONG, "n": 10}).status_code == 200
        assert http.post("/api/v1/generate", json={"upper": LONG, "n": 9}).status_code == 200  # 20 left
        before = tokens(redis_url, "127.0.0.33")
        refused = http.post("/api/v1/generate", json={"upper": LONG, "n": 10})
        assert refused.status_code == 429
        assert before <= tokens(redis_url, "127.0.0.33") < before + 10  # refilled only, nothing taken
        # a cheap request fits what is left at once: the budget is counted in cost, not requests
        cheap = http.post("/api/v1/generate", json={"upper": "春风得意", "n": 1})
        assert cheap.status_code == 200
        bad = http.post("/api/v1/generate", json={"upper": "abc", "n": 1})
        assert bad.status_code == 422  # refused input is not charged: it is refused before


def test_without_a_cost_budget_long_lines_are_not_refused(settings: Settings) -> None:
    off = settings.model_copy(update={"cost_per_minute": 0, "cost_burst": 1})
    with LiveServer(create_app(off)) as server, client(server, "127.0.0.34") as http:
        codes = {http.post("/api/v1/generate", json={"upper": LONG, "n": 10}).status_code for _ in range(3)}
    assert codes == {200}
