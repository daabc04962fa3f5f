"""What a couplet line is, and what prose is: the tests every extraction rule applies to
the lines it finds (``looks_like_couplet``, the strict one for bare lines), and ``Pair``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from data.rules import no_reuse, punctuation_mirrored, repeats_mirrored
from data.text import is_han, is_punct
from data.tones import Tone, char_tone

# Marks that end a quoted line in prose; they are sentence punctuation, not part of the line.
_EDGE = "，,。.；;：:！!？?、 \u3000"
QUOTES = "“”\"「」『』‘’'"


_PARTICLES = set("的了吗呢吧啊么哦呀嘛")
# Words of everyday prose that couplets almost never use (about 1 test pair in 200 has one);
# 非常 only as prose's "very", before what it modifies (秀非常, "out of the ordinary", ends a clause).
_PROSE_WORDS = re.compile(
    "我们|你们|他们|她们|这个|那个|什么|没有|因为|所以|但是|可以|已经|非常(?=[\u3400-\u9fff])|觉得|知道|然后|"
    "时候|大家|今天|一个"
)
_NUMERALS = set("〇零一二三四五六七八九十百千0123456789")
# A date: a year written digit by digit (1760年, 二〇一八年), a month with its day (十月三日), or
# digits before 月/日/号; a duration such as 十五年 or 五十年 is not one.
_DATE = re.compile(
    r"[〇零一二三四五六七八九\d]{2,4}\s*年|\d{1,2}\s*[月日号]|[一二三四五六七八九十]{1,2}\s*月\s*[一二三四五六七八九十]{1,3}\s*[日号]"
)
_LIST_ITEM = re.compile(r"^\s*(?:[（(]?[一二三四五六七八九十\d]+[）)、.．。]|第[一二三四五六七八九十\d]+)")


@dataclass(frozen=True)
class Pair:
    upper: str
    lower: str
    snippet: str  # the raw text the pair was read from
    form: str  # sina | lianyue | shangxia | story | example | quoted | cued | one_line | adjacent


# A note in brackets before or after a pair: （正对）, (喜联), （常用无情对）; never part of a line.
NOTE = re.compile(r"^[（(][^（）()\n]{1,12}[）)]|[（(][^（）()\n]{1,12}[）)]$")


def clean_line(line: str) -> str:
    line = NOTE.sub("", line.strip()).strip()
    return line.strip(QUOTES).strip(_EDGE).strip(QUOTES).strip()


def is_couplet_line(line: str) -> bool:
    """Han characters with, at most, punctuation between clauses."""
    return bool(line) and all(is_han(c) or is_punct(c) for c in line) and is_han(line[0]) and is_han(line[-1])


def as_pair(upper: str, lower: str, snippet: str, form: str) -> Pair | None:
    upper, lower = clean_line(upper), clean_line(lower)
    if not (is_couplet_line(upper) and is_couplet_line(lower)):
        return None
    if len(upper) != len(lower) or not punctuation_mirrored(upper, lower) or upper == lower:
        return None  # 好对，好对 is a cry, not a pair
    return Pair(upper, lower, snippet.strip(), form)


def split_lianyue(body: str, snippet: str) -> Pair | None:
    """``联曰：A；B`` (or ``A，B`` when the halves mirror each other exactly)."""
    body = clean_line(body)
    if body.count("；") == 1:
        upper, lower = body.split("；")
        return as_pair(upper, lower, snippet, "lianyue")
    if "；" in body:
        return None
    for i, ch in enumerate(body):
        if ch == "，" and 2 * i + 1 == len(body):
            return as_pair(body[:i], body[i + 1 :], snippet, "lianyue")
    return None


def may_end_oblique(line: str) -> bool:
    """The last character has an oblique reading, or is an old entering tone (结, 节, 福:
    level in Mandarin, oblique in the 平水韵 that couplet writers still follow)."""
    ch = line[-1]
    return bool(char_tone(ch, "lenient") & Tone.OBLIQUE) or char_tone(ch, "classical") == Tone.OBLIQUE


def may_end_level(line: str) -> bool:
    """The last character has a level reading (长 cháng as well as zhǎng)."""
    return bool(char_tone(line[-1], "lenient") & Tone.LEVEL)


def end_mark(raw: str) -> str:
    """The punctuation that ends a raw line, "" for none."""
    last = raw.rstrip()[-1:]
    return last if last and is_punct(last) else ""


def looks_like_couplet(upper: str, lower: str) -> bool:
    """Strict test for two bare lines: the weakest evidence, so every rule must hold."""
    if not (is_couplet_line(upper) and is_couplet_line(lower)) or len(upper) != len(lower):
        return False
    han = sum(map(is_han, upper))
    if han < 4 or len(upper) > 40:
        return False
    if not (punctuation_mirrored(upper, lower) and repeats_mirrored(upper, lower) and no_reuse(upper, lower)):
        return False
    return not any(prose_like(line) for line in (upper, lower))


def prose_like(line: str) -> bool:
    """Lists, dates, numbers and chatty particles: what a couplet line is not."""
    if _DATE.search(line) or _LIST_ITEM.match(line):
        return True
    if sum(c in _NUMERALS for c in line) * 2 > len(line):
        return True
    if any(c in _PARTICLES for c in line) or _PROSE_WORDS.search(line):
        return True
    clauses = [c for c in re.split(r"[，、；：]", line) if c]
    return len(clauses) > 1 and max(map(len, clauses)) <= 2  # 梅、兰、竹、菊: a list
