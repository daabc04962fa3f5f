"""Sensitive-word filtering with an allow-list, from the word list or from hashed words.

A hit is a listed word found in the text, unless that occurrence lies inside an
occurrence of an allow-listed word (岁月经过 holds 月经 innocently), or, when word
boundaries are given (data/segment.py), unless a word of two or more characters starts or
ends inside a word of the line (山下/作画 holds 下作 innocently). The data stage
scans ~2M lines, so the word-list form uses an Aho-Corasick automaton (pyahocorasick, C);
the hashed form, which the model bundle carries so it ships no offensive text, checks
every substring up to the longest word's length against a set of 64-bit hashes: slower,
but the service only checks a few candidates per request.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path

import ahocorasick
import numpy as np

from data.chars import MAX_CODE, CharBatch
from data.normalize import Normalizer
from data.segment import counts_as_word

ALLOW_LIST = Path(__file__).with_name("sensitive_allow.txt")
_BITMAP_SIZE = 1 << 24


_MULT = 2654435761


def _bigram(a: str, b: str) -> int:
    """A 24-bit key of two characters; equal to :func:`_bigrams` on their code points."""
    return (ord(a) * _MULT + ord(b)) & (_BITMAP_SIZE - 1)


def _bitmap(bigrams: Iterable[str]) -> np.ndarray:
    bitmap = np.zeros(_BITMAP_SIZE, dtype=bool)
    bitmap[[_bigram(b[0], b[1]) for b in bigrams]] = True
    return bitmap


def _bigrams(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # uint32 arithmetic wraps modulo 2**32, which keeps the low 24 bits exact.
    return (a * np.uint32(_MULT) + b) & np.uint32(_BITMAP_SIZE - 1)


@functools.lru_cache(maxsize=1 << 16)
def word_hash(word: str) -> int:
    """A stable 64-bit hash of a word (blake2b, 8-byte digest, little-endian). Remembered: a
    line's checks hash every piece of it, and an answer's candidates share most pieces."""
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


def normalised(words: Iterable[str]) -> list[str]:
    """Words as the data stage normalises lines (陳 → 陈, full-width forms folded...).

    Filters compare normalised text, so a list in any script must be normalised too:
    otherwise 陰道 on the list would never meet 阴道 in a generated line.
    """
    return Normalizer().normalize_many([w for w in words if w])


def hash_words(words: Iterable[str], normalise: bool = True) -> np.ndarray:
    """Sorted, unique uint64 hashes of the (normalised) ``words``: the list without its text."""
    words = normalised(words) if normalise else list(words)
    return np.unique(np.array([word_hash(w) for w in words if w], dtype=np.uint64))


def read_words(path: str | Path) -> list[str]:
    """One word per line; blank lines and ``#`` comments are skipped."""
    words = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            words.append(line)
    return words


