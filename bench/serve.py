"""Server under load: the HTTP API on loopback, a real uvicorn process, the shipped model.

Phases against ``python -m serve`` on 127.0.0.1 (its result cache off, so every request is
a real decode of a distinct test-set upper line):
1. fixed rates, from 100 requests/s down: an async client sends requests on a schedule
   and measures latency from each request's due time (no coordinated omission). The
   first rate answered with p99 ≤ 200 ms and no failed or shed (503) request is the
   sustained rate; the goal is ≥ 100/s on 2 cores. When the model has a proposer, the
   same ladder again with fast-mode requests (``fast_`` figures).
2. that rate again while the model is reloaded (POST /api/v1/admin/reload) three times:
   requests failed by swapping models (goal 0).
3. saturation: Debian's wrk (if installed) with 8 connections: peak requests/s.

``goal_met`` is the goal by the ladder (phase 1), ``goal_met_wrk`` by wrk's closed loop
(phase 3); both also need phase 2 without a failed request.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any, cast

import httpx

from bench._live_server import reload_bundle, served
from bench._load import ServerCpu, open_loop, pct, saturation_wrk, schedule

LATENCY_GOAL_MS = 200.0  # the p99 a rate must keep to count as sustained


async def fixed_rate(
    port: int,
    lines: list[str],
    rate: float,
    seconds: float,
    reload_model: Path | None = None,
    extra: dict[str, object] | None = None,
    server_pid: int | None = None,
) -> dict[str, float]:
    """Open-loop load at ``rate`` for ``seconds`` (``schedule``); with ``reload_model``, that
    bundle reloaded three times meanwhile. ``extra``: more fields of every request (e.g.
    ``{"fast": True}``). With ``server_pid`` (and no reload), the CPU the server and its decode
    workers used per answered request, and the load generator's own (``ServerCpu``)."""
    reloads = 0
    cpu = ServerCpu(server_pid) if server_pid is not None and reload_model is None else None

    async def reloader(start: float) -> None:
        nonlocal reloads
        async with httpx.AsyncClient(timeout=120) as http:
            for _ in range(3):
                await asyncio.sleep(seconds / 4)
                assert reload_model is not None
                reloads += (await reload_bundle(port, reload_model, http)).status_code == 200

    sides = [reloader] if reload_model is not None else []
    replies, elapsed = await open_loop(port, lines, schedule(rate, seconds), extra, sides)
    errors = sum(not r.ok for r in replies)
    busy = sum(r.status == 503 for r in replies)
    latencies = [r.latency for r in replies]
    figures = {
        "requests": float(len(replies)),
        "answered_rps": (len(replies) - errors) / elapsed,
        "p50_ms": 1000 * pct(latencies, 0.50),
        "p99_ms": 1000 * pct(latencies, 0.99),
        "failed": float(errors - busy),
        "shed_503": float(busy),
    }
    if reload_model is not None:
        figures["reloads"] = float(reloads)
    if cpu is not None:
        figures.update(cpu.per_request(len(replies) - errors))
    return figures


def met(figures: dict[str, float]) -> bool:
    return figures["p99_ms"] <= LATENCY_GOAL_MS and figures["failed"] == 0 and figures["shed_503"] == 0


def wait_idle(url: str, timeout: float = 120) -> None:
    """Let the server finish the backlog of an overloaded phase before the next one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        start = time.perf_counter()
        httpx.post(f"{url}/api/v1/generate", json={"upper": "春风得意", "n": 5}, timeout=timeout)
        if time.perf_counter() - start < 1.0:
            return


def ladder(
    url: str,
    port: int,
    lines: list[str],
    rates: list[float],
    seconds: float,
    results: dict[str, object],
    prefix: str,
    extra: dict[str, object] | None = None,
    server_pid: int | None = None,
) -> float:
    """Fixed rates from the highest down until one is met; its figures go into ``results``."""
    sustained = 0.0
    for i, rate in enumerate(rates):
        wait_idle(url)
        part = lines[(i * 500) % len(lines) :] + lines  # fresh lines for each phase
        figures = asyncio.run(fixed_rate(port, part, rate, seconds, extra=extra, server_pid=server_pid))
        results.update({f"{prefix}at{rate:g}_{k}": v for k, v in figures.items() if k != "requests"})
        if met(figures):
            sustained = rate
            break
    results[f"{prefix}sustained_rps"] = sustained
    return sustained


def rate_ladder(quick: bool) -> tuple[list[float], float]:
    """The rates tried (requests/s, highest first) and the seconds at each."""
    if quick:
        return [100.0, 50.0, 25.0, 12.0, 6.0], 5.0
    return [100.0, 85.0, 70.0, 50.0, 35.0, 25.0, 18.0, 12.0, 8.0, 5.0], 15.0


def run(args: Any) -> dict[str, object]:
    quick = bool(getattr(args, "quick", False))
    rates, seconds = rate_ladder(quick)
    with served("bench-serve-") as server:
        url, port, lines, model = server.url, server.port, server.lines, server.model
        results: dict[str, object] = dict(server.setting)
        pid = server.proc.pid
        sustained = ladder(url, port, lines, rates, seconds, results, "", server_pid=pid)
        if server.info.get("fast_mode"):  # the same ladder for requests in the fast mode
            ladder(url, port, lines[::-1], rates, seconds, results, "fast_", {"fast": True}, pid)
        wait_idle(url)
        reload_rate = sustained or rates[-1]
        figures = asyncio.run(fixed_rate(port, lines[::-1], reload_rate, max(seconds, 8.0), model))
        results.update({f"reload_{k}": v for k, v in figures.items()})
        if shutil.which("wrk"):
            wait_idle(url)
            results.update(saturation_wrk(url, lines[::-1], 5 if quick else 15, 8, server.tmp))
    # the goal (docs/MEASUREMENTS.md): >= 100 requests/s at p99 <= 200 ms, no errors, no failure
    # during reloads; by the open-loop ladder (latency from each request's due time, the Python
    # load generator sharing the two cores), and by wrk's closed loop (8 connections)
    reloads_ok = results["reload_failed"] == 0
    results["goal_met"] = float(sustained >= 100 and reloads_ok)
    if "wrk_rps" in results:
        wrk = {k: float(cast(float, results.get(k, 1e9))) for k in ("wrk_rps", "wrk_p99_ms", "wrk_errors")}
        wrk_ok = wrk["wrk_rps"] >= 100 and wrk["wrk_p99_ms"] <= 200 and wrk["wrk_errors"] == 0
        results["goal_met_wrk"] = float(wrk_ok and reloads_ok)
    return results
