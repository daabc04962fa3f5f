"""The data stage's files, each written whole or not at all."""

from __future__ import annotations

import shutil
from pathlib import Path

from data.files import atomic_file
from data.sources import Pair


def write_lines(path: Path, lines: list[str]) -> None:
    """Write whole or not at all, so a reader never sees half a file."""
    with atomic_file(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n" if lines else "")


def copy_file(source: Path | None, path: Path) -> None:
    """The file byte for byte (an empty file when there is no source), whole or not at all."""
    with atomic_file(path) as f:
        if source is not None:
            with open(source, "rb") as src:
                shutil.copyfileobj(src, f)


def write_pairs(path: Path, pairs: list[Pair]) -> None:
    write_lines(path, list(map("\t".join, pairs)))
