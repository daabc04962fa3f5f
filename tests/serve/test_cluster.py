"""Replicas behind a real HAProxy (python -m serve.cluster): two real `python -m serve`
processes, a real redis-server for the rate limit, a real PostgreSQL for the feedback, and a
replica really killed with SIGKILL. Each test speaks from its own loopback address (127.0.0.x:
Linux routes all of 127/8 to lo), so each is its own client to the rate limit."""

from __future__ import annotations

import shutil
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from serve.cluster.deployment import Cluster, ClusterSetup
from serve.cluster.haproxy import haproxy_binary
from serve.cluster.postgres import postgres_bindir
from tests.serve.conftest import PAIRS

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

PER_MINUTE, BURST = 60, 10
TRUSTED = "127.0.0.2"  # HAProxy's source address toward the replicas


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, bundle_a: Path, known_pairs: Path) -> Iterator[Cluster]:
    for name, found in (
        ("haproxy", haproxy_binary()),
        ("redis-server", shutil.which("redis-server")),
        ("PostgreSQL", postgres_bindir()),
    ):
        if found is None:
            pytest.skip(f"{name} missing (bash scripts/sysdeps.sh installs it)")
    setup = ClusterSetup(
        folder=tmp_path_factory.mktemp("cluster"),
        replicas=2,
        model=bundle_a,
        throwaway=True,
        source=TRUSTED,
        env={
            "DUILIAN_SERVE_RATE_LIMIT_PER_MINUTE": str(PER_MINUTE),
            "DUILIAN_SERVE_RATE_LIMIT_BURST": str(BURST),
            "DUILIAN_SERVE_DECODE_PROCESSES": "0",  # the model in the server process: a quick start
            "DUILIAN_SERVE_RUNTIME": "torch",  # no ONNX export at start-up
            "DUILIAN_SERVE_KNOWN_PAIRS": str(known_pairs),
            "DUILIAN_SERVE_LOG_LEVEL": "warning",
        },
        start_timeout=180,
    )
    with Cluster(setup) as running:
        yield running


def client(base_url: str, address: str) -> httpx.Client:
    """An HTTP client whose connections come from ``address`` (one of 127/8)."""
    return httpx.Client(base_url=base_url, timeout=30, transport=httpx.HTTPTransport(local_address=address))


def generate(http: httpx.Client, i: int = 0, headers: dict[str, str] | None = None) -> httpx.Response:
    return http.post("/api/v1/generate", json={"upper": PAIRS[i % 4][0], "n": 2}, headers=headers)


def test_one_clients_limit_holds_across_two_replicas(cluster: Cluster) -> None:
    with client(cluster.url, "127.0.0.11") as http:
        start = time.monotonic()
        replies = [generate(http, i) for i in range(3 * BURST)]
        elapsed = time.monotonic() - start
    codes = [r.status_code for r in replies]
    assert set(codes) == {200, 429}, codes
    answered = codes.count(200)
    # one bucket for the client: the burst, and a token a second refilled meanwhile; with a
    # bucket per replica it would be twice the burst
    assert BURST <= answered <= BURST + int(elapsed * PER_MINUTE / 60) + 1, (answered, elapsed)
    assert answered < 2 * BURST
    served = {r.headers["X-Served-By"] for r in replies}
    assert served == {"r1", "r2"}  # both replicas took part, and refused alike
    assert {r.headers["X-Served-By"] for r in replies if r.status_code == 429} == {"r1", "r2"}
    refused = replies[codes.index(429)]
    assert int(refused.headers["Retry-After"]) >= 1 and " / " in refused.json()["detail"]


def limited(http: httpx.Client, forwarded: bool) -> int:
    """Requests answered of 2 × BURST, each naming a new X-Forwarded-For address if ``forwarded``."""
    headers = [{"X-Forwarded-For": f"203.0.113.{i}"} if forwarded else {} for i in range(2 * BURST)]
    return [generate(http, i, h).status_code for i, h in enumerate(headers)].count(200)


def test_x_forwarded_for_is_believed_only_from_the_proxy(cluster: Cluster) -> None:
    replica = cluster.replicas[0].url
    # a client reaching a replica directly cannot name itself anew in each request
    with client(replica, "127.0.0.12") as http:
        assert limited(http, forwarded=True) <= BURST + 2
    # nor through the proxy, which drops the client's header and writes the address it saw
    with client(cluster.url, "127.0.0.13") as http:
        assert limited(http, forwarded=True) <= BURST + 2
    # from the trusted proxy's address the header is believed: every address its own bucket
    with client(replica, TRUSTED) as http:
        assert limited(http, forwarded=True) == 2 * BURST


def test_an_answer_one_replica_decoded_is_a_cache_hit_on_the_other(cluster: Cluster) -> None:
    query = {"upper": PAIRS[8][0], "n": 4}
    with client(cluster.url, "127.0.0.16") as http:
        first, second = (http.post("/api/v1/generate", json=query) for _ in range(2))
    assert first.status_code == second.status_code == 200
    assert first.headers["X-Served-By"] != second.headers["X-Served-By"]  # round robin
    assert "cache;desc=hit" not in first.headers["Server-Timing"]
    assert "cache;desc=hit" in second.headers["Server-Timing"]  # from Redis: never decoded there
    assert second.json() == first.json()


