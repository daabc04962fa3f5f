"""Seed lower lines for composing a couplet from a few characters (duilian/compose.py).

The models write a line for a given line; a couplet from a name has no given line. Its upper
line is drafted by the bundle's reverse model (下联求上联) for *seed* lower lines: human lower
lines of the bundle's training pairs (``known_lowers.blocks``) of the asked shape, preferably
beginning with the lower line's head character, so that the reverse model answers a natural
lower line whose head is already the wanted one. The seed is only a prompt: the lower line
of the couplet is written again by the forward model for the drafted upper line.

``SeedIndex`` keeps, for each shape (the line with its characters as ``_``: ``____，_______``)
of clauses joined by ``，``: up to ``PER_KEY`` lines by first character and up to ``GENERAL``
lines spread over all of that shape. Reading the million lines takes some seconds (17 s on the
project's shared two-core machine), so the index is built once per bundle and kept in
``cache_dir()/compose`` under the sha256 of the known-lines file (gzipped JSON), written
atomically; each process reads it once.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from data.paths import cache_dir
from data.text import is_han
from model.store.bundle import Bundle
from model.store.layout import file_sha256, known_file, read_manifest

log = logging.getLogger(__name__)
PER_KEY = 8  # lines kept for one shape and first character
GENERAL = 512  # lines kept for one shape, spread evenly over its lines
MIN_LINES = 20  # a shape with fewer lines is not kept
MARK = "，"  # the one mark between the clauses of a composed couplet
FORMAT = 2  # the cache file's layout; a new one is built when it changes


def shape_of(line: str) -> str:
    """The line with each Han character as ``_`` and its marks kept: ``____，_______``."""
    return "".join("_" if is_han(ch) else ch for ch in line)


def shape_for(clauses: Iterable[int]) -> str:
    """The shape of a line of these clause lengths, joined by ``MARK``."""
    return MARK.join("_" * k for k in clauses)


@dataclass(frozen=True)
class SeedIndex:
    """Human lower lines by shape: by first character, and a spread."""

    heads: dict[str, dict[str, list[str]]]
    general: dict[str, list[str]]

    def shapes(self) -> list[str]:
        return sorted(self.general)

    @classmethod
    def build(cls, lines: Iterable[str]) -> SeedIndex:
        """The index of ``lines`` (every line's shape of Han characters and ``MARK`` only)."""
        by_shape: dict[str, list[str]] = {}
        for line in lines:
            if line and all(is_han(ch) or ch == MARK for ch in line) and not line.startswith(MARK):
                by_shape.setdefault(shape_of(line), []).append(line)
        heads: dict[str, dict[str, list[str]]] = {}
        general: dict[str, list[str]] = {}
        for shape, found in by_shape.items():
            if len(found) < MIN_LINES:
                continue
            step = max(1, len(found) // GENERAL)
            general[shape] = found[::step][:GENERAL]
            first = heads.setdefault(shape, {})
            for line in found:
                kept = first.setdefault(line[0], [])
                if len(kept) < PER_KEY:
                    kept.append(line)
        return cls(heads, general)

    def to_json(self) -> dict[str, object]:
        return {"format": FORMAT, "heads": self.heads, "general": self.general}

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> SeedIndex:
        if raw.get("format") != FORMAT:
            raise ValueError(f"seed index format {raw.get('format')!r}, not {FORMAT}")
        return cls(raw["heads"], raw["general"])  # type: ignore[arg-type]


def known_lines(bundle: Bundle) -> Iterable[str]:
    """Every lower line of the bundle's training pairs, in the index's order."""
    known = bundle.known
    if known is None:
        return
    for i in range(len(known.index)):
        yield from known.record(i)


def _cache_path(bundle: Bundle) -> Path | None:
    path = known_file(bundle.path)
    if path is None:
        return None
    sums = read_manifest(bundle.path) or {}
    digest = sums.get(path.name) or file_sha256(path)
    return cache_dir() / "compose" / f"seeds-{digest[:32]}.json.gz"


def _write(path: Path, index: SeedIndex) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".seeds-")
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
            out.write(json.dumps(index.to_json(), ensure_ascii=False).encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_index(bundle: Bundle) -> SeedIndex:
    """The bundle's seed index, from the cache or built (and cached) now; empty without
    known lines."""
    path = _cache_path(bundle)
    if path is None:
        return SeedIndex({}, {})
    try:
        with gzip.open(path, "rb") as f:
            return SeedIndex.from_json(json.loads(f.read().decode("utf-8")))
    except (OSError, ValueError, KeyError, EOFError) as exc:
        if path.exists():
            log.warning("seed index %s unreadable (%s); building it again", path, exc)
    index = SeedIndex.build(known_lines(bundle))
    try:
        _write(path, index)
    except OSError as exc:  # a read-only cache: the index still serves this process
        log.warning("seed index not cached in %s: %s", path, exc)
    return index


_INDEXES: dict[Path, SeedIndex] = {}  # by cache file: a bundle replaced in place is read anew
_LOCK = threading.Lock()


def seed_index(bundle: Bundle) -> SeedIndex:
    """``load_index`` once per known-lines file and process (under a lock: one build at a time)."""
    key = _cache_path(bundle) or bundle.path
    with _LOCK:
        index = _INDEXES.get(key)
        if index is None:
            index = _INDEXES[key] = load_index(bundle)
        return index
