"""Replicas behind HAProxy under faults: ``python -m bench cluster``.

Three replicas of ``python -m serve`` (the shipped model, one decode worker each) behind
Debian's HAProxy, one PostgreSQL for the feedback and one Redis for the rate limit
(``serve.cluster.Cluster``, as ``python -m serve.cluster up`` runs them), on loopback. Each run:

1. open-loop load through the proxy for ``SECONDS`` (``--quick``: 30): generate requests at
   ``GENERATE_RPS`` and feedback posts at ``FEEDBACK_RPS``, request i due at i/rate whatever
   the answers, each from one of 200 loopback addresses (127.0.3.x: well under the rate limit
   each), each feedback with its own ``Idempotency-Key`` and sent again with that key (up to
   three times) when it got no answer or a 5xx, as a client would;
2. a third of the way in, replica r1's server process hangs (SIGSTOP) for ``FREEZE_S``, so that
   requests reach it and wait unread, then is killed with SIGKILL (its decode worker ends with
   it; the cluster's watcher starts it again); two thirds of the way in, replica r2
   reloads its bundle (POST /api/v1/admin/reload, straight to its port);
3. after the load, one client (its own address) sends ``LIMIT_SENT`` generate requests through
   the proxy, ten at a time: with the limit at ``LIMIT_PER_MINUTE`` a minute (and as many at
   once), about that many are answered and the rest get 429, whichever replica they reach;
4. each replica's /metrics is scraped (requests by status, 429s, decode workers).

Figures per run, and over ``RUNS`` runs (``DUILIAN_BENCH_CLUSTER_RUNS``) their median, min and
max: ``answered_pct`` (200 with candidates, or 201, of all requests sent; the goal is >= 99.9),
``feedback_acked`` (keys answered 201), ``feedback_rows`` (rows stored), ``feedback_lost``
(acked keys without a row), ``feedback_doubled`` (rows beyond one per key), ``limit_answered``
/ ``limit_refused`` of ``LIMIT_SENT``, ``detect_s`` (kill to HAProxy marking r1 DOWN),
``recovery_s`` (kill to r1 UP in HAProxy again, its restart included), ``p50_ms``/``p99_ms``
of the load (from each request's due time), HAProxy's retries and redispatches in the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text

from bench._live_server import upper_lines
from bench._load import pct
from data.paths import default_model_dir
from serve.cluster.deployment import Cluster, ClusterSetup

SECONDS = 90.0
GENERATE_RPS = 12.0
FEEDBACK_RPS = 3.0
LIMIT_PER_MINUTE = 60
LIMIT_SENT = 100
CACHE_LINES, CACHE_REQUESTS = 200, 600  # the cache phase: Zipf-distributed repeats
FREEZE_S = 1.0  # r1 hangs this long (SIGSTOP) before it is killed: requests die with it unanswered
TOKEN = "bench-token"
TIMEOUT = 60.0
ADDRESSES = [f"127.0.3.{i}" for i in range(1, 201)]

Result = tuple[int, dict[str, str], bytes]  # status (0: no answer), headers, body


async def request(
    port: int, method: str, path: str, body: dict[str, Any] | None, source: str, headers: dict[str, str]
) -> Result:
    """One HTTP/1.1 request on its own connection from ``source``: (0, {}, b"") when it failed."""
    data = json.dumps(body, ensure_ascii=False).encode() if body is not None else b""
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{extra}"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode()
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), TIMEOUT
        )
    except (OSError, TimeoutError):
        return 0, {}, b""
    try:
        writer.write(head + data)
        status_line = await asyncio.wait_for(reader.readline(), TIMEOUT)
        found: dict[str, str] = {}
        while (line := await asyncio.wait_for(reader.readline(), TIMEOUT)) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            found[name.strip().lower()] = value.strip()
        payload = await asyncio.wait_for(reader.readexactly(int(found.get("content-length", 0))), TIMEOUT)
        return int(status_line.split()[1]), found, payload
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError):
        return 0, {}, b""
    finally:
        writer.close()


class Load:
    """The open-loop run's requests and what came of them."""

    def __init__(self, port: int, lines: list[str], seconds: float) -> None:
        self.port, self.lines, self.seconds = port, lines, seconds
        self.latencies: list[float] = []
        self.sent = self.answered = 0
        self.statuses: dict[int, int] = {}
        self.acked: set[str] = set()
        self.feedback_sent = self.feedback_retries = 0

    def _count(self, status: int, ok: bool, latency: float) -> None:
        self.sent += 1
        self.answered += ok
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.latencies.append(latency)

    async def generate(self, i: int, due: float, start: float) -> None:
        await asyncio.sleep(max(0.0, start + due - time.perf_counter()))
        body = {"upper": self.lines[i % len(self.lines)], "n": 5}
        status, _, payload = await request(
            self.port, "POST", "/api/v1/generate", body, ADDRESSES[i % len(ADDRESSES)], {}
        )
        ok = status == 200 and bool(json.loads(payload).get("candidates"))
        self._count(status, ok, time.perf_counter() - start - due)

    async def feedback(self, i: int, due: float, start: float) -> None:
        await asyncio.sleep(max(0.0, start + due - time.perf_counter()))
        line = self.lines[(7 * i) % len(self.lines)]
        body = {"kind": "vote", "upper": line, "lower": line, "vote": 1, "model_version": "bench"}
        key = str(uuid.uuid4())
        self.feedback_sent += 1
        for attempt in range(4):  # the first try and up to three again, with the same key
            status, _, _ = await request(
                self.port, "POST", "/api/v1/feedback", body, ADDRESSES[(i + 97) % len(ADDRESSES)],
                {"Idempotency-Key": key},
            )  # fmt: skip
            if status != 0 and status < 500:
                break
            self.feedback_retries += attempt < 3
            await asyncio.sleep(0.2)
        self._count(status, status == 201, time.perf_counter() - start - due)
        if status == 201:
            self.acked.add(key)


