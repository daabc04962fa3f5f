"""Pairs that prose names with a cue word: a quoted pair in a sentence about a couplet
(“A，B”), examples after 如：, and ``A，B`` right after 对联 / 春联 (or a colon just after).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from crawler.couplet_lines import (
    NOTE,
    QUOTES,
    Pair,
    clean_line,
    looks_like_couplet,
    prose_like,
    split_lianyue,
)
from data.text import is_han, is_punct

# A quoted pair (“A，B” or “A；B”) on a line that names a couplet (对联, 春联, 楹联, 一联 ...).
_QUOTED = re.compile(r"[“\"「『]([^“”\"「」『』\n]{5,81})[”\"」』]")
_CUE = re.compile(r"联|对")
_POEM_QUOTE = re.compile(r"诗[云曰中句]|有诗|词[云曰中]|吟道|咏道")  # just before a quote: a poem


# Words that introduce an example: 如“A，B”, 例如：A；B。
_EXAMPLE = re.compile(r"(?:如|例如|比如|譬如|像)$")
_BETWEEN_EXAMPLES = re.compile(r"\s*(?:[；，、]|以及|和|与|及)\s*")


def quoted_pairs(text: str, used: list[tuple[int, int]]) -> Iterator[Pair]:
    """Quoted pairs (“A，B”) in a sentence that names a couplet (联, 对) outside the quote,
    or introduced as an example (如“A，B”) in a paragraph whose earlier text, or the line
    before, names one (then neither half may read as prose); each quote one pair at most."""
    pos = 0
    before_line = previous = ""
    for line in text.split("\n"):
        start, pos = pos, pos + len(line) + 1
        two_back, before_line, previous = before_line, previous, line
        if not (_CUE.search(line) or _CUE.search(before_line)):
            continue
        last_example = -1  # where the last quoted example ended: 如“A，B”；“C，D” are two examples
        for m in _QUOTED.finditer(line):
            around = _sentence_around(line, m.start(), m.end())
            if not re.search(r"[。！？]", line[: m.start()]):
                around = run_on(before_line, two_back) + around  # …解家的春联 / 又改为：“A，B。”
            follows = last_example >= 0 and bool(_BETWEEN_EXAMPLES.fullmatch(line[last_example : m.start()]))
            example = bool(_EXAMPLE.search(line[: m.start()]) or follows) and bool(
                _CUE.search(line[: m.start()]) or _CUE.search(before_line)
            )
            cue = names_couplet(around)
            if not (cue or example):
                continue  # 真是“运用之妙，存乎一心”: a cue in another sentence is not this quote's
            if _POEM_QUOTE.search(around.split(" ")[0][-8:]):
                continue  # 王安石有诗云：“…，…”: lines of a poem
            span = (start + m.start(), start + m.end())
            if any(a < span[1] and span[0] < b for a, b in used):
                continue
            pair = split_lianyue(m[1], m[0])
            if pair and not cue and (prose_like(pair.upper) or prose_like(pair.lower)):
                continue
            if pair:
                used.append(span)
                last_example = m.end() if example else -1
                yield Pair(pair.upper, pair.lower, pair.snippet, "quoted")


_ONE_HALF = re.compile("上联|下联")


def names_couplet(sentence: str) -> bool:
    """The sentence names a couplet (联, 对), and not only one of its halves: a quote in a
    sentence on the 下联 alone (下联…巧妙说书房不大，但“斯是陋室，惟吾德馨”) is words of that
    half or about it, never a whole pair (上联 and 下联 both named: a couplet)."""
    halves = set(_ONE_HALF.findall(sentence))
    return bool(_CUE.search(_ONE_HALF.sub("", sentence) if len(halves) == 1 else sentence))


WRAPPED_ROW = 20  # rows of prose at least this long that end mid-sentence are hard-wrapped


def _cut(row: str) -> bool:
    """A long row of prose that ends in the middle of a sentence (in a Han character or a
    comma), not at a sentence end, a colon or a closing quote."""
    return len(row) >= WRAPPED_ROW and (is_han(row[-1]) or row[-1] in "，、") and any(map(is_punct, row))


def run_on(row: str, row_before: str) -> str:
    """The unfinished sentence that a row of hard-wrapped prose ends with, which the next
    row goes on with (…不料解家的春联 / 又改为：“A，B。”): the text after the row's last
    sentence end, when the row and the row before it are both cut mid-sentence (``_cut``;
    one such row alone may be a caption or a line that lacks its full stop); "" otherwise."""
    if not (_cut(row) and _cut(row_before)):
        return ""
    return re.split(r"[。！？]", row)[-1]


# 如：, 例如：, 比如： after a word naming a couplet on the same line (春联：新年专用之对联。如：A；B。)
_EXAMPLE_CUE = re.compile(r"(?:例如|比如|譬如|如)[：:]")


def example_pairs(text: str, used: list[tuple[int, int]]) -> Iterator[Pair]:
    """Pairs given as examples after 如： on a line that names a couplet before it, one per
    sentence, several to a line, each maybe with a note in brackets before or after it:
    ``贺联：…用。如：A；B。（喜联）C；D。（寿联）``. The halves mirror each other (split at
    the one ；, or at a comma exactly in the middle) and neither reads as prose."""
    pos = 0
    for line in text.split("\n"):
        start, pos = pos, pos + len(line) + 1
        cue = _EXAMPLE_CUE.search(line)
        if not cue or "联" not in line[: cue.start()]:
            continue
        at = cue.end()
        for sentence in re.split(r"(?<=[。！？])", line[at:]):
            span = (start + at, start + at + len(sentence))
            at += len(sentence)
            body = clean_line(NOTE.sub("", sentence.strip()))
            if not body or any(a < span[1] and span[0] < b for a, b in used):
                continue
            pair = split_lianyue(body, sentence)
            if pair and not (prose_like(pair.upper) or prose_like(pair.lower)):
                used.append(span)
                yield Pair(pair.upper, pair.lower, sentence.strip(), "example")


def _sentence_around(line: str, start: int, end: int) -> str:
    """The text of ``line`` around ``line[start:end]`` (a quote), back to the previous
    sentence end and on to the next one, the quote itself left out."""
    left = re.split(r"[。！？]", line[:start])[-1]
    right = re.split(r"[。！？]", line[end:])[0]
    return f"{left} {right}"


# Words that name a couplet just before it: 一副对联：A，B / 对联是叫A，B / 春联：A；B.
_PAIR_CUE = re.compile("对联|春联|楹联|门联|寿联|挽联|喜联|婚联|联语|一联|此联")
_FILLER = re.compile(r"[是为叫曰云作道]{0,2}：?[“「『‘]?")
_COLON_REACH = 8  # a colon this many characters after the cue word at most (对联，上头写着：)
_BODY_END = re.compile(r"[。！？”’」』\n]")


def cued_line_pairs(text: str, used: list[tuple[int, int]]) -> Iterator[Pair]:
    """``A，B`` (halves split at the one ；, or at a comma exactly in the middle) right after a
    word naming a couplet (对联是叫A，B), or after a colon shortly after it in the same
    sentence (留下一副对联，上头写着：A，B。); both halves pass the bare-line test."""
    for m in _PAIR_CUE.finditer(text):
        end = _BODY_END.search(text, m.end())
        sentence_end = end.start() if end else len(text)
        filler = _FILLER.match(text, m.end())
        # 对联是叫A，B / 春联：A；B; not 此联对仗工稳，… (commentary) or 贴春联；… (the cue ends a clause)
        begins = [filler.end()] if filler and filler.end() > m.end() else []
        colon = text.find("：", m.end(), min(sentence_end, m.end() + _COLON_REACH))
        if colon >= 0:
            begins.append(colon + 1)
        for begin in begins:
            while begin < len(text) and text[begin] in QUOTES:
                begin += 1
            stop = _BODY_END.search(text, begin)
            span = (begin, stop.start() if stop else len(text))
            if span[1] <= span[0] or any(a < span[1] and span[0] < b for a, b in used):
                continue
            pair = split_lianyue(text[span[0] : span[1]], text[m.start() : span[1]])
            if pair and looks_like_couplet(pair.upper, pair.lower):
                used.append(span)
                yield Pair(pair.upper, pair.lower, pair.snippet, "cued")
                break
