"""The OpenMP wait policy for the command-line entry points that run PyTorch on a CPU (set
before torch loads, so this module imports no torch)."""

from __future__ import annotations

import os
import sys
import time


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs since boot, from Linux's /proc/stat; None elsewhere."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def machine_is_busy(window: float = 0.3) -> bool:
    """Whether other work keeps at least half of this machine's cores busy now: the CPU time
    used over ``window`` seconds (Linux), else the load average of the last minute. The load
    average lags: for a minute after a job ends it still counts it."""
    first = _cpu_times()
    if first is not None:
        time.sleep(window)
        second = _cpu_times()
        if second is not None and second[1] > first[1]:
            return (second[0] - first[0]) / (second[1] - first[1]) >= 0.5
    try:
        return os.getloadavg()[0] >= (os.cpu_count() or 1) / 2
    except OSError:  # no load average on this platform
        return False


def set_omp_wait_policy(module: str) -> None:
    """Choose how OpenMP's threads wait between operations, by whether the machine is busy.

    By default they spin a short while before sleeping, which is fastest on an idle machine
    (seen here: the `cpu` preset trained at 867 pairs/s with the default, 928 spinning always,
    587 never spinning; EXPERIMENTS.md §14). On a shared, busy CPU the spinning threads take
    cores the others need and made everything 3-4x slower (an evaluation beside a training
    took minutes per thousand lines), so there the threads sleep at once (``PASSIVE``).
    The policy is read when torch loads, so it is set and the interpreter restarted as
    ``python -m module`` (same PID, so torchrun and callers keep their handle). A policy set
    by the caller is kept. Call it first thing under ``__main__``."""
    if "OMP_WAIT_POLICY" in os.environ or not machine_is_busy():
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.execv(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]])