def counted(rows: dict[str, dict[str, str]], column: str) -> int:
    return sum(int(r.get(column) or 0) for r in rows.values())


async def run_load(cluster: Cluster, lines: list[str], seconds: float) -> dict[str, Any]:
    """The load with the kill and the reload; figures of the load and of the faults."""
    assert cluster.proxy is not None
    proxy = cluster.proxy
    load = Load(cluster.port, lines, seconds)
    before = proxy.servers()
    faults: dict[str, Any] = {}
    start = time.perf_counter() + 0.2

    async def kill_and_watch() -> None:
        await asyncio.sleep(max(0.0, start + seconds / 3 - time.perf_counter()))
        victim = cluster.replica("r1")
        victim.kill(signal.SIGSTOP)  # it hangs: requests reach it and wait, unread
        await asyncio.sleep(FREEZE_S)
        victim.kill(signal.SIGKILL)  # and dies with them
        killed = time.perf_counter()
        while not proxy.servers()["r1"]["status"].startswith("DOWN"):
            await asyncio.sleep(0.05)
        faults["detect_s"] = time.perf_counter() - killed
        while proxy.servers()["r1"]["status"] != "UP":
            await asyncio.sleep(0.1)
            if time.perf_counter() - killed > 600:
                faults["recovery_s"] = float("nan")
                return
        faults["recovery_s"] = time.perf_counter() - killed

    async def reload() -> None:
        await asyncio.sleep(max(0.0, start + 2 * seconds / 3 - time.perf_counter()))
        r2 = cluster.replica("r2")
        began = time.perf_counter()
        status, _, _ = await request(
            r2.port, "POST", "/api/v1/admin/reload", {}, "127.0.0.1", {"X-Admin-Token": TOKEN}
        )
        faults["reload_status"] = status
        faults["reload_s"] = time.perf_counter() - began

    dues_g = [i / GENERATE_RPS for i in range(int(GENERATE_RPS * seconds))]
    dues_f = [i / FEEDBACK_RPS + 0.1 for i in range(int(FEEDBACK_RPS * seconds))]
    await asyncio.gather(
        *(load.generate(i, d, start) for i, d in enumerate(dues_g)),
        *(load.feedback(i, d, start) for i, d in enumerate(dues_f)),
        kill_and_watch(),
        reload(),
    )
    after = proxy.servers()
    return {
        "sent": load.sent,
        "answered": load.answered,
        "answered_pct": 100.0 * load.answered / max(1, load.sent),
        "statuses": dict(sorted(load.statuses.items())),
        "p50_ms": 1000 * pct(load.latencies, 0.5),
        "p99_ms": 1000 * pct(load.latencies, 0.99),
        "feedback_sent": load.feedback_sent,
        "feedback_client_retries": load.feedback_retries,
        "acked": load.acked,
        "haproxy_retries": counted(after, "wretr") - counted(before, "wretr"),
        "haproxy_redispatches": counted(after, "wredis") - counted(before, "wredis"),
        **faults,
    }


