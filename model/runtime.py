"""Process set-up shared by the command-line entry points that run PyTorch on a CPU."""

from __future__ import annotations

import os
import sys


def reexec_with_passive_omp(module: str) -> None:
    """OpenMP threads that spin while waiting make a shared, busy CPU 3-4x slower (seen here:
    an evaluation beside a training took minutes per thousand lines); the policy is read when
    torch loads, so set it and restart the interpreter as ``python -m module`` (same PID, so
    torchrun and callers keep their handle). Call it first thing under ``__main__``."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        os.execv(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]])
