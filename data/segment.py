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
occurrence there count (the cautious side). Loading the dictionary takes about a second,
once per process, on first use.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

_TOKENIZER: Any = None


def _tokenizer() -> Any:
    global _TOKENIZER
    if _TOKENIZER is None:
        import jieba  # imported on first use: the data stage's other parts do not need it

        jieba.setLogLevel(logging.WARNING)
        tokenizer = jieba.Tokenizer()
        tokenizer.initialize()
        _TOKENIZER = tokenizer
    return _TOKENIZER


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