def feedback_rows(cluster: Cluster, upper: str) -> int:
    engine = create_engine(cluster.database_url)
    try:
        with engine.connect() as con:
            found = con.execute(text("SELECT count(*) FROM feedback WHERE upper = :u"), {"u": upper})
            return int(found.scalar_one())
    finally:
        engine.dispose()


def test_a_retried_feedback_post_is_stored_once_whichever_replica_gets_it(cluster: Cluster) -> None:
    upper, lower = PAIRS[5]
    body = {"kind": "own", "upper": upper, "lower": lower}
    key = {"Idempotency-Key": str(uuid.uuid4())}
    with client(cluster.url, "127.0.0.14") as http:
        first, again = (http.post("/api/v1/feedback", json=body, headers=key) for _ in range(2))
        assert first.status_code == again.status_code == 201, (first.text, again.text)
        assert first.headers["X-Served-By"] != again.headers["X-Served-By"]  # round robin: both
        assert again.json()["id"] == first.json()["id"] and again.headers["Idempotent-Replayed"] == "true"
        assert "Idempotent-Replayed" not in first.headers
        # the same key sent at once to both replicas, several times over
        key2 = {"Idempotency-Key": str(uuid.uuid4())}
        with ThreadPoolExecutor(6) as pool:
            replies = list(
                pool.map(lambda _: http.post("/api/v1/feedback", json=body, headers=key2), range(6))
            )
        assert {r.status_code for r in replies} == {201} and len({r.json()["id"] for r in replies}) == 1
        reused = http.post("/api/v1/feedback", json={**body, "lower": PAIRS[6][1]}, headers=key)
        assert reused.status_code == 422 and " / " in reused.json()["detail"]
    assert feedback_rows(cluster, upper) == 2  # one row per key


def test_a_hung_replica_fails_its_health_checks_and_is_out_until_it_answers_again(
    cluster: Cluster,
) -> None:
    """r2 stops answering (SIGSTOP) but its port still takes connections, so only the health
    checks can tell: it is out of rotation after two of them time out, back after two 200s."""
    assert cluster.proxy is not None and sorted(cluster.proxy.up()) == ["r1", "r2"]
    hung = cluster.replica("r2")
    hung.kill(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 20
        while not cluster.proxy.servers()["r2"]["status"].startswith("DOWN"):
            assert time.monotonic() < deadline, cluster.proxy.servers()["r2"]["status"]
            time.sleep(0.1)
        assert int(cluster.proxy.servers()["r2"]["chkfail"]) >= 2
        with client(cluster.url, "127.0.0.15") as http:  # meanwhile r1 answers everything
            assert {generate(http, i).headers["X-Served-By"] for i in range(4)} == {"r1"}
    finally:
        hung.kill(signal.SIGCONT)
    cluster.wait_up(2, 20)


def test_a_killed_replica_is_taken_out_and_every_request_is_answered(cluster: Cluster) -> None:
    """r1 is frozen (SIGSTOP) while requests reach it, then killed (SIGKILL): the requests it
    held, which it never read, are sent again to r2 (retry-on empty-response, redispatch), a
    feedback post among them stored once; the next requests all go to r2; r1 comes back."""
    assert cluster.proxy is not None and sorted(cluster.proxy.up()) == ["r1", "r2"]
    victim = cluster.replica("r1")
    upper, lower = PAIRS[7]

    def send(i: int) -> httpx.Response:
        with client(cluster.url, f"127.0.1.{i + 1}") as http:  # a fresh address: no limit in the way
            if i % 2:
                key = {"Idempotency-Key": str(uuid.uuid4())}
                body = {"kind": "own", "upper": upper, "lower": lower}
                return http.post("/api/v1/feedback", json=body, headers=key)
            return generate(http, i)

    victim.kill(signal.SIGSTOP)
    with ThreadPoolExecutor(4) as pool:
        held = [pool.submit(send, i) for i in range(4)]  # round robin: two of them wait on r1
        time.sleep(1.0)
        victim.kill(signal.SIGKILL)
        killed = time.monotonic()
        first = [f.result() for f in held]
    assert [r.status_code for r in first] == [200, 201, 200, 201], [r.text for r in first]
    replies = [send(i) for i in range(4, 24)]  # and the next ones, one after another
    assert [r.status_code for r in replies] == [200, 201] * 10, [r.text for r in replies]
    assert {r.headers["X-Served-By"] for r in first + replies} == {"r2"}
    rows = cluster.proxy.servers()
    assert rows["r1"]["status"].startswith("DOWN"), rows["r1"]["status"]
    assert int(rows["r1"]["wretr"] or 0) + int(rows["r1"]["wredis"] or 0) >= 2, rows["r1"]
    assert feedback_rows(cluster, upper) == 12  # one row per key
    # the watcher starts r1 again on its port; HAProxy's checks bring it back
    deadline = killed + 120
    while sorted(cluster.proxy.up()) != ["r1", "r2"]:
        assert time.monotonic() < deadline, "r1 not back in rotation"
        time.sleep(0.2)
    assert victim.restarts == 1 and [e.what for e in cluster.events] == ["died", "restarted"]
    served = set()
    for i in range(4):
        with client(cluster.url, f"127.0.2.{i + 1}") as http:
            r = generate(http, i)
        assert r.status_code == 200
        served.add(r.headers["X-Served-By"])
    assert served == {"r1", "r2"}
