"""Fingerprints of training upper lines: flag "this line was in the training data" without its text.

A fingerprint is the first 8 bytes of blake2b of the normalised line, as a uint64; the
index is a sorted array searched with ``numpy.searchsorted``.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import unicodedata
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from data.text import ASCII_TO_FULLWIDTH, is_punct


def normalise(line: str) -> str:
    """NFKC-free light normalisation: drop whitespace, fold ASCII punctuation to full width,
    and drop the marks that end the line (春风得意马蹄疾。 is a training line when 春风得意马蹄疾
    is, as the decoder reads both alike)."""
    line = unicodedata.normalize("NFC", line)
    folded = "".join(ASCII_TO_FULLWIDTH.get(ch, ch) for ch in line if not ch.isspace())
    end = len(folded)
    while end > 0 and is_punct(folded[end - 1]):
        end -= 1
    return folded[:end] if end else folded


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

    def position(self, line: str) -> int:
        """The index of ``line``'s fingerprint in the sorted array, or -1 when it is not there."""
        h = np.uint64(fingerprint(line))
        i = int(np.searchsorted(self.hashes, h))
        return i if i < self.hashes.size and self.hashes[i] == h else -1

    def contains(self, line: str) -> bool:
        return self.position(line) >= 0

    __contains__ = contains


class KnownLowers:
    """The lower lines of the training pairs, found by their upper line's fingerprint.

    Stored as one record per fingerprint of the index, in its sorted order: the record's
    distinct lower lines joined by tabs, records ending in a newline, the whole
    lzma-compressed. A record is found by the fingerprint's position in the index, so no
    upper line is stored (the index already answers "was it a training upper line").
    """

    def __init__(self, index: FingerprintIndex, text: bytes) -> None:
        ends = np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == ord("\n"))
        if ends.size != len(index):
            raise ValueError(f"known lower lines: {ends.size} records for {len(index)} fingerprints")
        self.index, self._text = index, text
        self._starts = np.concatenate(([0], ends[:-1] + 1)) if ends.size else ends
        self._ends = ends

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
    def load(cls, index: FingerprintIndex, path: str | os.PathLike[str]) -> KnownLowers:
        try:
            return cls(index, lzma.decompress(Path(path).read_bytes()))
        except lzma.LZMAError as e:
            raise ValueError(f"{path}: not an lzma file ({e})") from e

    def lowers(self, upper: str) -> list[str]:
        i = self.index.position(upper)
        if i < 0:
            return []
        record = self._text[int(self._starts[i]) : int(self._ends[i])].decode("utf-8")
        return record.split("\t") if record else []
