"""Start-up of the command line: the wall time of ``duilian generate 春风得意马蹄疾`` (one line,
five candidates, the shipped model), a whole process each time, as a person runs it.

The first run exports the ONNX graphs into an empty graph cache (``--graph-cache``); the runs
after it read them, as every run does after the first on a machine. Reported: that first run,
the median, fastest and slowest of the others (5, or 2 with ``--quick``), and for scale the
time a bare ``python -c "import torch"`` takes (which a run on cached graphs no longer pays:
it imports no PyTorch). The load average at
the start says how busy the machine was. Goal (issue 26): under 3 s on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from data.paths import ROOT

LINE = "春风得意马蹄疾"


def command() -> list[str]:
    """The console script beside this interpreter, else ``python -m duilian``."""
    script = Path(sys.executable).with_name("duilian")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "duilian"]


def timed(args: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, env=env, timeout=600)
    return time.perf_counter() - start


def run(args: argparse.Namespace) -> dict[str, object]:
    runs = 2 if getattr(args, "quick", False) else 5
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as graphs:
        line = [*command(), "generate", LINE, "--graph-cache", graphs]
        first = timed(line)
        times = [timed(line) for _ in range(runs)]
    torch_import = statistics.median(timed([sys.executable, "-c", "import torch"]) for _ in range(3))
    return {
        "command": " ".join(Path(p).name for p in line[:-2]),
        "runs": runs,
        "first_run_s (exports the graphs)": round(first, 3),
        "median_s": round(statistics.median(times), 3),
        "fastest_s": round(min(times), 3),
        "slowest_s": round(max(times), 3),
        "import_torch_s": round(torch_import, 3),
        "load_average_at_start": round(load, 2),
        "cpus": os.cpu_count() or 0,
    }
