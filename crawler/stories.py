"""Pairs told as a story: a cued upper line (出了个上联：A), narration, and the lower lines
that answer it (对道：B).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from crawler.couplet_lines import (
    QUOTES,
    Pair,
    as_pair,
    clean_line,
    is_couplet_line,
    looks_like_couplet,
    prose_like,
)
from crawler.page_text import line_starts
from data.text import is_han, is_punct

# 上联：, 上联是：, 出句：, 出了个上联：, 出了这么一个上联：, 曾出一联：
# (not 对出了下联, 说出了下联: answers)
# 上联是“A”, 出联：「A」; 出「A」征求下联 (the quote right after 出, a call for a lower line after it)
_MODAL = r"(?:可能|可以|应该|应|则|就|便)?"
_UPPER_CUE = re.compile(
    rf"(?:(?:上联|出句|上句|(?<!对)出[^，。：；！？“”下\n]{{0,6}}?联){_MODAL}[是为曰云道]?\s*(?:：|(?=[“「『])))"
    r"|出(?=[“「『][^”」』\n]{2,30}[”」』][^。！？\n]{0,8}?(?:下联|对句|应对|求对|征对))"
)
# 下联：, 对道：, 对曰：, 对上：, 对了个下句：, 此联可对：
# 下联可能是“B”, 乃对下联「B」, 有人对：B (a bare 对 only before a colon: not 「五月」对「三星」)
_LOWER_CUE = re.compile(
    r"(?:下联|对句|下句|对[道曰云上出]|对了?[个一]?[^，。：；！？“”\n]{0,4}?(?:下联|下句)|可对)"
    rf"{_MODAL}[是为曰云道]?\s*(?:：|(?=[“「『]))"
    r"|(?<![不答相反正绝针核应])对\s*："
    r"|下联[^，。：；！？“”\n]{0,6}?(?:而出|说出|道出|念出)\s*(?:：|(?=[“「『]))"  # 下联脱口而出：
)
# A quote named as the upper line right after it: 说：“A。”上联一出口 / “A”，这个上联
_UPPER_AFTER = re.compile(r"[“「『]([^“”「」『』\n]{4,40})[”」』][，,]?(?:这个|这副|这一|此)?上联")
# Speech: 说：B. Not a couplet word, so a half after it is judged as bare lines are.
_SPEECH_CUE = re.compile(r"(?:说|道)\s*(?:：|(?=[“「『]))")
_HALF_END = re.compile(r"[。！？；\n”’」』]")
_LABELS = ("下联", "下句", "对句")  # a lower named as such, not an answer in a story
STORY_LINES = 8  # an upper line and its lower line at most this many lines apart


@dataclass(frozen=True)
class _Half:
    start: int
    end: int
    text: str
    line: int
    cued: bool  # after a cue word (上联：, 对道：), not only after a line that ends in ：
    speech: bool = False  # after 说：/道： only (a lower), judged by the bare-line test


def story_halves(text: str) -> tuple[list[_Half], list[_Half]]:
    """(uppers, lowers) of a story, in text order. A cued half is the clause after 上联：
    or 对道： (on the cue's line or, when the cue ends its line, on the next), or in a
    quote named 上联 right after it (“A。”上联一出), up to the end of the sentence, a
    semicolon or a closing quote, so a label never runs on into the narration. An uncued
    upper is a whole line of couplet text ending in ； after a line ending in ：, an uncued
    lower a whole such line ending otherwise; a lower after 说：/道： is marked ``speech``."""
    starts = line_starts(text)
    lines = text.split("\n")

    def line_of(pos: int) -> int:
        return max(0, bisect_right(starts, pos) - 1)

    def cued(cue: re.Pattern[str], speech: bool = False) -> dict[int, _Half]:
        halves: dict[int, _Half] = {}
        for m in cue.finditer(text):
            begin = m.end() + (m.end() < len(text) and text[m.end()] == "\n")
            while begin < len(text) and text[begin] in QUOTES:
                begin += 1
            stop = _HALF_END.search(text, begin)
            end = stop.start() if stop else len(text)
            if end > begin:
                halves[begin] = _Half(m.start(), end, text[begin:end], line_of(begin), not speech, speech)
        return halves

    uppers, lowers = cued(_UPPER_CUE), cued(_LOWER_CUE)
    for m in _UPPER_AFTER.finditer(text):
        stop = _HALF_END.search(text, m.start(1))
        end = stop.start() if stop else m.end(1)
        uppers.setdefault(m.start(1), _Half(m.start(), end, text[m.start(1) : end], line_of(m.start()), True))
    for i in range(1, len(lines)):
        line = lines[i]
        if not lines[i - 1].endswith("：") or not is_couplet_line(clean_line(line)):
            continue
        half = _Half(starts[i], starts[i] + len(line), line, i, False)
        target = uppers if line.endswith("；") else lowers
        target.setdefault(starts[i], half)
    for begin, half in cued(_SPEECH_CUE, speech=True).items():
        lowers.setdefault(begin, half)  # 说：B, unless a cue word or a line ending in ： says more
    return sorted(uppers.values(), key=lambda h: h.start), sorted(lowers.values(), key=lambda h: h.start)


def story_pairs(text: str, used: list[tuple[int, int]], topic: str = "unknown") -> Iterator[Pair]:
    """An upper line and the lower lines after it (before the next upper line, at most
    ``STORY_LINES`` lines on) that mirror it: 出了个上联：A … narration … 对道：B. The first
    answer is judged by its cues; one upper answered in turn by several people (对道：B …
    说：C … 对出：D) gives a pair for each later answer that passes the bare-line test
    (``looks_like_couplet``) too, up to a lower named 下联 (another couplet's). Uncued
    halves on both sides need a page that is not about proverbs or poems and the bare-line
    test, and so does a lower after 说： only."""
    uppers, lowers = story_halves(text)
    taken: set[int] = set()

    def free(h: _Half) -> bool:
        return not any(a < h.end and h.start < b for a, b in used)

    for k, up in enumerate(uppers):
        if not free(up):
            continue
        limit = uppers[k + 1].start if k + 1 < len(uppers) else len(text)
        answers: set[str] = set()
        for low in lowers:
            if low.start < up.end or low.start in taken or not free(low):
                continue
            if low.start >= limit or low.line - up.line > STORY_LINES:
                break
            if not (up.cued or low.cued) and topic == "other":
                break
            if answers and text.startswith(_LABELS, low.start):
                break  # 下联是B after an answer: another couplet's lower (…另一副是C，下联是D)
            pair = _story_pair(up, low, text)
            if pair and answers and not looks_like_couplet(pair.upper, pair.lower):
                continue  # a later answer: the bare-line test too
            if pair and pair.lower not in answers:
                taken.add(low.start)
                used += [(low.start, low.end)] if answers else [(up.start, up.end), (low.start, low.end)]
                answers.add(pair.lower)
                yield pair


def _story_pair(up: _Half, low: _Half, text: str) -> Pair | None:
    upper, lower = clean_line(up.text), clean_line(low.text)
    if len(lower) > len(upper) and is_punct(lower[len(upper)]):
        lower = lower[: len(upper)]  # 对道：B，众人称妙: the lower line ends where the upper's length does
    snippet = f"{text[up.start : up.end]} … {text[low.start : low.end]}"
    pair = as_pair(upper, lower, snippet, "story")
    if pair is None or sum(map(is_han, upper)) < 4:
        return None
    if not (up.cued or low.cued) or low.speech:
        return pair if looks_like_couplet(upper, lower) else None
    if not (up.cued and low.cued) and (prose_like(upper) or prose_like(lower)):
        return None
    return pair