class SensitiveFilter:
    """Find listed words in a text, ignoring those inside an allow-listed word."""

    def __init__(self, words: Iterable[str], allow: Iterable[str] = (), normalise: bool = True) -> None:
        if normalise:
            words, allow = normalised(words), normalised(allow)
        allow = sorted({a for a in allow if a})
        # A word that is itself allow-listed can never hit: leave it out of the search.
        self._words = sorted({w for w in words if w} - set(allow))
        self._hashes: set[int] | None = None
        self._max_len = max((len(w) for w in self._words), default=0)
        self._automaton = ahocorasick.Automaton()
        for w in self._words:
            self._automaton.add_word(w, w)
        if self._words:
            self._automaton.make_automaton()
        self._init_allow(allow)

    @classmethod
    def from_hashes(cls, hashes: np.ndarray, allow: Iterable[str] = (), max_len: int = 8) -> SensitiveFilter:
        """A filter from :func:`hash_words` output; words longer than ``max_len`` are not found."""
        self = cls.__new__(cls)
        self._words = []
        allow = sorted(set(normalised(allow)))
        self._hashes = {int(h) for h in np.asarray(hashes, dtype=np.uint64)} - {word_hash(a) for a in allow}
        self._max_len = max_len
        self._init_allow(allow)
        return self

    def _init_allow(self, allow: Iterable[str]) -> None:
        self._allow = sorted({a for a in allow if a})
        # Which allow-words can excuse a given hit word: computed once per distinct hit.
        self._allow_for: dict[str, list[str]] = {}

    def to_hashes(self) -> np.ndarray:
        """This filter's words as :func:`hash_words` output (for ``from_hashes``)."""
        if self._hashes is not None:
            return np.array(sorted(self._hashes), dtype=np.uint64)
        return hash_words(self._words, normalise=False)

    def __len__(self) -> int:
        return len(self._hashes) if self._hashes is not None else len(self._words)

    def _raw_hits(self, text: str) -> list[tuple[int, str]]:
        """(start, word) of every listed word occurring in ``text``."""
        if self._hashes is not None:
            return [
                (i, text[i : i + n])
                for i in range(len(text))
                for n in range(1, min(self._max_len, len(text) - i) + 1)
                if word_hash(text[i : i + n]) in self._hashes
            ]
        if not self._words:
            return []
        return [(end - len(w) + 1, w) for end, w in self._automaton.iter(text)]

    def flag_lines(self, batch: CharBatch) -> np.ndarray:
        """Line numbers of ``batch`` that may hold a listed word: a superset, found in numpy.

        One-character words are looked up directly; longer ones through bitmaps of
        their character bigrams (the first bigram, and for three-character words the
        second one too). Only the flagged lines need :meth:`hits`.
        """
        if self._hashes is not None:  # the words are unknown: every line is a candidate
            return np.arange(batch.line_count())
        codes = batch.codes
        table = np.zeros(MAX_CODE, dtype=bool)
        table[[ord(w) for w in self._words if len(w) == 1]] = True
        hit = table[codes]
        if len(codes) > 1:
            keys = _bigrams(codes[:-1], codes[1:])  # (N-1,) key of the bigram at each position
            # Two characters, or the first two of a word of four or more (a superset).
            hit[:-1] |= _bitmap(w[:2] for w in self._words if len(w) == 2 or len(w) > 3)[keys]
            three = [w for w in self._words if len(w) == 3]
            if three and len(codes) > 2:
                first, second = _bitmap(w[:2] for w in three), _bitmap(w[1:] for w in three)
                hit[:-2] |= first[keys[:-1]] & second[keys[1:]]
        return batch.lines_at(np.flatnonzero(hit))

    def _excused(self, text: str, start: int, word: str) -> bool:
        allowed = self._allow_for.get(word)
        if allowed is None:
            allowed = self._allow_for[word] = [a for a in self._allow if word in a]
        for a in allowed:
            # Every placement of the allow-word that would cover this occurrence.
            offset = a.find(word)
            while offset >= 0:
                begin = start - offset
                if begin >= 0 and text.startswith(a, begin):
                    return True
                offset = a.find(word, offset + 1)
        return False

    def hits(self, text: str, bounds: tuple[bool, ...] | None = None) -> list[str]:
        """The listed words in ``text`` that no allow-listed word excuses, in order. With
        ``bounds`` (data.segment.boundaries, of ``text`` or of the line it answers), a word of
        two or more characters counts only where it starts and ends on a word boundary."""
        return [
            w
            for start, w in sorted(self._raw_hits(text))
            if counts_as_word(bounds, start, len(w)) and not self._excused(text, start, w)
        ]

    def is_clean(self, text: str, bounds: tuple[bool, ...] | None = None) -> bool:
        return not self.hits(text, bounds)

    def words(self) -> list[str]:
        """The listed words (normalised, less those the allow-list switches off); empty for a
        filter made from hashes."""
        return list(self._words)
