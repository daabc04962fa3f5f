"""Fingerprints of training upper lines: flag "this line was in the training data" without its text.

A fingerprint is the first 8 bytes of blake2b of the line's characters without its punctuation
(a couplet is written on a door without the commas a book prints), as a uint64; the
index is a sorted array searched with ``numpy.searchsorted``. The training pairs' lower lines
are found by the same index (``KnownLowers``).
"""

from __future__ import annotations

import hashlib
import lzma
import os
import struct
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data.text import ASCII_TO_FULLWIDTH, is_any_punct


def normalise(line: str) -> str:
    """The line's characters alone: whitespace and every punctuation mark dropped (NFC, no
    NFKC), so 东风引紫气一元复始 finds the training line 东风引紫气，一元复始 and 春风得意马蹄疾。
    finds 春风得意马蹄疾. A line of marks only keeps them (folded to full width)."""
    if line.isalnum() and unicodedata.is_normalized("NFC", line):  # most lines: nothing to drop
        return line
    line = unicodedata.normalize("NFC", line)
    chars = "".join(ch for ch in line if not ch.isspace() and not is_any_punct(ch))
    return chars or "".join(ASCII_TO_FULLWIDTH.get(ch, ch) for ch in line if not ch.isspace())


def fingerprint(line: str) -> int:
    digest = hashlib.blake2b(normalise(line).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def fingerprints(lines: Iterable[str]) -> np.ndarray:
    """Sorted unique uint64 fingerprints of ``lines``."""
    arr = np.fromiter((fingerprint(x) for x in lines), dtype=np.uint64)
    return np.unique(arr)


_BUCKET_BITS = 16  # a fingerprint's top bits, which say where in the file its bucket is
_LOW_BYTES = 6  # the bytes of each fingerprint stored (the other 64 - 48 bits: its bucket's)
_OFFSETS = (1 << _BUCKET_BITS) + 1


class FingerprintIndex:
    """Sorted unique fingerprints and the position of a line's among them.

    On disk (``save``, ``fingerprints.npy``) a uint8 array: the start of each bucket of
    fingerprints sharing their top 16 bits (65,537 little-endian uint32), then each fingerprint's
    low 48 bits (6 bytes), in order: 6 bytes a line instead of 8 (5.5 MB for the shipped
    bundle's 877,000 lines instead of 7.0), memory-mapped, a lookup reading one bucket (about 13
    fingerprints). A plain sorted uint64 array (the file before session 34) is read as well."""

    def __init__(self, hashes: np.ndarray) -> None:
        hashes = np.asarray(hashes, dtype=np.uint64)
        # a sorted array is checked in one pass, not sorted again (np.unique: a copy and a sort
        # of a million hashes, a second of a busy command-line start)
        ordered = hashes.ndim == 1 and bool(np.all(hashes[1:] > hashes[:-1]))
        self._pack(hashes if ordered else np.unique(hashes))

    def _pack(self, hashes: np.ndarray) -> None:
        buckets = (hashes >> np.uint64(64 - _BUCKET_BITS)).astype(np.int64)
        self.starts = np.searchsorted(buckets, np.arange(_OFFSETS)).astype("<u4")
        low = hashes.astype("<u8").view(np.uint8).reshape(-1, 8)[:, :_LOW_BYTES]
        self.low = np.ascontiguousarray(low)

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> FingerprintIndex:
        return cls(fingerprints(lines))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FingerprintIndex:
        """The index in ``path``, memory-mapped (read-only; pages read as lookups touch them)."""
        arr = np.load(path, allow_pickle=False, mmap_mode="r")
        if arr.dtype == np.uint64:
            return cls(arr)
        head = _OFFSETS * 4
        if arr.dtype != np.uint8 or arr.ndim != 1 or arr.size < head or (arr.size - head) % _LOW_BYTES:
            raise ValueError(f"{path}: not a fingerprint index ({arr.dtype}, {arr.shape})")
        index = cls.__new__(cls)
        index.starts = arr[:head].view("<u4")
        index.low = arr[head:].reshape(-1, _LOW_BYTES)
        if int(index.starts[-1]) != len(index.low) or np.any(np.diff(index.starts.astype(np.int64)) < 0):
            raise ValueError(f"{path}: a fingerprint index whose buckets do not add up")
        return index

    def save(self, path: str | os.PathLike[str]) -> None:
        packed = np.concatenate([self.starts.astype("<u4").view(np.uint8), self.low.reshape(-1)])
        with open(Path(path), "wb") as f:
            np.save(f, packed, allow_pickle=False)

    @property
    def hashes(self) -> np.ndarray:
        """Every fingerprint, sorted (uint64)."""
        full = np.zeros((len(self.low), 8), np.uint8)
        full[:, :_LOW_BYTES] = self.low
        starts = np.asarray(self.starts, dtype=np.int64)
        counts = starts[1:] - starts[:-1]
        top = np.repeat(np.arange(_OFFSETS - 1, dtype=np.uint64), counts) << np.uint64(64 - _BUCKET_BITS)
        return full.view("<u8").reshape(-1).astype(np.uint64) | top

    def __len__(self) -> int:
        return len(self.low)

    def position(self, line: str) -> int:
        """The index of ``line``'s fingerprint in the sorted array, or -1 when it is not there."""
        h = fingerprint(line)
        bucket = h >> (64 - _BUCKET_BITS)
        lo, hi = int(self.starts[bucket]), int(self.starts[bucket + 1])
        if lo == hi:
            return -1
        seg = np.zeros((hi - lo, 8), np.uint8)
        seg[:, :_LOW_BYTES] = self.low[lo:hi]
        values = seg.view("<u8").reshape(-1)
        want = np.uint64(h & ((1 << (8 * _LOW_BYTES)) - 1))
        i = int(np.searchsorted(values, want))
        return lo + i if i < len(values) and values[i] == want else -1

    def contains(self, line: str) -> bool:
        return self.position(line) >= 0

    __contains__ = contains


class KnownLinesError(ValueError):
    """A bundle's known lower lines cannot be read (a damaged or missing file)."""


BLOCKS_MAGIC = b"DLKNOWN\x01"  # the block file's first bytes (version 1)
# records per block: 8,192 keep the shipped bundle under 40 MB (11.21 MB, 1.6% over one stream
# of them all; 4,096: 11.3 MB, 16,384: 11.1 MB) and decompress in about 10 ms (EXPERIMENTS §31)
RECORDS_PER_BLOCK = 8192
_HEADER = struct.Struct("<8sQQ")  # magic, records, records per block
_TRAIL = 254  # a two-byte code's second byte: 2-255, never a separator


def _first_lead(n_chars: int) -> int:
    """The first byte of the two-byte codes for ``n_chars`` characters besides the separators:
    as many one-byte codes as leave room for the others."""
    return min(256, (256 * _TRAIL - 2 - n_chars) // (_TRAIL - 1))


def _xz(data: bytes) -> bytes:
    # lc=4, pb=0: the codes have no 2- or 4-byte alignment, and the previous byte's high bits
    # tell a rare character's second byte from a common one (0.4% smaller)
    lzma2 = {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "lc": 4, "lp": 0, "pb": 0}
    return lzma.compress(data, format=lzma.FORMAT_XZ, filters=[{**lzma2, "dict_size": max(4096, len(data))}])


@dataclass(frozen=True)
class _Block:
    data: bytes
    ends: np.ndarray  # each record's end (its separator's position) in ``data``

    def record(self, j: int) -> bytes:
        start = int(self.ends[j - 1]) + 1 if j else 0
        return self.data[start : int(self.ends[j])]


class _Blocks:
    """``known_lowers.blocks``: the records in blocks of ``per_block``, each its own xz stream
    (so a lookup decompresses one block, about 10 ms, not all the records, 0.75 s), behind a
    header::

        magic, records, per_block   "<8sQQ"
        offsets                     blocks + 2 "<u8": the character table's start, each block's
                                    start, the file's end
        character table             xz: the characters by code, UTF-8
        blocks                      xz: the records' codes, each record ending in byte 0

    A record is its lower lines joined by tabs, each character a code: byte 0 ends the record,
    1 is the tab, 2 to ``lead - 1`` the most frequent characters, and the others two bytes, a
    first from ``lead`` to 255 and a second from 2 to 255. One byte for half of the characters
    makes a block's text shorter and the same from block to block: blocks of the text in UTF-8
    were 20-30% larger than one stream, these 1.6% (8,192 records a block)."""

    def __init__(self, path: Path, records: int, head: bytes) -> None:
        self.path = path
        _, n, self.per_block = _HEADER.unpack(head)
        if n != records:
            raise KnownLinesError(f"{path}: {n} records for {records} fingerprints")
        if self.per_block < 1:
            raise KnownLinesError(f"{path}: damaged header ({self.per_block} records per block)")
        self.records, self.blocks = n, -(-n // self.per_block)
        try:
            with open(path, "rb") as f:
                f.seek(_HEADER.size)
                table = f.read(8 * (self.blocks + 2))
                size = os.fstat(f.fileno()).st_size
        except OSError as e:
            raise KnownLinesError(f"{path}: {e}") from e
        offsets = np.frombuffer(table, dtype="<u8").astype(np.int64)
        if (
            offsets.size != self.blocks + 2
            or offsets[0] != _HEADER.size + len(table)
            or offsets[-1] != size
            or np.any(offsets[1:] <= offsets[:-1])
        ):
            raise KnownLinesError(f"{path}: damaged or truncated (its block offsets do not fit the file)")
        self.offsets = offsets
        symbols = self._stream(-1).decode("utf-8")
        self.lead = _first_lead(len(symbols))
        self.symbols = ["\n", "\t", *symbols]

    def _stream(self, k: int) -> bytes:
        """The decompressed block ``k`` (-1: the character table)."""
        start, end = int(self.offsets[k + 1]), int(self.offsets[k + 2])
        what = "character table" if k < 0 else f"block {k} of {self.blocks}"
        try:
            with open(self.path, "rb") as f:
                f.seek(start)
                return lzma.decompress(f.read(end - start), format=lzma.FORMAT_XZ)
        except lzma.LZMAError as e:
            raise KnownLinesError(f"{self.path}: its {what} is damaged ({e})") from e
        except OSError as e:
            raise KnownLinesError(f"{self.path}: {e}") from e

    def block(self, k: int) -> _Block:
        data = self._stream(k)
        ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0)
        want = min(self.per_block, self.records - k * self.per_block)
        if ends.size != want or (want and ends[-1] != len(data) - 1):
            raise KnownLinesError(f"{self.path}: block {k} holds {ends.size} records, not {want}")
        return _Block(data, ends)

    def decode(self, record: bytes) -> str:
        symbols, lead = self.symbols, self.lead
        out, i = [], 0
        try:
            while i < len(record):
                b = record[i]
                if b < lead:
                    out.append(symbols[b])
                    i += 1
                else:
                    out.append(symbols[lead + (b - lead) * _TRAIL + record[i + 1] - 2])
                    i += 2
        except IndexError as e:
            raise KnownLinesError(f"{self.path}: a record's codes are not in its character table") from e
        return "".join(out)

    @staticmethod
    def encode(records: Sequence[Sequence[str]], per_block: int) -> bytes:
        if any("\t" in lower or "\n" in lower for lowers in records for lower in lowers):
            raise ValueError("a lower line holds a tab or a newline, which end lines and records")
        text = ["\t".join(lowers) for lowers in records]
        counts = Counter(ch for record in text for ch in record)
        counts.pop("\t", None)
        chars = sorted(counts, key=lambda ch: (-counts[ch], ch))
        lead = _first_lead(len(chars))
        if lead < 2:
            raise ValueError(f"{len(chars)} distinct characters: more than two-byte codes can hold")
        codes = {"\t": b"\x01"}
        for s, ch in enumerate(chars, 2):
            codes[ch] = (
                bytes((s,)) if s < lead else bytes((lead + (s - lead) // _TRAIL, 2 + (s - lead) % _TRAIL))
            )
        coded = [b"".join(map(codes.__getitem__, record)) + b"\0" for record in text]
        streams = [_xz("".join(chars).encode("utf-8"))]
        streams += [_xz(b"".join(coded[k : k + per_block])) for k in range(0, len(coded), per_block)]
        start = _HEADER.size + 8 * (len(streams) + 1)
        offsets = np.cumsum([start, *map(len, streams)]).astype("<u8")
        return _HEADER.pack(BLOCKS_MAGIC, len(text), per_block) + offsets.tobytes() + b"".join(streams)


class KnownLowers:
    """The lower lines of the training pairs, found by their upper line's fingerprint.

    One record per fingerprint of the index, in its sorted order: the record's distinct lower
    lines joined by tabs. A record is found by the fingerprint's position in the index, so no
    upper line is stored (the index already answers "was it a training upper line"). The file
    is a block file (``_Blocks``, what ``encode`` writes). The blocks read are kept
    (at most the whole file's records, what a server holds from its start): the server looks
    lines up from several threads, so they are read under a lock.
    """

    def __init__(self, index: FingerprintIndex, path: str | os.PathLike[str]) -> None:
        """Nothing is read until the first lookup (``load`` reads the whole file now)."""
        self.index, self.path = index, Path(path)
        self._lock = threading.Lock()
        self._file: _Blocks | None = None
        self._blocks: dict[int, _Block] = {}

    @classmethod
    def load(cls, index: FingerprintIndex, path: str | os.PathLike[str], lazy: bool = False) -> KnownLowers:
        """The records in ``path``, every block read and checked now (a server: a damaged file
        stops its start, and no request decompresses). With ``lazy``, nothing is read until the
        first lookup of a line that has a record, which reads the header and that record's
        block (a damaged file is then a ``KnownLinesError`` of that lookup): the command line,
        whose line is seldom a training line."""
        known = cls(index, path)
        if not lazy:
            file = known._opened()
            for k in range(file.blocks):
                known._block(file, k)
        return known

    def _opened(self) -> _Blocks:
        file = self._file
        if file is None:
            with self._lock:
                file = self._file
                if file is None:
                    try:
                        with open(self.path, "rb") as f:
                            head = f.read(_HEADER.size)
                    except OSError as e:  # gone or unreadable since the bundle was loaded and checked
                        raise KnownLinesError(f"{self.path}: {e}") from e
                    n = len(self.index)
                    blocked = len(head) == _HEADER.size and head.startswith(BLOCKS_MAGIC)
                    if not blocked:
                        raise KnownLinesError(f"{self.path}: not a file of known lower lines (no header)")
                    file = self._file = _Blocks(self.path, n, head)
        return file

    def _block(self, file: _Blocks, k: int) -> _Block:
        block = self._blocks.get(k)
        if block is None:
            with self._lock:
                block = self._blocks.get(k)
                if block is None:
                    block = self._blocks[k] = file.block(k)
        return block

    @staticmethod
    def encode(
        index: FingerprintIndex,
        pairs: Iterable[tuple[str, str]],
        per_line: int = 10,
        per_block: int = RECORDS_PER_BLOCK,
    ) -> bytes:
        """The block file of ``index``'s records from the training ``pairs``."""
        by_hash: dict[int, list[str]] = {}
        for upper, lower in pairs:
            lowers = by_hash.setdefault(fingerprint(upper), [])
            if lower not in lowers and len(lowers) < per_line and "\t" not in lower and "\n" not in lower:
                lowers.append(lower)
        return KnownLowers.pack([by_hash.get(int(h), []) for h in index.hashes], per_block)

    @staticmethod
    def pack(records: Sequence[Sequence[str]], per_block: int = RECORDS_PER_BLOCK) -> bytes:
        """The block file of ``records``: each fingerprint's lower lines, in the index's order."""
        return _Blocks.encode(records, per_block)

    def record(self, i: int) -> list[str]:
        """The lower lines of the index's ``i``-th fingerprint."""
        file = self._opened()
        k, j = divmod(i, file.per_block)
        text = file.decode(self._block(file, k).record(j))
        return text.split("\t") if text else []

    def lowers(self, upper: str) -> list[str]:
        i = self.index.position(upper)
        return self.record(i) if i >= 0 else []
