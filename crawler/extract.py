"""Extraction: HTML (or text) in, candidate couplet pairs out. No Scrapy, no I/O.

Two kinds of source:

* the Sina blog of 冯重朴 (梨味斋散叶): list pages link to articles; an article's body
  holds pairs written ``上联〓下联◎``, several to a line, sometimes separated by
  zero-width spaces or ``|`` (``sina_pairs``);
* articles that quote pairs in prose: ``联曰：雄鸡，鲤鱼，猪婆肉；香菇，木耳，曲子耙。``,
  ``上联：… 下联：…``, or two lines one after the other. Only equal-length lines with
  mirrored punctuation are taken; ordinary parallel sentences, lists and dates are not
  (``prose_pairs``, which runs the rules in order of evidence).

The parts: ``pages`` (an article's title and text, a list page's links), ``page_text`` (the
text as extraction reads it), ``couplet_lines`` (what a couplet line is; ``Pair``), and the
rules: ``stories``, ``cued_pairs``, ``list_pairs``.
"""

from __future__ import annotations

import re

from crawler.couplet_lines import Pair, as_pair, split_lianyue
from crawler.cued_pairs import cued_line_pairs, example_pairs, quoted_pairs
from crawler.guards import is_chrome, page_topic
from crawler.list_pairs import adjacent_pairs, one_line_pairs
from crawler.page_text import ZERO_WIDTH, normalise_text
from crawler.stories import story_pairs

SINA_PAIR = re.compile(r"([^〓◎|｜\s]+)〓([^〓◎|｜\s]+)◎")


_LIANYUE = re.compile(r"(?:联语|联|对)[曰云]\s*[：:]?\s*([^。！？!?\n]+)")  # 联曰 对曰 楹联云 联语曰
_SHANGXIA = re.compile(
    r"(?:上联|出句)\s*(?:[是为曰云]\s*[：:]?|[：:])\s*(?P<up>[^\n。！？!?]+?)\s*[，,；;。]?\s*"
    r"(?:下联|对句)\s*(?:[是为曰云]\s*[：:]?|[：:])\s*(?P<low>[^\n]+?)\s*(?=[。！？!?]|\n|$)",
    re.S,
)


def sina_pairs(text: str) -> list[Pair]:
    """Every ``上联〓下联◎`` in the text, exactly as written (validation comes later)."""
    text = text.translate(ZERO_WIDTH)
    return [Pair(m[1], m[2], m[0], "sina") for m in SINA_PAIR.finditer(text)]


def prose_pairs(text: str) -> list[Pair]:
    """Pairs quoted in prose, strongest evidence first: 上联/下联 labels, 联曰, stories
    (a cued upper and lower line with narration between), quoted pairs, one-line pairs
    after a cue word, one-line pairs on a page about couplets (numbered, 横批, A；B), then
    bare lines. A piece of text belongs to one pair at most; a page about proverbs or
    poems gets no pair from the weak rules, and page chrome is never paired (see
    ``crawler.guards``). The text is normalised first (``normalise_text``)."""
    text = normalise_text(text)
    found: list[Pair] = []
    used: list[tuple[int, int]] = []
    for m in _SHANGXIA.finditer(text):
        pair = as_pair(m["up"], m["low"], m[0], "shangxia")
        if pair:
            found.append(pair)
            used.append(m.span())
    for m in _LIANYUE.finditer(text):
        if any(a <= m.start() < b for a, b in used):
            continue
        pair = split_lianyue(m[1], m[0])
        if pair:
            found.append(pair)
            used.append(m.span())
    topic = page_topic(text)
    found.extend(story_pairs(text, used, topic))
    found.extend(example_pairs(text, used))
    found.extend(quoted_pairs(text, used))
    found.extend(cued_line_pairs(text, used))
    if topic == "couplet":
        found.extend(one_line_pairs(text, used))
    if topic != "other":
        found.extend(adjacent_pairs(text, used))
    return [p for p in found if not (is_chrome(p.upper) or is_chrome(p.lower))]
