"""Pairs on lines of their own: one line holding a pair as lists of couplets print it
(numbered, with a 横批, ``A；B``), and two lines one after the other; rows of a poem or a
menu are never paired.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from crawler.couplet_lines import (
    NOTE,
    Pair,
    as_pair,
    clean_line,
    end_mark,
    is_couplet_line,
    looks_like_couplet,
    may_end_level,
    may_end_oblique,
    split_lianyue,
)
from crawler.guards import is_poem_head, menu_rows, one_rhyme, short_words
from crawler.page_text import line_starts
from data.text import is_punct


def _standalone_lines(text: str, used: list[tuple[int, int]]) -> Iterator[tuple[str, str] | None]:
    """(cleaned, raw) for each text line outside the spans already used; None breaks a run."""
    pos = 0
    for raw in text.split("\n"):
        start, pos = pos, pos + len(raw) + 1
        if any(a < start + len(raw) and start < b for a, b in used):
            yield None
            continue
        yield clean_line(raw), raw


def verse_rows(lines: list[tuple[str, str] | None], run: int = 4) -> set[int]:
    """Indexes of lines in a run of ``run`` or more equal-length lines: rows of a poem (a quatrain has four)
    (登高's four rows of two clauses each), whose neighbours are not a couplet."""
    rows: set[int] = set()
    start = 0
    for i in range(1, len(lines) + 1):
        same = (
            i < len(lines)
            and lines[i] is not None
            and lines[i - 1] is not None
            and len(lines[i][0]) == len(lines[i - 1][0])  # type: ignore[index]
        )
        if not same:
            if i - start >= run and not _couplet_list(lines[start:i]):
                rows.update(range(start, i))
            start = i
    return rows


def _couplet_list(lines: list[tuple[str, str] | None]) -> bool:
    """Rows that end in ； and 。 by turns (A；/B。/C；/D。), or in nothing and 。 by turns
    (A/B。/C/D。): a list of couplets as books and sites print them, not a poem (whose rows
    end in ，/。 or all in 。)."""
    ends = [end_mark(line[1]) if line else "?" for line in lines]
    uppers, lowers = set(ends[::2]), set(ends[1::2])
    if len(ends) % 2 == 0 and lowers == {"。"} and uppers in ({"；"}, {""}):
        return True
    return unpunctuated_couplets([line[0] if line and not end_mark(line[1]) else "" for line in lines])


def unpunctuated_couplets(rows: list[str]) -> bool:
    """Rows without any punctuation that are couplets two by two (A/B/C/D: each pair passes
    the bare-line test, its upper line may end oblique and its lower line level) and whose
    lower lines do not all rhyme: a list of couplets printed two lines a pair, not a poem,
    whose even rows rhyme (流/楼 in 登鹳雀楼) and whose first row often ends level."""
    if len(rows) % 2 or not rows or any(not row or any(map(is_punct, row)) for row in rows):
        return False
    uppers, lowers = rows[::2], rows[1::2]
    for up, low in zip(uppers, lowers, strict=True):
        if not (looks_like_couplet(up, low) and may_end_oblique(up) and may_end_level(low)):
            return False
    return not one_rhyme(lowers)


def adjacent_pairs(text: str, used: list[tuple[int, int]]) -> Iterator[Pair]:
    """Two lines one after the other that read as a couplet and nothing else (not rows of
    a poem)."""
    lines = list(_standalone_lines(text, used))
    rows = verse_rows(lines) | menu_rows([line and line[0] for line in lines]) | _poem_rows(lines)
    prev: tuple[str, str] | None = None
    for i, line in enumerate(lines):
        cur = None if i in rows else line
        if (
            cur is not None
            and prev is not None
            and looks_like_couplet(prev[0], cur[0])
            and not short_words(prev[1].strip(), cur[1].strip())
        ):
            yield Pair(prev[0], cur[0], f"{prev[1]}\n{cur[1]}", "adjacent")
            prev = None  # a line belongs to one pair at most
            continue
        prev = cur


def _poem_rows(lines: list[tuple[str, str] | None]) -> set[int]:
    """Indexes of the rows after a poem's author line (【唐】杜甫), up to the first line that
    is not a row of verse."""
    rows: set[int] = set()
    in_poem = False
    for i, line in enumerate(lines):
        if line is not None and is_poem_head(line[0]):
            in_poem = True
        elif in_poem and line is not None and is_couplet_line(line[0]) and len(line[0]) <= 40:
            rows.add(i)
        else:
            in_poem = False
    return rows


# A list number (一、 1. （3） 第五副：), maybe with the pair's title or 横批 after it (1.五福临门：A，B).
_NUMBER = re.compile(
    r"^(?:[（(]?[一二三四五六七八九十百\d]{1,3}[）)、。．.]+|第[一二三四五六七八九十百\d]{1,3}[副联首条]?[：、，]?)"
    r"(?:[\u3400-\u9fff]{2,6}：)?"
)
_HENGPI = re.compile(
    r"[，。；]?[（(]?(?:横批|横额|横联)[）)]?[：:]?[“「]?[\u3400-\u9fff]{2,8}[”」]?[）)]?[。；]?$"
)  # 。横批：C / （横批：C） / ，（横批）C；
# Halves split by 、 (a list's comma), maybe with a 横批 after a comma that names it not: A、B，C
_DUN_PAIR = re.compile(r"([\u3400-\u9fff]{4,20})、([\u3400-\u9fff]{4,20})(?:，[\u3400-\u9fff]{2,8})?")


PLAIN_RUN = 3  # unnumbered A，B。 lines: this many in a row are a list of couplets, not a poem


def one_line_pairs(text: str, used: list[tuple[int, int]]) -> Iterator[Pair]:
    """A line holding one pair as lists of couplets print it: numbered (一、A，B。 1.A；B,
    or 7、A。B。 with the halves split by a full stop), with a trailing 横批 (left out of the
    pair), ``A；B``, or, in a run of ``PLAIN_RUN`` or more lines holding such pairs (the
    unnumbered ones among them not rows after a poem's author line), unnumbered ``A，B。`` /
    ``A，B；``. A note in brackets after
    the pair （正对） is left out. Only on a page about couplets (the caller checks
    ``page_topic``), and both halves pass the bare-line test."""
    lines = list(_standalone_lines(text, used))
    starts, raws = line_starts(text), text.split("\n")
    poem = _poem_rows(lines)
    found: list[tuple[Pair | None, bool]] = []  # (pair, plain) per line; plain pairs need a run
    for i, line in enumerate(lines):
        pair, plain = None, False
        if line is not None and i not in poem:
            pair, plain = _one_line(line[1].strip())
        found.append((pair, plain) if pair else (None, False))
    keep: list[int] = []
    for first, end in _runs([pair is not None for pair, _ in found]):  # lines holding a pair
        for k, stop in _runs([found[j][1] for j in range(first, end)]):  # plain ones among them
            if end - first >= PLAIN_RUN and not _couplet_list(lines[first + k : first + stop]):
                keep += range(first + k, first + stop)  # not A，B；/C，D。: two-line pairs
        keep += [j for j in range(first, end) if not found[j][1]]
    keep.sort()
    for j in keep:  # a line belongs to one pair: the bare-line rule must not pair it again
        used.append((starts[j], starts[j] + len(raws[j])))
        pair = found[j][0]
        if pair is not None:
            yield pair


def _runs(flags: list[bool]) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of true flags, end exclusive."""
    start = None
    for i, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            yield start, i
            start = None


def _one_line(raw: str) -> tuple[Pair | None, bool]:
    """The pair one line holds, and whether it is only a plain ``A，B。`` (no number, 横批 or ；)."""
    number = _NUMBER.match(raw)
    body = raw[number.end() :] if number else raw
    hengpi = _HENGPI.search(body)
    body = clean_line(body[: hengpi.start()] if hengpi else body)
    plain = not (number or hengpi or body.count("；") == 1)
    if plain and not (end_mark(NOTE.sub("", raw).strip()) in ("。", "；") and body.count("，") == 1):
        return None, False
    halves = dun_halves(body) if number else None
    if halves:
        pair = as_pair(*halves, raw, "one_line")  # 1、年丰人寿、景泰春和；
    elif number and body.count("。") == 1 and "；" not in body:
        upper, _, lower = body.partition("。")  # 7、遍地春光新岁月。一天元气会风云。
        pair = as_pair(upper, lower, raw, "one_line")
    else:
        pair = split_lianyue(body, raw)
    if pair and looks_like_couplet(pair.upper, pair.lower):
        return Pair(pair.upper, pair.lower, raw, "one_line"), plain
    return None, False


def dun_halves(body: str) -> tuple[str, str] | None:
    """The halves of a numbered line written ``A、B`` (a list's comma between them, where a
    clause comma or ；would be), maybe with an unnamed 横批 after a comma (``A、B，C``):
    two equal halves without other punctuation, the upper may end oblique and the lower
    level, as couplets do, so that two words of a list (万象更新、春满人间) are no pair."""
    m = _DUN_PAIR.fullmatch(body)
    if not m or len(m[1]) != len(m[2]) or not (may_end_oblique(m[1]) and may_end_level(m[2])):
        return None
    return m[1], m[2]
