"""The OpenMP wait policy follows how busy the machine is."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from model.training.omp import machine_is_busy


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux's /proc/stat")
def test_a_machine_with_every_core_busy_is_busy() -> None:
    spin = "while True: pass"
    busy = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 1)]
    try:
        assert machine_is_busy(window=0.5)
    finally:
        for p in busy:
            p.kill()
            p.wait()
