"""``python -m model.card``: (re)write a bundle's model card, model.release.card (see its --help)."""

from __future__ import annotations

import sys

from model.release.card import main

if __name__ == "__main__":
    sys.exit(main())
