"""Fingerprints of training upper lines: flag "this line was in the training data" without its text.

A fingerprint is the first 8 bytes of blake2b of the normalised line, as a uint64; the
index is a sorted array searched with ``numpy.searchsorted``.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import threading
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from data.text import ASCII_TO_FULLWIDTH, text_end


def normalise(line: str) -> str:
    """NFKC-free light normalisation: drop whitespace, fold ASCII punctuation to full width,
    and drop the marks that end the line (春风得意马蹄疾。 is a training line when 春风得意马蹄疾
    is, as the decoder reads both alike)."""
    line = unicodedata.normalize("NFC", line)
    folded = "".join(ASCII_TO_FULLWIDTH.get(ch, ch) for ch in line if not ch.isspace())
    return folded[: text_end(folded)] or folded


def fingerprint(line: str) -> int:
    digest = hashlib.blake2b(normalise(line).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def fingerprints(lines: Iterable[str]) -> np.ndarray:
    """Sorted unique uint64 fingerprints of ``lines``."""
    arr = np.fromiter((fingerprint(x) for x in lines), dtype=np.uint64)
    return np.unique(arr)


class FingerprintIndex:
    def __init__(self, hashes: np.ndarray) -> None:
        hashes = np.asarray(hashes, dtype=np.uint64)
        # a bundle's file is sorted already: checked in one pass, not sorted again (np.unique:
        # a copy and a sort of a million hashes, a second of a busy command-line start)
        ordered = hashes.ndim == 1 and bool(np.all(hashes[1:] > hashes[:-1]))
        self.hashes = hashes if ordered else np.unique(hashes)

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> FingerprintIndex:
        return cls(fingerprints(lines))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FingerprintIndex:
        """The index in ``path``, memory-mapped (read-only; pages read as lookups touch them)."""
        return cls(np.load(path, allow_pickle=False, mmap_mode="r"))

    def save(self, path: str | os.PathLike[str]) -> None:
        with open(Path(path), "wb") as f:
            np.save(f, self.hashes, allow_pickle=False)

    def __len__(self) -> int:
        return int(self.hashes.size)

    def position(self, line: str) -> int:
        """The index of ``line``'s fingerprint in the sorted array, or -1 when it is not there."""
        h = np.uint64(fingerprint(line))
        i = int(np.searchsorted(self.hashes, h))
        return i if i < self.hashes.size and self.hashes[i] == h else -1

    def contains(self, line: str) -> bool:
        return self.position(line) >= 0

    __contains__ = contains


class KnownLinesError(ValueError):
    """A bundle's known lower lines cannot be read (a damaged or missing file)."""


class KnownLowers:
    """The lower lines of the training pairs, found by their upper line's fingerprint.

    Stored as one record per fingerprint of the index, in its sorted order: the record's
    distinct lower lines joined by tabs, records ending in a newline, the whole
    lzma-compressed. A record is found by the fingerprint's position in the index, so no
    upper line is stored (the index already answers "was it a training upper line").
    """

    def __init__(self, index: FingerprintIndex, text: bytes | Callable[[], bytes]) -> None:
        """``text``: the records, or a function that reads them, called on the first lookup
        (``load(..., lazy=True)``: decompressing the shipped file takes a second or two, which a
        command-line answer for a line outside the training set never needs)."""
        self.index = index
        self._read = text if callable(text) else None
        self._lock = threading.Lock()
        if not callable(text):
            self._records(text)

    def _records(self, text: bytes) -> None:
        ends = np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == ord("\n"))
        if ends.size != len(self.index):
            raise KnownLinesError(
                f"known lower lines: {ends.size} records for {len(self.index)} fingerprints"
            )
        self._starts = np.concatenate(([0], ends[:-1] + 1)) if ends.size else ends
        self._ends, self._text = ends, text

    def _loaded(self) -> None:
        with self._lock:
            if self._read is not None:
                self._records(self._read())
                self._read = None

    @staticmethod
    def encode(index: FingerprintIndex, pairs: Iterable[tuple[str, str]], per_line: int = 10) -> bytes:
        """The compressed records for ``index`` from the training ``pairs``."""
        by_hash: dict[int, list[str]] = {}
        for upper, lower in pairs:
            lowers = by_hash.setdefault(fingerprint(upper), [])
            if lower not in lowers and len(lowers) < per_line and "\t" not in lower and "\n" not in lower:
                lowers.append(lower)
        text = "".join("\t".join(by_hash.get(int(h), ())) + "\n" for h in index.hashes)
        return lzma.compress(text.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME)

    @classmethod
    def load(cls, index: FingerprintIndex, path: str | os.PathLike[str], lazy: bool = False) -> KnownLowers:
        """The records in ``path``; with ``lazy``, read on the first lookup of a line that has
        some (a damaged file is then a ``KnownLinesError`` of that lookup)."""

        def read() -> bytes:
            try:
                return lzma.decompress(Path(path).read_bytes())
            except lzma.LZMAError as e:
                raise KnownLinesError(f"{path}: not an lzma file ({e})") from e
            except OSError as e:  # gone or unreadable since the bundle was loaded and checked
                raise KnownLinesError(f"{path}: {e}") from e

        return cls(index, read if lazy else read())

    def lowers(self, upper: str) -> list[str]:
        i = self.index.position(upper)
        if i < 0:
            return []
        self._loaded()
        record = self._text[int(self._starts[i]) : int(self._ends[i])].decode("utf-8")
        return record.split("\t") if record else []
