"""`make eval`: ``python -m model.evaluate`` runs model.release.evaluate (see its --help)."""

from __future__ import annotations

import sys

from model.release.evaluate import main
from model.training.omp import set_omp_wait_policy

if __name__ == "__main__":
    set_omp_wait_policy("model.evaluate")
    sys.exit(main())
