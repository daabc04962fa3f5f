"""The server benchmark's CPU accounting (bench/serve.py ``ServerCpu``, crawler/localredis.py
``cpu_seconds``) on real processes: one that spins, one that sleeps."""

from __future__ import annotations

import subprocess
import sys
import time

from bench.serve import ServerCpu
from crawler.localredis import cpu_seconds

SPIN = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\ntime.sleep(60)"


def test_cpu_seconds_counts_what_a_process_spent_and_not_its_sleep() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = time.monotonic()
        cpu = ServerCpu(spinner.pid)
        while cpu_seconds(spinner.pid) < 0.4 and time.monotonic() - start < 30:
            time.sleep(0.05)
        spun, slept = cpu_seconds(spinner.pid), cpu_seconds(sleeper.pid)
        time.sleep(0.3)  # spinning is over: the count stands still
        assert 0.4 <= spun <= cpu_seconds(spinner.pid) < spun + 0.05
        assert slept < 0.3  # its start-up only
        # per answered request: what the spinner used since the accounting began
        figures = cpu.per_request(4)
        assert 0 < figures["server_cpu_ms_per_request"] <= 1000 * cpu_seconds(spinner.pid) / 4
    finally:
        for p in (spinner, sleeper):
            p.kill()
            p.wait()
    assert cpu_seconds(spinner.pid) == 0.0  # gone
