"""The server benchmark's CPU accounting (bench/_load.py ``ServerCpu``, crawler/localredis.py
``cpu_seconds``) on real processes: one that spins, one that sleeps."""

from __future__ import annotations

import subprocess
import sys
import time

from bench._load import ServerCpu
from crawler.localredis import cpu_seconds

# spins 0.5 s of its own CPU time, says so, then sleeps
SPIN = (
    "import sys, time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass\n"
    "print('spun', flush=True)\ntime.sleep(60)"
)
TICK = 0.01  # /proc counts user and system time apart, each in whole clock ticks


def test_cpu_seconds_counts_what_a_process_spent_and_not_its_sleep() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        cpu = ServerCpu(spinner.pid)
        assert spinner.stdout is not None and spinner.stdout.readline().strip() == "spun"
        spun, slept = cpu_seconds(spinner.pid), cpu_seconds(sleeper.pid)
        time.sleep(0.3)  # spinning is over: the count stands still
        assert 0.5 - 2 * TICK <= spun <= cpu_seconds(spinner.pid) < spun + 0.05
        assert slept < 0.3  # its start-up only
        # per answered request: what the spinner used since the accounting began
        figures = cpu.per_request(4)
        assert 0 < figures["server_cpu_ms_per_request"] <= 1000 * cpu_seconds(spinner.pid) / 4
        assert figures["workers_cpu_ms_per_request"] == 0  # it started no decode workers
    finally:
        for p in (spinner, sleeper):
            p.kill()
            p.wait()
    assert cpu_seconds(spinner.pid) == 0.0  # gone
