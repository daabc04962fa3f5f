"""``python -m model.blind``: the blind pairwise comparison kit, model.release.blind (see its --help)."""

from __future__ import annotations

import sys

from model.release.blind import main

if __name__ == "__main__":
    sys.exit(main())