async def limit_burst(cluster: Cluster, source: str, line: str) -> dict[str, Any]:
    """LIMIT_SENT generate requests from one address, ten at a time: answered, refused, by whom."""
    codes: list[tuple[int, str]] = []
    todo = iter(range(LIMIT_SENT))

    async def worker() -> None:
        for _ in todo:
            status, headers, _ = await request(
                cluster.port, "POST", "/api/v1/generate", {"upper": line, "n": 5}, source, {}
            )
            codes.append((status, headers.get("x-served-by", "")))

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(10)))
    return {
        "limit_answered": sum(c == 200 for c, _ in codes),
        "limit_refused": sum(c == 429 for c, _ in codes),
        "limit_other": sum(c not in (200, 429) for c, _ in codes),
        "limit_replicas_refusing": len({who for c, who in codes if c == 429}),
        "limit_seconds": time.perf_counter() - began,
    }


def stored(url: str, acked: set[str]) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as con:
            rows = int(con.execute(text("SELECT count(*) FROM feedback")).scalar_one())
            keys = {k for (k,) in con.execute(text("SELECT key FROM feedback_key"))}
            linked = int(
                con.execute(text("SELECT count(DISTINCT feedback_id) FROM feedback_key")).scalar_one()
            )
    finally:
        engine.dispose()
    return {
        "feedback_acked": len(acked),
        "feedback_rows": rows,
        "feedback_lost": len(acked - keys),
        "feedback_doubled": rows - linked,  # a row no key points at: stored twice
    }


def scrape(cluster: Cluster) -> dict[str, Any]:
    """Each replica's /metrics: its requests by status class, 429s, decode workers alive."""
    import urllib.request

    out: dict[str, Any] = {}
    for r in cluster.replicas:
        with urllib.request.urlopen(f"{r.url}/metrics", timeout=10) as reply:
            exposition = reply.read().decode()
        by_class: dict[str, float] = {}
        refused = workers = 0.0
        for family in text_string_to_metric_families(exposition):
            for s in family.samples:
                if s.name == "duilian_http_requests_total":
                    cls = s.labels["status"][0] + "xx"
                    by_class[cls] = by_class.get(cls, 0) + s.value
                elif s.name == "duilian_requests_refused_total" and s.labels["reason"] == "rate_limited":
                    refused = s.value
                elif s.name == "duilian_decode_workers":
                    workers = s.value
        out[r.name] = {"requests": by_class, "rate_limited": refused, "decode_workers": workers}
    return out


def cache_lookups(cluster: Cluster) -> tuple[float, float]:
    """Generate cache hits and misses, summed over the replicas' /metrics."""
    import urllib.request

    hits = misses = 0.0
    for r in cluster.replicas:
        with urllib.request.urlopen(f"{r.url}/metrics", timeout=10) as reply:
            for family in text_string_to_metric_families(reply.read().decode()):
                for s in family.samples:
                    if s.name == "duilian_generate_cache_lookups_total":
                        hits += s.value * (s.labels["result"] == "hit")
                        misses += s.value * (s.labels["result"] == "miss")
    return hits, misses


