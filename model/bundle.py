"""``python -m model.bundle``: a bundle's SHA256SUMS, reverse model, int8 weights and checkpoint
export, model.release.bundle_cli (see its --help)."""

from __future__ import annotations

import sys

from model.release.bundle_cli import main

if __name__ == "__main__":
    sys.exit(main())
