"""Fingerprints of training upper lines: flag "this line was in the training data" without its text.

A fingerprint is the first 8 bytes of blake2b of the normalised line, as a uint64; the
index is a sorted array searched with ``numpy.searchsorted``.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from data.text import ASCII_TO_FULLWIDTH


def normalise(line: str) -> str:
    """NFKC-free light normalisation: drop whitespace, fold ASCII punctuation to full width."""
    line = unicodedata.normalize("NFC", line)
    return "".join(ASCII_TO_FULLWIDTH.get(ch, ch) for ch in line if not ch.isspace())


def fingerprint(line: str) -> int:
    digest = hashlib.blake2b(normalise(line).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def fingerprints(lines: Iterable[str]) -> np.ndarray:
    """Sorted unique uint64 fingerprints of ``lines``."""
    arr = np.fromiter((fingerprint(x) for x in lines), dtype=np.uint64)
    return np.unique(arr)


class FingerprintIndex:
    def __init__(self, hashes: np.ndarray) -> None:
        self.hashes = np.unique(np.asarray(hashes, dtype=np.uint64))

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> FingerprintIndex:
        return cls(fingerprints(lines))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FingerprintIndex:
        return cls(np.load(path, allow_pickle=False))

    def save(self, path: str | os.PathLike[str]) -> None:
        with open(Path(path), "wb") as f:
            np.save(f, self.hashes, allow_pickle=False)

    def __len__(self) -> int:
        return int(self.hashes.size)

    def contains(self, line: str) -> bool:
        h = np.uint64(fingerprint(line))
        i = int(np.searchsorted(self.hashes, h))
        return i < self.hashes.size and self.hashes[i] == h

    __contains__ = contains
