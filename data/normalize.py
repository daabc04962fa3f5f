"""Normalisation of couplet lines: whitespace, compatibility forms, punctuation, script, variants.

Each step is a ``str.translate`` over a lazily filled per-character table, so a character
is examined once for the whole corpus (~9K distinct characters, ~20M occurrences), and
``normalize_many`` finds in numpy the few lines holding a character that any step
changes: the others are not touched at all. Traditional-to-simplified conversion needs phrase context
(乾坤 stays, 乾燥 becomes 干燥), so only lines holding a character that OpenCC changes go
through OpenCC itself; every other line is left alone, which is exact and fast. Variant
characters that OpenCC keeps (疎, 隠: ``data/variants.txt``) become their standard form.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from data.chars import CharBatch
from data.text import ASCII_TO_FULLWIDTH, PUNCTUATION

STEPS = ("whitespace", "compat", "punct", "t2s", "variants")
VARIANTS = Path(__file__).with_name("variants.txt")


class _LazyTable(dict[int, str | None]):
    """A translate table that computes and memoises the mapping of each new character."""

    def __init__(self, fold: Callable[[str], str | None]) -> None:
        super().__init__()
        self._fold = fold

    def __missing__(self, cp: int) -> str | None:
        value = self._fold(chr(cp))
        self[cp] = value
        return value


def _fold_whitespace(ch: str) -> str | None:
    return None if ch.isspace() or ch in "\u200b\u200c\u200d\ufeff" else ch


def _fold_compat(ch: str) -> str:
    """NFKC, except that full-width Chinese punctuation (which NFKC turns ASCII) stays."""
    return ch if ch in PUNCTUATION else unicodedata.normalize("NFKC", ch)


# The corpus writes the dash (破折号 ——) as "--" (~390 wb14123 pairs); one em dash per
# hyphen keeps line lengths. Not in the shared ASCII_TO_FULLWIDTH: a lone "-" elsewhere
# (user input, say) need not be a dash.
DASH = {"-": "—"}


def _fold_punct(ch: str) -> str:
    return ASCII_TO_FULLWIDTH.get(ch) or DASH.get(ch, ch)


@cache
def variant_table(path: Path = VARIANTS) -> dict[int, str]:
    """``str.translate`` table of ``path``: variant character -> standard form."""
    table: dict[int, str] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        variant, _, standard = line.partition("\t")
        if len(variant) != 1 or len(standard) != 1 or variant == standard:
            raise ValueError(f"{path}:{n}: expected a variant character, a tab and its standard form")
        table[ord(variant)] = standard
    return table


@dataclass
class Normalizer:
    """Normalise lines and count, per step, how many lines each step changed."""

    t2s: bool = True
    counts: Counter[str] = field(default_factory=Counter)
    variants: bool = True  # with t2s only: the variant forms belong to the script conversion

    def __post_init__(self) -> None:
        self._ws = _LazyTable(_fold_whitespace)
        self._compat = _LazyTable(_fold_compat)
        self._punct = _LazyTable(_fold_punct)
        # Keeps only the characters OpenCC would change, so a non-empty result means
        # "this line needs conversion" without a Python-level loop over its characters.
        self._trad = _LazyTable(self._keep_if_traditional)
        self._cc: object | None = None
        self._needs: dict[str, bool] = {}
        self._variants = variant_table() if self.t2s and self.variants else {}

    def _converter(self) -> object:
        # Built on first use: OpenCC loads its dictionaries, which is not free.
        if self._cc is None:
            import opencc

            self._cc = opencc.OpenCC("t2s")
        return self._cc

    def _keep_if_traditional(self, ch: str) -> str | None:
        return ch if self._converter().convert(ch) != ch else None  # type: ignore[attr-defined]

    def _step(self, name: str, line: str, table: Mapping[int, str | None]) -> str:
        out = line.translate(table)
        if out != line:
            self.counts[name] += 1
        return out

    def to_simplified(self, line: str) -> str:
        if not self.t2s or not line.translate(self._trad):
            return line
        out: str = self._converter().convert(line)  # type: ignore[attr-defined]
        if out != line:
            self.counts["t2s"] += 1
        return out

    def __call__(self, line: str) -> str:
        line = self._step("whitespace", line, self._ws)
        line = self._step("compat", line, self._compat)
        line = self._step("punct", line, self._punct)
        return self._step("variants", self.to_simplified(line), self._variants)

    def _changes(self, ch: str) -> bool:
        if ch in self._needs:
            return self._needs[ch]
        out = ch.translate(self._ws).translate(self._compat).translate(self._punct)
        changed = out != ch or (self.t2s and bool(ch.translate(self._trad))) or ord(ch) in self._variants
        self._needs[ch] = changed
        return changed

    def normalize_many(self, lines: list[str]) -> list[str]:
        """Normalise a batch of lines; only the lines holding a character to change are visited.

        Most of the corpus is already clean, so the batch is scanned in numpy and Python
        touches only the rest.
        """
        batch = CharBatch(lines)
        bad = [ch for ch in batch.distinct() if self._changes(ch)]
        if not bad:
            return lines
        out = list(lines)
        for i in batch.lines_with(bad).tolist():
            out[i] = self(lines[i])
        return out
