"""Character classes shared by every stage: what is Han, what is punctuation.

Everything downstream (filters, decoding rules, the API's validation) asks these
functions, so "punctuation" means one thing across the project.
"""

from __future__ import annotations

import unicodedata

# which line of a couplet is given and which is written: 上联 -> 下联, or 下联求上联
DIRECTIONS = ("upper_to_lower", "lower_to_upper")
# The registers a model with a register embedding writes in, by index (ModelConfig.n_registers):
# general (wb14123's everyday couplets), classical (regulated verse and the primers), formal
# (楹联: the couplet books and the collected pairs). data.config says which source is which.
REGISTERS = ("general", "classical", "formal")

# Full-width Chinese marks a couplet line may contain after normalisation.
PUNCTUATION: frozenset[str] = frozenset("，。、；：？！…—·“”‘’《》（）「」『』〈〉【】～")

# ASCII (and a few other) marks folded to their full-width Chinese counterparts.
ASCII_TO_FULLWIDTH: dict[str, str] = {
    ",": "，",
    ".": "。",
    ";": "；",
    ":": "：",
    "?": "？",
    "!": "！",
    "(": "（",
    ")": "）",
    "<": "《",
    ">": "》",
    "~": "～",
    "'": "’",
    '"': "”",
    "．": "。",
    "｡": "。",
    "､": "、",
    "﹐": "，",
    "﹑": "、",
    "﹔": "；",
    "﹕": "：",
    "﹖": "？",
    "﹗": "！",
}


# The longest upper line the project answers: up to 32 characters (the training lines' longest)
# in one search, longer ones (长联) segment by segment (model/decoding/long_lines.py).
LONGEST_LINE = 100


def is_han(ch: str) -> bool:
    """True for a single CJK ideograph (any of the unified blocks or the compatibility ones)."""
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF  # CJK Unified Ideographs
        or 0x3400 <= cp <= 0x4DBF  # Extension A
        or 0x20000 <= cp <= 0x323AF  # Extensions B-H
        or 0xF900 <= cp <= 0xFAFF  # Compatibility Ideographs
        or cp == 0x3007  # 〇
    )


def is_punct(ch: str) -> bool:
    """True for a full-width Chinese punctuation mark (after normalisation)."""
    return ch in PUNCTUATION


def is_any_punct(ch: str) -> bool:
    """True for any Unicode punctuation, before or after normalisation."""
    return ch in PUNCTUATION or unicodedata.category(ch).startswith("P")


def text_end(line: str) -> int:
    """The position after the line's last character that is not a punctuation mark (0 for a
    line of marks only): ``line[:text_end(line)]`` is the line without its final marks."""
    end = len(line)
    while end > 0 and is_punct(line[end - 1]):
        end -= 1
    return end


def repeat_pattern(line: str) -> list[int]:
    """`[line.index(c) for c in line]`: equal for two lines iff their repeats mirror."""
    first: dict[str, int] = {}
    return [first.setdefault(ch, i) for i, ch in enumerate(line)]


def clauses(line: str) -> list[tuple[int, int]]:
    """(start, end) spans of the clauses between punctuation marks, end exclusive."""
    spans: list[tuple[int, int]] = []
    start = 0
    for i, ch in enumerate(line):
        if is_punct(ch):
            if i > start:
                spans.append((start, i))
            start = i + 1
    if start < len(line):
        spans.append((start, len(line)))
    return spans
