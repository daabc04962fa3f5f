"""The error the command-line entry points print as one line (exit status 2)."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""
