"""The known lower lines of the training pairs, looked up by upper line.

Built once from an ``upper<TAB>lower`` file (plain or gzip) that stays in memory as bytes;
the index is a sorted array of upper-line hashes beside the offsets of their lines
(about 16 bytes a pair), so 740,000 pairs cost tens of megabytes, not a dict of strings.
An upper line is keyed by its characters alone, as the bundle's index keys it
(``model.store.fingerprint.normalise``): a line typed without its commas finds its pairs.
"""

from __future__ import annotations

import gzip
import logging
import re
from array import array
from pathlib import Path

import numpy as np

from model.store.fingerprint import normalise

log = logging.getLogger(__name__)
_UPPER = re.compile(rb"^([^\t\n]+)\t", re.M)


def _key(upper: bytes) -> int:
    # Python's hash of a str is stable within one process, the index's lifetime.
    return hash(normalise(upper.decode("utf-8", "replace"))) & 0xFFFF_FFFF_FFFF_FFFF


class KnownLines:
    def __init__(self, text: bytes) -> None:
        self._text = text
        # one match at a time: splitting into a list of lines would double the peak memory
        key_list, offset_list = array("Q"), array("q")  # 8 bytes an entry, not a Python int
        for m in _UPPER.finditer(text):
            key_list.append(_key(m.group(1)))
            offset_list.append(m.start())
        keys, offsets = np.frombuffer(key_list, dtype=np.uint64), np.frombuffer(offset_list, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        self._keys, self._offsets = keys[order], offsets[order]

    @classmethod
    def from_file(cls, path: Path) -> KnownLines:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        index = cls(raw)
        log.info("known lower lines: %d pairs from %s", len(index), path)
        return index

    def __len__(self) -> int:
        return len(self._keys)

    def lowers(self, upper: str, limit: int = 5) -> list[str]:
        """Distinct lower lines paired with ``upper`` in the file, in file order, at most ``limit``."""
        want = normalise(upper)
        key = np.uint64(_key(upper.encode()))
        lo, hi = np.searchsorted(self._keys, key, "left"), np.searchsorted(self._keys, key, "right")
        found: list[str] = []
        for off in sorted(int(o) for o in self._offsets[lo:hi]):
            end = self._text.find(b"\n", off)
            up, _, low = self._text[off : end if end >= 0 else None].partition(b"\t")
            text = low.decode("utf-8", "replace").strip()
            if normalise(up.decode("utf-8", "replace")) == want and text and text not in found:
                found.append(text)
                if len(found) >= limit:
                    break
        return found
