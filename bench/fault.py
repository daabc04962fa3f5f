"""Faults under load: decode workers killed and the bundle reloaded while requests keep coming.

Against a real ``python -m serve`` on loopback (``bench._live_server.served``: the shipped model,
its result cache off, two decode worker processes):
1. the sustained rate, by ``bench.serve``'s open-loop ladder;
2. ten minutes (``--quick``: three) of open-loop load at 80% of that rate (request i due at
   i/rate, whatever the answers), while a decode worker is killed with SIGKILL every minute
   (the newest worker process of the server, found in /proc) and
   the bundle is reloaded twice (POST /api/v1/admin/reload), each reload halfway between
   two kills.

Figures: requests sent, answered (200 with candidates), 503s (the requests a dead worker
held, or those that found no worker in time), other 5xx (goal 0), other failures (no
answer, 4xx), and the recovery time after each kill: from the kill until the first of
``STREAK_SECONDS`` of requests answered normally (200 with candidates, within the ladder's
latency goal) in a row (``recovery``), among the requests due before the next kill (a reload
in between is part of what it recovers from). A kill after which the requests never ran
normally again before the next kill counts as not recovered. ``goal_met``: no 5xx other
than 503 and every kill recovered.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench._live_server import reload_bundle, served
from bench._load import Reply, open_loop, schedule
from bench.serve import LATENCY_GOAL_MS, ladder, rate_ladder, wait_idle
from crawler.localredis import spawned_children, started

LOAD_SHARE = 0.8  # of the sustained rate
STREAK_SECONDS = 1.0  # a second's requests in a row answered normally: recovered
MIN_STREAK = 5  # and at least this many of them
RELOADS = 2
TIMELINE = "DUILIAN_BENCH_FAULT_TIMELINE"  # a file to write every request and fault to (JSON lines)


@dataclass(frozen=True)
class Fault:
    at: float  # seconds from the start of the load
    kind: str  # "kill" or "reload"


Done = tuple[Fault, float, str]  # a fault carried out: when (seconds from the start), and what came of it


def plan(seconds: float, period: float, reloads: int = RELOADS) -> list[Fault]:
    """A kill in the middle of every ``period`` of the run, and ``reloads`` reloads on period
    boundaries, spread over the run: each is half a period from the kills beside it."""
    periods = int(seconds // period)
    kills = [Fault((k + 0.5) * period, "kill") for k in range(periods)]
    spread = {round(periods * (j + 1) / (reloads + 1)) for j in range(reloads)}
    bounds = sorted({max(1, min(periods - 1, b)) for b in spread}) if periods > 1 else []
    loads = [Fault(float(b * period), "reload") for b in bounds]
    return sorted(kills + loads, key=lambda f: f.at)


def normal(reply: Reply, limit_s: float = LATENCY_GOAL_MS / 1000) -> bool:
    """Answered as when nothing goes wrong: candidates, within the latency goal."""
    return reply.ok and reply.latency <= limit_s


def recovery(
    replies: list[Reply], at: float, until: float, streak: int, limit_s: float = LATENCY_GOAL_MS / 1000
) -> float | None:
    """Seconds from a fault at ``at`` until the first of ``streak`` requests in a row (by due
    time, due from ``at`` and before ``until``) that are all answered normally is answered;
    None when there is no such run before ``until``."""
    window = sorted((r for r in replies if at <= r.due < until), key=lambda r: r.due)
    run = 0
    for i, reply in enumerate(window):
        run = run + 1 if normal(reply, limit_s) else 0
        if run == streak:
            return window[i - streak + 1].done - at
    return None


def newest_worker(server_pid: int) -> int | None:
    """The decode worker the server started last, or None while it has none: one of the pool
    serving now when no reload is starting a new pool (a reload's retired pool is older; while
    a reload runs, the newest workers are its new pool's, so ``inject`` waits for the reload)."""
    workers = spawned_children(server_pid)
    return max(workers, key=started) if workers else None


async def inject(
    faults: list[Fault], server_pid: int, port: int, model: Path, start: float, log: list[Done]
) -> None:
    """Carries out each of ``faults`` at its time, whatever the others do (a reload that takes
    long delays no kill); ``log`` gets them in the order they happened."""
    no_reload = asyncio.Event()  # set while no reload runs: a kill waits for it
    no_reload.set()
    async with httpx.AsyncClient(timeout=600) as http:

        async def one(fault: Fault) -> None:
            await asyncio.sleep(max(0.0, start + fault.at - time.perf_counter()))
            at = time.perf_counter() - start
            if fault.kind == "reload":
                no_reload.clear()
                try:
                    r = await reload_bundle(port, model, http)
                finally:
                    no_reload.set()
                what = f"reload {r.status_code} in {time.perf_counter() - start - at:.1f}s"
                log.append((fault, at, what if r.status_code == 200 else f"{what}: {r.text[:200]}"))
                return
            await no_reload.wait()  # else the newest workers are the new pool's, not the serving one's
            if (pid := newest_worker(server_pid)) is None:
                log.append((fault, time.perf_counter() - start, "no worker"))
                return
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended meanwhile
                log.append((fault, time.perf_counter() - start, f"worker {pid} already gone"))
                return
            log.append((fault, time.perf_counter() - start, f"killed {pid}"))

        await asyncio.gather(*(one(fault) for fault in faults))
    log.sort(key=lambda done: done[1])


def summary(replies: list[Reply], log: list[Done], end: float, rate: float) -> dict[str, object]:
    """The figures of one run (``log``: the faults as ``inject`` recorded them)."""
    streak = max(MIN_STREAK, round(STREAK_SECONDS * rate))
    kills = [at for fault, at, what in log if fault.kind == "kill" and what.startswith("killed")]
    # each kill's window runs to the next kill (a reload inside it is part of what it recovers
    # from); each reload's to the next fault
    untils = [*kills[1:], end]
    recoveries = [recovery(replies, at, until, streak) for at, until in zip(kills, untils, strict=True)]
    times = [at for _, at, _ in log] + [end]
    after_reloads = [
        recovery(replies, at, times[i + 1], streak)
        for i, (fault, at, _) in enumerate(log)
        if fault.kind == "reload"
    ]
    recovered = [r for r in recoveries if r is not None]
    statuses = [r.status for r in replies]
    answered = sum(r.ok for r in replies)
    shed = statuses.count(503)
    other_5xx = sum(500 <= s < 600 and s != 503 for s in statuses)
    reloads = [what for fault, _, what in log if fault.kind == "reload"]
    return {
        "requests_sent": float(len(replies)),
        "answered": float(answered),
        "shed_503": float(shed),
        "other_5xx": float(other_5xx),
        "other_failed": float(len(replies) - answered - shed - other_5xx),
        "kills": float(len(recoveries)),
        "reloads": float(len(reloads)),
        "reloads_ok": float(sum(what.startswith("reload 200") for what in reloads)),
        "recovery_s": [round(r, 3) if r is not None else None for r in recoveries],
        "recovery_median_s": statistics.median(recovered) if recovered else float("nan"),
        "recovery_max_s": max(recovered) if recovered else float("nan"),
        "not_recovered": float(len(recoveries) - len(recovered)),
        "recovery_streak": float(streak),
        "reload_recovery_s": [round(r, 3) if r is not None else None for r in after_reloads],
        "goal_met": float(other_5xx == 0 and len(recovered) == len(recoveries) > 0),
    }


def write_timeline(path: Path, replies: list[Reply], log: list[Done]) -> None:
    rows = [{"fault": f.kind, "planned": f.at, "at": round(at, 3), "what": what} for f, at, what in log]
    rows += [{"due": r.due, "done": round(r.done, 3), "status": r.status, "ok": r.ok} for r in replies]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def run(args: Any) -> dict[str, object]:
    quick = bool(getattr(args, "quick", False))
    seconds, period = (180.0, 60.0) if quick else (600.0, 60.0)
    rates, step = rate_ladder(quick)
    with served("bench-fault-") as server:
        results: dict[str, object] = dict(server.setting)
        sustained = ladder(server.url, server.port, server.lines, rates, step, results, "ladder_")
        rate = LOAD_SHARE * (sustained or rates[-1])
        wait_idle(server.url)
        faults = plan(seconds, period)
        log: list[Done] = []

        async def faulting(start: float) -> None:
            await inject(faults, server.proc.pid, server.port, server.model, start, log)

        dues = schedule(rate, seconds)
        replies, elapsed = asyncio.run(open_loop(server.port, server.lines[::-1], dues, sides=[faulting]))
        if TIMELINE in os.environ:  # every request and fault, for a closer look
            write_timeline(Path(os.environ[TIMELINE]), replies, log)
        results.update(
            {
                "rate_rps": rate,
                "seconds": seconds,
                "kill_every_s": period,
                **summary(replies, log, elapsed, rate),
                "faults": [f"{at:.1f}s {what}" for _, at, what in log],
            }
        )
    return results
