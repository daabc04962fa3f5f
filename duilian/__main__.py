"""``python -m duilian``: the ``duilian`` command (duilian/cli.py)."""

from __future__ import annotations

import sys

from duilian.cli import main

if __name__ == "__main__":
    sys.exit(main())
