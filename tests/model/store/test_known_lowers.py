"""The known lower lines' file: blocks decompressed one at a time, and the older one-stream file."""

from __future__ import annotations

import random
import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from model.store.fingerprint import FingerprintIndex, KnownLinesError, KnownLowers

# more distinct characters than there are one-byte codes (253), one outside the BMP
CHARS = [chr(0x4E00 + i) for i in range(400)] + ["𠀋", "，"]


def training_pairs(n: int = 40) -> list[tuple[str, str]]:
    """``n`` upper lines, the first with three lower lines (one of them given twice), the
    second with one more that holds a tab (left out), the third with every character."""
    rng = random.Random(3)
    pairs = [("".join(rng.choices(CHARS, k=5)) + str(i), "".join(rng.choices(CHARS, k=5))) for i in range(n)]
    first, second, third = (pairs[i][0] for i in range(3))
    more = [(first, "另一下联"), (first, "另一下联"), (first, "第三下联"), (second, "有\t制表符")]
    return [*pairs, *more, (third, "".join(CHARS))]


def expected(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Each upper line's lower lines as a lookup answers: distinct, in order, none with a tab."""
    want: dict[str, list[str]] = {}
    for upper, lower in pairs:
        lowers = want.setdefault(upper, [])
        if lower not in lowers and "\t" not in lower:
            lowers.append(lower)
    return want


def block_offsets(data: bytes) -> np.ndarray:
    """The block file's offsets: the character table's start, each block's start, the end."""
    _, records, per_block = struct.unpack_from("<8sQQ", data)
    blocks = -(-records // per_block)
    return np.frombuffer(data, dtype="<u8", count=blocks + 2, offset=24).astype(np.int64)


@pytest.fixture
def known(tmp_path: Path) -> tuple[FingerprintIndex, dict[str, list[str]], Path]:
    pairs = training_pairs()
    index = FingerprintIndex.from_lines(u for u, _ in pairs)
    path = tmp_path / "known_lowers.blocks"
    path.write_bytes(KnownLowers.encode(index, pairs, per_block=7))
    return index, expected(pairs), path


def test_round_trip_in_blocks(known) -> None:
    index, want, path = known
    assert len(block_offsets(path.read_bytes())) == -(-len(index) // 7) + 2  # 6 blocks
    for lazy in (False, True):
        lowers = KnownLowers.load(index, path, lazy=lazy)
        assert all(lowers.lowers(upper) == answer for upper, answer in want.items())
        first = next(iter(want))
        assert lowers.lowers(f" {first} ") == want[first]  # the fingerprint's light normalisation
        assert lowers.lowers("无此上联") == []
    assert [len(want[upper]) for upper, _ in training_pairs()[:3]] == [3, 1, 2]


def test_a_lookup_reads_only_the_block_that_holds_its_line(known) -> None:
    index, want, path = known
    data = bytearray(path.read_bytes())
    offsets = block_offsets(bytes(data))
    start, end = int(offsets[1]), int(offsets[2])  # block 0
    data[(start + end) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    later = [u for u in want if index.position(u) >= 7]  # in blocks 1-5, which are whole
    first = [u for u in want if index.position(u) < 7]
    lowers = KnownLowers.load(index, path, lazy=True)
    assert all(lowers.lowers(u) == want[u] for u in later)
    with pytest.raises(KnownLinesError, match=r"known_lowers\.blocks: its block 0 of 6 is damaged"):
        lowers.lowers(first[0])
    with pytest.raises(KnownLinesError, match="block 0 of 6 is damaged"):  # all blocks read now
        KnownLowers.load(index, path)


def test_damaged_files_are_named(known) -> None:
    index, want, path = known
    good = path.read_bytes()
    upper = next(iter(want))
    damaged = {
        b"not lzma": "not a file of known lower lines",
        good[:-10]: "damaged or truncated",  # the last block cut short
        good[:200]: "damaged or truncated",
        good[:32] + bytes(8) + good[40:]: "damaged or truncated",  # the first block's offset
    }
    for data, says in damaged.items():
        path.write_bytes(data)
        with pytest.raises(KnownLinesError, match=rf"^{path}: {says}"):
            KnownLowers.load(index, path)
        with pytest.raises(KnownLinesError, match=rf"^{path}: {says}"):
            KnownLowers.load(index, path, lazy=True).lowers(upper)
    path.write_bytes(KnownLowers.encode(FingerprintIndex.from_lines(["x"]), []))
    with pytest.raises(KnownLinesError, match=rf"^{path}: 1 records for {len(index)} fingerprints"):
        KnownLowers.load(index, path)
    path.unlink()
    with pytest.raises(KnownLinesError, match=rf"^{path}: .*No such file"):
        KnownLowers.load(index, path, lazy=True).lowers(upper)


def test_a_lazy_load_reads_nothing_until_a_line_has_a_record(known) -> None:
    index, want, path = known
    data = path.read_bytes()
    path.unlink()
    lowers = KnownLowers.load(index, path, lazy=True)  # the file is not there: nothing is read
    assert lowers.lowers("无此上联") == []  # no record: still nothing read
    path.write_bytes(data)
    assert all(lowers.lowers(upper) == answer for upper, answer in want.items())


def test_lookups_from_several_threads(known) -> None:
    index, want, path = known
    lowers = KnownLowers.load(index, path, lazy=True)
    uppers = list(want) * 20
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lowers.lowers, uppers))
    assert got == [want[u] for u in uppers]


def test_a_lower_line_with_a_newline_is_refused(known) -> None:
    with pytest.raises(ValueError, match="a tab or a newline"):
        KnownLowers.pack([["上\n下"]])


def test_a_line_is_known_by_its_characters_whatever_its_punctuation(tmp_path: Path) -> None:
    pairs = [
        ("东风引紫气，一元复始", "大地发春华，万物更新"),
        ("春风得意马蹄疾", "秋月生辉玉兔明"),
        ("海纳百川，有容乃大；", "壁立千仞，无欲则刚；"),
    ]
    index = FingerprintIndex.from_lines(u for u, _ in pairs)
    path = tmp_path / "known_lowers.blocks"
    path.write_bytes(KnownLowers.encode(index, pairs))
    known = KnownLowers.load(index, path)
    # written as on a door, with other marks, with spaces: the lower line keeps its own marks
    assert known.lowers("东风引紫气一元复始") == ["大地发春华，万物更新"]
    assert known.lowers("东风引紫气、一元复始！") == ["大地发春华，万物更新"]
    assert known.lowers("春风得意，马蹄疾。") == ["秋月生辉玉兔明"]
    assert known.lowers("海纳百川 有容乃大") == ["壁立千仞，无欲则刚；"]
    assert "春风得意马蹄疾!" in index and "春风得意马蹄" not in index
    assert known.lowers("东风引紫气一元复") == []  # characters, not a prefix
    assert "，。" in FingerprintIndex.from_lines(["，。"]) and "，。" not in index  # marks only: kept
