"""Start-up and reload of the server: the wall time from ``python -m serve`` until
``GET /api/v1/health`` answers 200 (the model loaded, its decode workers started and warmed),
and of ``POST /api/v1/admin/reload`` of the same bundle, with the shipped model and the
server's default engine (two decode worker processes, int8 on ONNX Runtime).

The graph cache (``DUILIAN_SERVE_GRAPH_CACHE``) starts empty: the first start exports the ONNX
graphs into it, the starts after it and every reload read them, as on a server that has run
once. Reported: that first start, then the median, fastest and slowest of the other starts
(5, or 2 with ``--quick``) and of as many reloads in one server; the load average at the start
says how busy the machine was.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from bench._live_server import TOKEN, start_server
from crawler.localredis import free_port, stop_process
from data.paths import default_model_dir


def started(model: Path, tmp: Path) -> tuple[float, str, subprocess.Popen[bytes]]:
    """Seconds from the command to a ready health answer; the server's URL, and its process."""
    port = free_port()
    start = time.perf_counter()
    proc = start_server(model, port, tmp, timeout=600)
    return time.perf_counter() - start, f"http://127.0.0.1:{port}", proc


def reload_seconds(url: str, model: Path) -> float:
    start = time.perf_counter()
    r = httpx.post(
        f"{url}/api/v1/admin/reload",
        json={"model_dir": str(model)},
        headers={"X-Admin-Token": TOKEN},
        timeout=300,
    )
    r.raise_for_status()
    return time.perf_counter() - start


def spread(name: str, values: list[float]) -> dict[str, float]:
    return {
        f"{name}_median_s": round(statistics.median(values), 3),
        f"{name}_fastest_s": round(min(values), 3),
        f"{name}_slowest_s": round(max(values), 3),
    }


def run(args: argparse.Namespace) -> dict[str, object]:
    runs = 2 if getattr(args, "quick", False) else 5
    model = default_model_dir()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        os.environ["DUILIAN_SERVE_GRAPH_CACHE"] = str(tmp / "graphs")
        os.environ["DUILIAN_SERVE_ADMIN_RATE_LIMIT_PER_MINUTE"] = "0"
        starts, reloads = [], []
        try:
            for i in range(runs + 1):
                seconds, url, proc = started(model, tmp)
                try:
                    starts.append(seconds)
                    if i == runs:  # the last server: the reloads
                        reloads = [reload_seconds(url, model) for _ in range(runs)]
                finally:
                    stop_process(proc)
        finally:
            for name in ("DUILIAN_SERVE_GRAPH_CACHE", "DUILIAN_SERVE_ADMIN_RATE_LIMIT_PER_MINUTE"):
                os.environ.pop(name, None)
    return {
        "runs": runs,
        "first_start_s (empty graph cache)": round(starts[0], 3),
        **spread("start", starts[1:]),
        **spread("reload", reloads),
        "load_average_at_start": round(load, 2),
        "cpus": os.cpu_count() or 0,
    }