async def cache_phase(cluster: Cluster, lines: list[str]) -> dict[str, float]:
    """The result cache with repeated lines: requests whose lines repeat (Zipf over
    ``CACHE_LINES`` lines, ``CACHE_REQUESTS`` at ``GENERATE_RPS``, open loop) through the proxy.
    The hit rate the replicas reached (their /metrics: their own caches, and the shared one in
    Redis when they run it, as the cluster does) against one shared cache's ideal (every request
    but each line's first), hit and miss latency (``Server-Timing: cache;desc=hit``), and a
    Redis GET of an answer's JSON with its parsing (what a shared hit adds)."""
    import random

    import redis

    rng = random.Random(0)
    pool = lines[1100 : 1100 + CACHE_LINES] or lines  # no load run asked them (1,080 from k * 1,500)
    weights = [1 / (rank + 1) for rank in range(len(pool))]
    asked = rng.choices(pool, weights, k=CACHE_REQUESTS)
    before = cache_lookups(cluster)
    timed: list[tuple[bool, float]] = []
    body = b""
    start = time.perf_counter() + 0.2

    async def one(i: int) -> None:
        nonlocal body
        due = i / GENERATE_RPS
        await asyncio.sleep(max(0.0, start + due - time.perf_counter()))
        status, headers, payload = await request(
            cluster.port, "POST", "/api/v1/generate", {"upper": asked[i], "n": 5},
            ADDRESSES[i % len(ADDRESSES)], {},
        )  # fmt: skip
        if status == 200:
            body = payload
            hit = "cache;desc=hit" in headers.get("server-timing", "")
            timed.append((hit, time.perf_counter() - start - due))

    await asyncio.gather(*(one(i) for i in range(CACHE_REQUESTS)))
    after = cache_lookups(cluster)
    hits, misses = after[0] - before[0], after[1] - before[1]
    client = redis.Redis.from_url(cluster.redis_url)
    client.set("duilian:bench:answer", body)
    gets = []
    for _ in range(2000):
        began = time.perf_counter()
        json.loads(client.get("duilian:bench:answer") or b"{}")
        gets.append(time.perf_counter() - began)
    return {
        "cache_hit_rate": hits / max(1.0, hits + misses),
        "cache_shared_ideal": 1 - len(set(asked)) / len(asked),
        "cache_hit_ms": 1000 * statistics.median([t for hit, t in timed if hit] or [float("nan")]),
        "cache_miss_ms": 1000 * statistics.median([t for hit, t in timed if not hit] or [float("nan")]),
        "cache_redis_get_ms": 1000 * statistics.median(gets),
        "cache_answer_bytes": float(len(body)),
    }


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def run(args: Any) -> dict[str, object]:
    seconds = 30.0 if args.quick else SECONDS
    runs = int(os.environ.get("DUILIAN_BENCH_CLUSTER_RUNS", "1" if args.quick else "3"))
    lines = upper_lines(4000)
    model = Path(os.environ.get("DUILIAN_SERVE_MODEL_DIR", default_model_dir()))
    per_run: list[dict[str, Any]] = []
    acked: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="duilian-cluster-") as tmp:
        setup = ClusterSetup(
            folder=Path(tmp),
            replicas=3,
            model=model,
            throwaway=True,
            env={
                "DUILIAN_SERVE_RATE_LIMIT_PER_MINUTE": str(LIMIT_PER_MINUTE),
                "DUILIAN_SERVE_RATE_LIMIT_BURST": str(LIMIT_PER_MINUTE),
                "DUILIAN_SERVE_DECODE_PROCESSES": "1",
                "DUILIAN_SERVE_ADMIN_TOKEN": TOKEN,
                "DUILIAN_SERVE_LOG_LEVEL": "warning",
            },
        )
        started = time.perf_counter()
        with Cluster(setup) as cluster:
            start_s = time.perf_counter() - started
            for k in range(runs):
                cluster.wait_up(3, 600)  # the last run's killed replica is back
                part = lines[(k * 1500) % len(lines) :] + lines
                figures = asyncio.run(run_load(cluster, part, seconds))
                acked |= figures.pop("acked")
                cluster.wait_up(3, 600)
                figures.update(asyncio.run(limit_burst(cluster, f"127.0.4.{k + 1}", lines[0])))
                figures["metrics"] = scrape(cluster)
                per_run.append(figures)
                print(json.dumps({"run": k + 1, **figures}, ensure_ascii=False, default=str), flush=True)
            totals = stored(cluster.database_url, acked)  # every run's feedback, in the one store
            cluster.wait_up(3, 600)
            cache = asyncio.run(cache_phase(cluster, lines))
    result: dict[str, object] = {
        "replicas": 3.0,
        "runs": float(runs),
        "seconds_per_run": seconds,
        "generate_rps": GENERATE_RPS,
        "feedback_rps": FEEDBACK_RPS,
        "cluster_start_s": start_s,
        "cores": float(os.cpu_count() or 0),
        "load_average_1min": os.getloadavg()[0],
    }
    for key in ("answered_pct", "p50_ms", "p99_ms", "detect_s", "recovery_s", "reload_s", "limit_answered"):
        values = [float(f[key]) for f in per_run if key in f]
        result.update({f"{key}_{name}": v for name, v in summary(values).items()})
    counts = ["sent", "answered", "feedback_sent", "feedback_client_retries", "limit_refused", "limit_other"]
    for key in [*counts, "haproxy_retries", "haproxy_redispatches"]:
        result[f"{key}_total"] = float(sum(f[key] for f in per_run))

    result.update({f"{key}_total": float(value) for key, value in totals.items()})
    result.update(cache)
    result["per_run"] = json.dumps(per_run, ensure_ascii=False, default=str)
    return result
