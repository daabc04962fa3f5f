"""Long lines against short ones on a real ``python -m serve`` (bench/long_lines.py's mixed
load): ``LONG_CLIENTS`` clients, each from its own loopback address, send 60-100 character
upper lines back to back (10 candidates), honouring ``Retry-After`` when refused, while one
more client sends ordinary 7-character lines (5 candidates) one after another, 0.3 s apart;
the figures are the short lines' latencies and what the long-line clients got.

The server runs as deployed (two decode worker processes, two decode threads), with its
result cache off (every request decodes) and the request-count limit off (what is measured is
the cost admission: ``serve/admission.py``), once with the admission off and once on.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from bench._live_server import start_server
from crawler.localredis import free_port, stop_process

LONG_CLIENTS = 16
ADMISSION_OFF = {"DUILIAN_SERVE_COST_PER_MINUTE": "0", "DUILIAN_SERVE_LONG_LINE_CHARS": "0"}


def start(
    model: Path, tmp: Path, env: dict[str, str], timeout: float = 300
) -> tuple[subprocess.Popen[bytes], str]:
    """``python -m serve`` on a free port with ``env`` added, once its health answers 200; the
    bundle's known lines (no corpus index to wait for)."""
    port = free_port()
    proc = start_server(model, port, tmp, timeout, {"DUILIAN_SERVE_KNOWN_PAIRS": "", **env})
    return proc, f"http://127.0.0.1:{port}"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else float("nan")


SSL = ssl.create_default_context()  # one for every client: each new one costs tens of ms of CPU


def client(url: str, address: str) -> httpx.AsyncClient:
    """A client of its own address. Its SSL context is made once for all (httpx makes one per
    client otherwise, tens of milliseconds each): seventeen clients starting together held the
    load generator's loop for half a second, which the short client's first request took for
    the server's latency."""
    transport = httpx.AsyncHTTPTransport(local_address=address, verify=SSL)
    return httpx.AsyncClient(base_url=url, timeout=120, transport=transport, verify=SSL)


async def _long_client(
    url: str, i: int, lines: list[str], until: float, out: Counter[str], ms: list[float]
) -> None:
    async with client(url, f"127.0.0.{100 + i}") as http:
        k = i
        while time.monotonic() < until:
            line, k = lines[k % len(lines)], k + LONG_CLIENTS
            start = time.monotonic()
            r = await http.post("/api/v1/generate", json={"upper": line, "n": 10})
            out[str(r.status_code)] += 1
            if r.status_code == 200:
                ms.append(1000 * (time.monotonic() - start))
            elif "Retry-After" in r.headers:  # a polite client waits as told
                await asyncio.sleep(min(float(r.headers["Retry-After"]), max(0.0, until - time.monotonic())))


def timing(header: str) -> str:
    """``queue;dur=1.2, infer;dur=30.5`` -> ``queue 1 + infer 30`` (ms; where the time went)."""
    parts = [p.split(";dur=") for p in header.split(",") if ";dur=" in p]
    return " + ".join(f"{name.strip()} {float(dur):.0f}" for name, dur in parts) or header


async def _short_client(
    url: str, lines: list[str], until: float, ms: list[float], failed: Counter[str], slow: list[str]
) -> None:
    async with client(url, "127.0.0.99") as http:
        k = 0
        while time.monotonic() < until:
            start = time.monotonic()
            r = await http.post("/api/v1/generate", json={"upper": lines[k % len(lines)], "n": 5})
            k += 1
            if r.status_code == 200:
                ms.append(1000 * (time.monotonic() - start))
                if ms[-1] > 150:  # over the goal: how much of it the server says it spent, and where
                    slow.append(f"#{k} {ms[-1]:.0f} ms: {timing(r.headers.get('Server-Timing', ''))}")
            else:
                failed[str(r.status_code)] += 1
            await asyncio.sleep(0.3)  # a brisk person's pace (5 candidates, the API's default), within budget


async def _load(url: str, longs: list[str], shorts: list[str], seconds: float) -> dict[str, object]:
    for line in shorts[:3]:  # warm: the first decodes of a worker are slower
        httpx.post(f"{url}/api/v1/generate", json={"upper": line, "n": 10}, timeout=60)
    until = time.monotonic() + seconds
    long_codes: Counter[str] = Counter()
    long_ms: list[float] = []
    short_ms: list[float] = []
    short_failed: Counter[str] = Counter()
    slow: list[str] = []
    await asyncio.gather(
        _short_client(url, shorts[3:], until, short_ms, short_failed, slow),
        *(_long_client(url, i, longs, until, long_codes, long_ms) for i in range(LONG_CLIENTS)),
    )
    return {
        "short_requests": len(short_ms),
        "short_refused": dict(short_failed),
        "short_p50_ms": pct(short_ms, 0.5),
        "short_p90_ms": pct(short_ms, 0.9),
        "short_p99_ms": pct(short_ms, 0.99),
        "short_max_ms": round(max(short_ms), 1) if short_ms else float("nan"),
        "short_over_150_ms": "; ".join(slow[:5]) or "none",
        "long_answers": dict(sorted(long_codes.items())),
        "long_answered_p50_ms": pct(long_ms, 0.5),
        "long_answered_max_ms": round(max(long_ms), 1) if long_ms else float("nan"),
    }


def mixed(
    model: Path, longs: list[str], shorts: list[str], seconds: float, admission: bool
) -> dict[str, object]:
    """One run of the mixed load against a fresh server, the admission on or off."""
    with tempfile.TemporaryDirectory(prefix="bench-long-") as name:
        proc, url = start(model, Path(name), {} if admission else ADMISSION_OFF)
        try:
            figures = asyncio.run(_load(url, longs, shorts, seconds))
        finally:
            stop_process(proc, timeout=20)
    return {"load_average_1min": round(os.getloadavg()[0], 2), **figures}
