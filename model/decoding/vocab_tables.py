"""Per-vocabulary tables the rules read, built once per decoder: every piece's tone in each
mode, the special and punctuation pieces, the tone-end masks; and the pairing table in the
vocabulary's token ids (``PairingRows``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from data.pairing import PairingTable
from data.text import is_any_punct
from data.tones import Tone, char_tone, rusheng_table
from data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab

NEG_INF = float("-inf")


def _tone_array(pieces: Sequence[str], tone_of: Callable[[str], Tone]) -> np.ndarray:
    return np.array([int(tone_of(p)) if len(p) == 1 else 0 for p in pieces], dtype=np.int8)


@dataclass
class VocabTables:
    """What the rules need to know about each vocabulary entry, as (V,) arrays."""

    pieces: list[str]
    never: np.ndarray  # (V,) bool: special or whitespace pieces, never generated (EOS apart)
    punct: np.ndarray  # (V,) bool: punctuation marks
    _tones: dict[tuple[str, str, frozenset[str] | None], np.ndarray] = field(default_factory=dict)
    _masks: dict[tuple[object, ...], np.ndarray] = field(default_factory=dict)

    @classmethod
    def build(cls, vocab: Vocab, pieces: list[str] | None = None) -> VocabTables:
        """``pieces`` may extend the vocabulary's to the model's output size ("" = never)."""
        pieces = pieces if pieces is not None else vocab.pieces
        never = np.array([len(p) != 1 or p.isspace() or p == "▁" for p in pieces], dtype=bool)
        never[[PAD_ID, UNK_ID, BOS_ID]] = True
        never[EOS_ID] = False
        punct = np.array([len(p) == 1 and is_any_punct(p) for p in pieces], dtype=bool)
        return cls(pieces, never, punct)

    @property
    def size(self) -> int:
        return len(self.pieces)

    def tone(self, mode: str) -> np.ndarray:
        """(V,) int8 context-free tone class (the default reading; lenient: every reading)."""
        return self._cached("tone", mode)

    def fixed_tone(self, mode: str) -> np.ndarray:
        """(V,) int8 tone no phrase context can flip: the union of every reading's tone
        (a 入声 character is oblique in classical mode whatever its reading)."""
        return self._cached("fixed", mode)

    def _cached(self, kind: str, mode: str) -> np.ndarray:
        key = (kind, *_mode_key(mode))
        if key not in self._tones:
            fn: Callable[[str], Tone]
            if kind == "tone":
                fn = functools.partial(char_tone, mode=mode)
            elif mode == "classical":
                fn = _classical_fixed
            else:
                fn = functools.partial(char_tone, mode="lenient")
            self._tones[key] = _tone_array(self.pieces, fn)
        return self._tones[key]

    def ids(self, kind: str) -> np.ndarray:
        """The vocabulary ids where ``never`` or ``punct`` holds: a rule that blanks a few
        columns indexes them instead of masking every entry of its table."""
        key = ("ids", kind)
        if key not in self._masks:
            self._masks[key] = np.flatnonzero(getattr(self, kind))
        return self._masks[key]

    def has_tone(self, mode: str, tone: Tone) -> np.ndarray:
        """(V,) float: 1 where the context-free tone class is exactly ``tone``."""
        key = ("has", *_mode_key(mode), int(tone))
        if key not in self._masks:
            self._masks[key] = (self.tone(mode) == int(tone)).astype(np.float32)
        return self._masks[key]

    def level(self, mode: str) -> np.ndarray:
        """(V,) bool: level in the context-free reading."""
        key = ("level", *_mode_key(mode))
        if key not in self._masks:
            self._masks[key] = self.tone(mode) == int(Tone.LEVEL)
        return self._masks[key]

    def end_ok(self, mode: str, want: Tone) -> np.ndarray:
        key = ("end", *_mode_key(mode), int(want))
        if key not in self._masks:
            self._masks[key] = self._end_ok(mode, want)
        return self._masks[key]

    def _end_ok(self, mode: str, want: Tone) -> np.ndarray:
        """(V,) bool: characters the string check will accept as the lower line's end.

        Lenient mode accepts any reading; modern and classical modes read the line in
        phrase context, so only a character whose every reading has the wanted tone is
        safe (context may still give a neutral tone, which the check reports as unknown,
        never as wrong)."""
        if want == Tone.EITHER:
            return ~self.never
        if mode == "lenient":
            return (self.tone("lenient") & int(want)) != 0
        return self.fixed_tone(mode) == int(want)


def _mode_key(mode: str) -> tuple[str, frozenset[str] | None]:
    """A tone mode's tables are kept under the mode and, for the classical one, the 入声 table
    they were read with (``RUSHENG_TABLE`` may name another since, or its file have changed): the
    check reads the table in force, and so must the search."""
    return mode, rusheng_table() if mode == "classical" else None


def _classical_fixed(ch: str) -> Tone:
    if char_tone(ch, "classical") == Tone.OBLIQUE and char_tone(ch, "modern") != Tone.OBLIQUE:
        return Tone.OBLIQUE  # in the 入声 table: oblique whatever the context
    return char_tone(ch, "lenient")  # (a table character read oblique anyway lands here: safe)


class PairingRows:
    """A pairing table in one vocabulary's token ids (CSR rows by the upper token)."""

    def __init__(self, table: PairingTable, pieces: list[str]) -> None:
        self.indptr, self.cols, self.vals = table.for_vocab(pieces)

    def add_to(self, table: np.ndarray, src: np.ndarray, weight: float) -> None:
        """table (N, L+1, V) += ``weight`` times each position's row for src (N, L), in place.
        A position whose character is banned there stays banned (-inf plus a score)."""
        n, length = src.shape
        starts = self.indptr[src].reshape(-1)  # (N*L,)
        counts = self.indptr[src + 1].reshape(-1) - starts
        if not int(counts.sum()):
            return
        rows = np.repeat(np.arange(n * length), counts)
        first = np.repeat(starts - (np.cumsum(counts) - counts), counts)
        entries = first + np.arange(len(rows))  # each row's own slice of cols / vals
        # (each (row, column) once: a row of the pairing table names a column once)
        table[rows // length, rows % length, self.cols[entries]] += np.float32(weight) * self.vals[entries]
