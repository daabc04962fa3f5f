"""Word boundaries of a line (jieba's dictionary segmentation), for the sensitive-word filter.

A listed word of two or more characters does not count where it straddles two words of the
line with an end inside one of them: 山下作画 is 山下/作画, so 下作 is no hit; 岁月经过 is
岁月/经过 and 月经 is no hit. Inside one word it counts (年年 in 年年岁岁: a listed word
inside an idiom of the upper line is a word in the lower line all the same), and so does a
run of whole words. One-character words always count.
Lower lines take their boundaries from the upper line: a couplet's lines are parallel word
for word (对仗), and the upper line is whole before the search starts, so the filter inside
the search (model/decoding/blocked.py) and the check of a finished line agree.

jieba's dictionary mode (no HMM for unknown words) is used: deterministic, and a run of
characters it does not know falls apart into single characters, which makes every
occurrence there count (the cautious side).

jieba's own start reads its whole prefix dictionary (580,000 words and word prefixes) at once,
about 0.7 s, which was a quarter of the command line's start. The tokenizer here reads the same
dictionary by first character instead (``FirstCharDictionary``): a line's segmentation looks
up only words that start with one of its characters, so only their part is read, about a
millisecond a character. The parts are written once from jieba's dictionary file
(``jieba-<digest>.dict`` in ``data.paths.cache_dir()``, keyed by the jieba version and the
file's bytes); the segmentations are jieba's own (tested on every line of the test set).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import marshal
import os
import threading
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from data.files import atomic_file

_TOKENIZER: Any = None
_LOCK = threading.Lock()
_MAGIC = b"DLJB1\n"


class FirstCharDictionary:
    """jieba's prefix dictionary (word or word prefix -> frequency, 0 for a bare prefix) read
    part by part: the words that start with one character are read the first time a word
    starting with it is asked for. What jieba's tokenizer asks of its ``FREQ`` dict (``in``,
    ``[]``, ``get``), with the same answers."""

    def __init__(self, path: Path) -> None:
        # kept open, parts read on demand with pread: no file offset is shared, so processes
        # forked after the first read (the server's decode workers) read their parts apart
        self._file = open(path, "rb")  # noqa: SIM115
        fd = self._file.fileno()
        head = os.pread(fd, len(_MAGIC) + 8, 0)
        if head[: len(_MAGIC)] != _MAGIC:
            raise ValueError(f"{path}: not a dictionary written by data.segment")
        size = int.from_bytes(head[len(_MAGIC) :], "little")
        self.total, self._index = marshal.loads(os.pread(fd, size, len(head)))
        self._start = len(_MAGIC) + 8 + size
        self._parts: dict[str, dict[str, int]] = {}

    def _part(self, first: str) -> dict[str, int]:
        part = self._parts.get(first)
        if part is None:
            where = self._index.get(first)
            part = {}
            if where is not None:
                part = marshal.loads(os.pread(self._file.fileno(), where[1], self._start + where[0]))
            self._parts[first] = part
        return part

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and bool(word) and word in self._part(word[0])

    def __getitem__(self, word: str) -> int:
        return self._part(word[:1])[word]

    def get(self, word: str, default: Any = None) -> Any:
        return self._part(word[:1]).get(word, default) if word else default


def write_dictionary(freq: dict[str, int], total: int, path: Path) -> None:
    """Write jieba's prefix dictionary ``freq`` (and its ``total``) as ``FirstCharDictionary``
    reads it: a header (the total and where each first character's part lies), then each part,
    marshalled."""
    parts: dict[str, dict[str, int]] = {}
    for word, count in freq.items():
        if word:
            parts.setdefault(word[0], {})[word] = count
    blobs, index, offset = [], {}, 0
    for first in sorted(parts):
        blob = marshal.dumps(parts[first])
        index[first] = (offset, len(blob))
        blobs.append(blob)
        offset += len(blob)
    header = marshal.dumps((total, index))
    with atomic_file(path) as f:
        f.write(_MAGIC + len(header).to_bytes(8, "little") + header)
        for blob in blobs:
            f.write(blob)


def _dictionary_path(dict_file: Path) -> Path:
    from data.paths import cache_dir

    h = hashlib.blake2b(digest_size=8)
    h.update(importlib.metadata.version("jieba").encode())
    h.update(dict_file.read_bytes())
    return cache_dir() / f"jieba-{h.hexdigest()}.dict"


def _tokenizer() -> Any:
    global _TOKENIZER
    with _LOCK:
        if _TOKENIZER is None:
            _TOKENIZER = _new_tokenizer()
    return _TOKENIZER


def _new_tokenizer() -> Any:
    """jieba's tokenizer on its own dictionary, read by first character (written first when
    it is not there, or when it cannot be read; where it cannot be written, jieba's own
    start)."""
    import jieba  # imported on first use: the data stage's other parts do not need it

    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    dict_file = Path(jieba.__file__).parent / jieba.DEFAULT_DICT_NAME  # (jieba's own dictionary)
    path = _dictionary_path(dict_file)
    try:
        freq: Any = FirstCharDictionary(path)
    except (OSError, ValueError, EOFError, TypeError):
        with open(dict_file, "rb") as f:
            words, total = tokenizer.gen_pfdict(f)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_dictionary(words, total, path)
            freq = FirstCharDictionary(path)
        except OSError as exc:
            logging.getLogger(__name__).warning("segmentation dictionary not cached at %s: %s", path, exc)
            tokenizer.FREQ, tokenizer.total, tokenizer.initialized = words, total, True
            return tokenizer
    tokenizer.FREQ, tokenizer.total = freq, freq.total
    tokenizer.initialized = True  # (jieba's own start would read its whole dictionary)
    return tokenizer


def jieba_words(lines: Iterable[str]) -> list[list[str]]:
    """jieba's own segmentation (its dictionary read whole, dictionary mode) of ``lines``: what
    ``boundaries`` must agree with (the tests compare them)."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    return [list(tokenizer.cut(line, HMM=False)) for line in lines]


@lru_cache(maxsize=8192)
def boundaries(line: str) -> tuple[bool, ...]:
    """(len(line) + 1,) True at each position where a word of ``line`` starts or ends."""
    out = [False] * (len(line) + 1)
    out[0] = out[-1] = True
    pos = 0
    for word in _tokenizer().cut(line, HMM=False):
        pos += len(word)
        out[pos] = True
    return tuple(out)


def counts_as_word(bounds: tuple[bool, ...] | None, start: int, length: int) -> bool:
    """Whether an occurrence of a listed word at ``start`` counts under ``bounds`` (None:
    every occurrence counts, plain substring matching). It does not count only where it
    straddles a boundary with one of its ends inside a word: 下作 in 山下/作画. Inside one
    word it counts (年年 in 年年岁岁), and so does a run of whole words."""
    if bounds is None or length == 1:
        return True
    end = start + length
    if end >= len(bounds):
        return True
    straddles = any(bounds[start + 1 : end])
    return not straddles or (bounds[start] and bounds[end])
