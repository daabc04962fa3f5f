"""The formal register's yardstick: validation and test pairs of ``yinglian_classic`` that
stand in no other corpus file.

A pair is "in another file" when its two lines, Han characters only (punctuation ignored),
stand as a pair there in either orientation: the same couplet is printed with its commas in
one book and without them in another (docs/DATA.md, "The formal split"). The held-out pairs
are split in two by a hash of that key, so the split does not move when a file is added or
reordered, and every training pair with a held-out line on either side is dropped from
training, whatever source it comes from.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from data.sources import Pair

FORMAL_SOURCE = "yinglian_classic"
FORMAL_FILE = "yinglian_classic.tsv"


# Everything ``data.text.is_han`` says no to (a test holds the two together); and the same but
# for the tab and the newline, to strip a whole file at once (``han_rows``).
_HAN = "\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U000323af"
_NOT_HAN = re.compile(f"[^{_HAN}]")
_NOT_HAN_NOR_ROW = re.compile(f"[^\t\n{_HAN}]")


def han_only(line: str) -> str:
    """The line's Han characters, in order (punctuation, spaces and anything else dropped)."""
    return _NOT_HAN.sub("", line)


def pair_key(upper: str, lower: str) -> tuple[str, str]:
    """The same for a pair and its mirror image, whatever the punctuation."""
    a, b = han_only(upper), han_only(lower)
    return (a, b) if a <= b else (b, a)


def read_pairs(path: Path) -> list[Pair]:
    """``upper<TAB>lower`` lines of a plain or gzip file; lines without one tab are skipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as fh:
        fields = (line.rstrip("\r\n").split("\t") for line in fh)
        return [(f[0], f[1]) for f in fields if len(f) == 2]


def han_rows(path: Path) -> set[str]:
    """The rows of a plain or gzip ``upper<TAB>lower`` file with Han characters only (tabs and
    newlines kept): the whole text stripped in one pass and split in C, no Python a line, since
    the other files hold millions of pairs and only the formal pairs are looked up in them."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as fh:
        return set(_NOT_HAN_NOR_ROW.sub("", fh.read()).split("\n"))


def _in_test_half(key: tuple[str, str]) -> bool:
    return hashlib.sha256("\t".join(key).encode()).digest()[0] % 2 == 0


@dataclass
class FormalSplit:
    """The held-out formal pairs, and their lines (Han characters only) that training drops."""

    valid: list[Pair] = field(default_factory=list)
    test: list[Pair] = field(default_factory=list)
    held_lines: set[str] = field(default_factory=set)

    def keeps(self, pair: Pair) -> bool:
        """Whether a training pair may stay: neither of its lines is a held-out line."""
        return not self.held_lines or (
            han_only(pair[0]) not in self.held_lines and han_only(pair[1]) not in self.held_lines
        )

    def drop_held(self, pairs: list[Pair]) -> list[Pair]:
        return pairs if not self.held_lines else [p for p in pairs if self.keeps(p)]


def carve_formal(formal: list[Pair], others: set[str], min_chars: int = 4) -> FormalSplit:
    """Split the formal pairs that stand in none of ``others`` (the other files' rows, Han
    characters only, as ``han_rows`` reads them), either way round, into valid and test halves.

    ``formal`` in file order (normalised as training pairs are); duplicates by key are
    kept once, the first. Pairs with fewer than ``min_chars`` Han characters a line are left
    out (too short to judge)."""
    seen: set[tuple[str, str]] = set()
    split = FormalSplit()
    for upper, lower in formal:
        key = pair_key(upper, lower)
        elsewhere = f"{key[0]}\t{key[1]}" in others or f"{key[1]}\t{key[0]}" in others
        if elsewhere or key in seen or min(len(key[0]), len(key[1])) < min_chars:
            continue
        seen.add(key)
        (split.test if _in_test_half(key) else split.valid).append((upper, lower))
        split.held_lines.update(key)
    return split
