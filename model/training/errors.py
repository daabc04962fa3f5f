"""The errors the command-line entry points print as one line: ``UsageError`` (exit status 2)
and ``TrainingDiverged`` (exit status 1)."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


class TrainingDiverged(Exception):
    """The training loss (or the gradient norm) became NaN or infinite: the run stops without
    saving, printed as one line, exit status 1."""
