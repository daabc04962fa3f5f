"""Readers for every source the data stage accepts; each yields raw (upper, lower) pairs.

Kinds: ``wb14123`` (the public release folder: train|test/in.txt and out.txt, characters
separated by spaces), ``tsv`` (upper<TAB>lower, plain or .gz), ``jsonl`` (the crawler's
output: objects with at least "upper" and "lower"), ``feedback`` (the service's export,
TSV). A source may name a ``fallback`` read when its own files are absent. A path may be
a glob (work/crawl/*.jsonl); a source whose files are absent is skipped and the report
says so. Malformed lines are yielded as None so they are counted.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

Pair = tuple[str, str]
# A line without a tab, or with two: then the slow, line-by-line path counts it.
_NOT_ONE_TAB = re.compile(r"^[^\t\n]*$|\t[^\t\n]*\t", re.MULTILINE)
_LINE_BREAKS = str.maketrans("\t\n\r", "   ")
KINDS = ("wb14123", "tsv", "jsonl", "feedback")


@dataclass(frozen=True)
class Source:
    """One named input. ``role`` is ``train`` (filtered, deduped, split) or ``test``."""

    name: str
    kind: str
    path: str
    role: str = "train"
    split: str = "train"  # for the wb14123 folder layout: which half to read
    # Read instead when this source's own files are absent (the wb14123 TSVs of the shared
    # folder, else the public release folder that `python -m data.corpora` lays out).
    fallback: Source | None = None

    def files(self, base: Path) -> list[Path]:
        pattern = self.path if os.path.isabs(self.path) else str(base / self.path)
        return sorted(Path(p) for p in glob.glob(pattern))


def _open_text(path: Path) -> Iterator[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as fh:
        yield from fh


def read_tsv(path: Path) -> list[Pair | None]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as fh:
        text = fh.read().replace("\r\n", "\n")
    text = text.removesuffix("\n")
    lines = text.split("\n") if text else []
    if not _NOT_ONE_TAB.search(text):
        # Exactly one tab on every line (the usual case): pair the fields up in C.
        fields = "\t".join(lines).split("\t")
        return list(zip(fields[0::2], fields[1::2], strict=True)) if text else []
    return [_tsv_line(line) for line in lines]


def _tsv_line(line: str) -> Pair | None:
    parts = line.split("\t")
    return (parts[0], parts[1]) if len(parts) == 2 else None


def read_jsonl(path: Path) -> list[Pair | None]:
    return [_jsonl_line(line) for line in _open_text(path) if line.strip()]


def _one_line(value: object) -> str:
    # Later stages join lines with newlines and pairs with tabs: neither may be inside one.
    return str(value).translate(_LINE_BREAKS)


def _jsonl_line(line: str) -> Pair | None:
    try:
        obj = json.loads(line)
        return (_one_line(obj["upper"]), _one_line(obj["lower"]))
    except (ValueError, KeyError, TypeError):
        return None


def read_wb14123(folder: Path, split: str) -> list[Pair | None]:
    """The release layout: in.txt and out.txt line by line, characters space-separated.

    Spaces are removed here because they separate characters in this layout; a file
    longer than the other is reported as malformed lines.
    """
    ins = list(_open_text(folder / split / "in.txt"))
    outs = list(_open_text(folder / split / "out.txt"))
    pairs: list[Pair | None] = [
        (u.replace(" ", "").strip(), w.replace(" ", "").strip()) for u, w in zip(ins, outs, strict=False)
    ]
    return pairs + [None] * abs(len(ins) - len(outs))


def read_source(source: Source, path: Path) -> list[Pair | None]:
    if source.kind == "wb14123":
        return read_wb14123(path, source.split)
    if source.kind == "jsonl":
        return read_jsonl(path)
    if source.kind in ("tsv", "feedback"):
        return read_tsv(path)
    raise ValueError(f"unknown source kind {source.kind!r} (known: {', '.join(KINDS)})")


def source_present(source: Source, path: Path) -> bool:
    if source.kind == "wb14123":
        return (path / source.split / "in.txt").is_file() and (path / source.split / "out.txt").is_file()
    return path.is_file()
