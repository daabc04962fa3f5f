"""The text of a page as extraction reads it: invisible characters, inserted pinyin and
table borders out, each line normalised as the data stage does, broken quotes joined.
"""

from __future__ import annotations

import re

from data.normalize import Normalizer

# Invisible characters that the blog scatters inside its text.
ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))


# Pinyin that a page inserts after a character: 聯(lián), 時(shí); the page's text without it.
_PINYIN = re.compile(r"[(（][a-zA-Zāáǎàēéěèīíǐìōóǒòūúǔùǖǘǚǜüńňǹḿ]{1,7}[)）]")
_normalizer: Normalizer | None = None
# Spaces between two pieces of Chinese text (after a character or a sentence end, before a
# character or an opening quote) separate paragraphs or halves; Chinese prose has no spaces
# inside a sentence, so such a gap is read as a line break (normalisation would drop it).
_GAP = re.compile(r"(?<=[\u3400-\u9fff。！？!?”」』])[ \t\u00a0\u3000]+(?=[\u3400-\u9fff“「『])")


# Words that only a converter writing 壹 for 一 produces (壹個, 壹種, 統壹, a list number 壹、):
# on such a page every 壹 is a 一 (壹年四季 is 一年四季).
_YI_AS_YI = re.compile(r"^壹、|十壹、|壹[個个種种樣样些起定直般切]|[統统][壹]", re.M)


def normalise_text(text: str) -> str:
    """The page's text as extraction reads it: inserted pinyin removed, 壹 read as 一 on a
    page whose converter writes 壹 for 一, then each line through the data stage's
    normalisation (full-width punctuation, traditional to simplified, variants), so
    上聯:A,B reads as 上联：A，B, a table's border at its ends left out, and a quote broken
    across two rows joined (``join_broken_quotes``)."""
    global _normalizer
    if _normalizer is None:
        _normalizer = Normalizer()
    if _YI_AS_YI.search(text):
        text = text.replace("壹", "一")
    text = _GAP.sub("\n", _PINYIN.sub("", text.translate(ZERO_WIDTH)))
    lines = (_normalizer(line).strip(_BORDER).strip() for line in text.split("\n"))
    return "\n".join(join_broken_quotes([line for line in lines if line]))


_BORDER = "|｜"  # a table's border at a line's start or end (…克振家声。 |): not text
_OPENING, _CLOSING = "“「『", "”」』"


def _open_quote(line: str) -> bool:
    """The line opens a quote that it does not close."""
    return max(map(line.rfind, _OPENING)) > max(map(line.rfind, _CLOSING))


def join_broken_quotes(lines: list[str]) -> list[str]:
    """Rows of hard-wrapped text with a quote broken across them (…改成了：“门对千竿竹短，家藏万卷书
    / 长。”员外听罢…) joined into one line: a row that opens a quote it does not close, and
    the next row closes it before it opens another."""
    joined: list[str] = []
    for line in lines:
        if joined and _open_quote(joined[-1]):
            close = min((i for i in map(line.find, _CLOSING) if i >= 0), default=-1)
            opening = min((i for i in map(line.find, _OPENING) if i >= 0), default=len(line))
            if 0 <= close < opening:
                joined[-1] += line
                continue
        joined.append(line)
    return joined


def line_starts(text: str) -> list[int]:
    starts, pos = [], 0
    for line in text.split("\n"):
        starts.append(pos)
        pos += len(line) + 1
    return starts
