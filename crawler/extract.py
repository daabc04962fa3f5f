"""Pure extraction: HTML (or text) in, candidate couplet pairs out. No Scrapy, no I/O.

Two kinds of source:

* the Sina blog of 冯重朴 (梨味斋散叶): list pages link to articles; an article's body
  holds pairs written ``上联〓下联◎``, several to a line, sometimes separated by
  zero-width spaces or ``|``;
* articles that quote pairs in prose: ``联曰：雄鸡，鲤鱼，猪婆肉；香菇，木耳，曲子耙。``,
  ``上联：… 下联：…``, or two lines one after the other. Only equal-length lines with
  mirrored punctuation are taken; ordinary parallel sentences, lists and dates are not.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from copy import deepcopy
from dataclasses import dataclass
from urllib.parse import urljoin

from lxml import etree
from parsel import Selector, SelectorList

from crawler.guards import is_chrome, is_poem_head, menu_rows, one_rhyme, page_topic, short_words
from data.normalize import Normalizer
from data.rules import no_reuse, punctuation_mirrored, repeats_mirrored
from data.text import is_han, is_punct
from data.tones import Tone, char_tone

# Invisible characters that the blog scatters inside its text.
ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))
SINA_PAIR = re.compile(r"([^〓◎|｜\s]+)〓([^〓◎|｜\s]+)◎")
SINA_LIST = re.compile(r"articlelist_\d+_\d+_\d+\.html$")

# Marks that end a quoted line in prose; they are sentence punctuation, not part of the line.
_EDGE = "，,。.；;：:！!？?、 \u3000"
_QUOTES = "“”\"「」『』‘’'"
_LIANYUE = re.compile(r"(?:联语|联|对)[曰云]\s*[：:]?\s*([^。！？!?\n]+)")  # 联曰 对曰 楹联云 联语曰
_SHANGXIA = re.compile(
    r"(?:上联|出句)\s*(?:[是为曰云]\s*[：:]?|[：:])\s*(?P<up>[^\n。！？!?]+?)\s*[，,；;。]?\s*"
    r"(?:下联|对句)\s*(?:[是为曰云]\s*[：:]?|[：:])\s*(?P<low>[^\n]+?)\s*(?=[。！？!?]|\n|$)",
    re.S,
)
# A quoted pair (“A，B” or “A；B”) on a line that names a couplet (对联, 春联, 楹联, 一联 ...).
_QUOTED = re.compile(r"[“\"「『]([^“”\"「」『』\n]{5,81})[”\"」』]")
_CUE = re.compile(r"联|对")
_POEM_QUOTE = re.compile(r"诗[云曰中句]|有诗|词[云曰中]|吟道|咏道")  # just before a quote: a poem
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


@dataclass(frozen=True)
class Pair:
    upper: str
    lower: str
    snippet: str  # the raw text the pair was read from
    form: str  # sina | lianyue | shangxia | story | example | quoted | cued | one_line | adjacent


@dataclass(frozen=True)
class Article:
    title: str
    text: str  # body text, one line per block or <br>


# --- HTML -----------------------------------------------------------------------------

_BLOCK_TAGS = frozenset(
    [
        "p",
        "div",
        "br",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "tr",
        "table",
        "blockquote",
        "pre",
        "section",
        "article",
        "dd",
        "dt",
    ]
)
_SPACE = re.compile(r"[ \t\r\f\v\u00a0\u3000]+")


def block_text(sel: Selector | SelectorList[Selector]) -> str:
    """Visible text of the selected elements, one line per block element or <br>."""
    parts: list[str] = []
    for node in sel if isinstance(sel, SelectorList) else [sel]:
        if not isinstance(node.root, etree._Element):
            continue
        root = deepcopy(node.root)
        root.tail = None
        for el in root.iter():
            if el.tag in ("script", "style"):
                el.text = ""
            elif isinstance(el.tag, str) and el.tag.lower() in _BLOCK_TAGS:
                el.text = "\n" + (el.text or "")
                el.tail = "\n" + (el.tail or "")
        parts.append("".join(root.itertext()))
    text = "\n".join(parts).translate(ZERO_WIDTH)
    lines = (_SPACE.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def sina_list_links(html: str, base_url: str) -> tuple[list[str], list[str]]:
    """(article links under ``.atc_title a``, links to other list pages) of a list page."""
    sel = Selector(text=html)
    articles = [urljoin(base_url, h) for h in sel.css(".atc_title a::attr(href)").getall()]
    pages = [urljoin(base_url, h) for h in sel.css("a::attr(href)").getall() if SINA_LIST.search(h.strip())]
    return _unique(articles), _unique(pages)


def sina_article(html: str) -> Article:
    """Title (``.articalTitle h2``) and body text (``.articalContent``) of a blog article."""
    sel = Selector(text=html)
    title = " ".join(sel.css(".articalTitle h2 ::text").getall()).strip()
    return Article(title=title, text=block_text(sel.css(".articalContent")))


def prose_article(html: str) -> Article:
    """Title and body text of an ordinary article page (``<article>``, else ``<body>``)."""
    sel = Selector(text=html)
    title = (sel.css("h1 ::text").get() or sel.css("title::text").get() or "").strip()
    body = sel.css("article") or sel.css("body") or sel
    return Article(title=title, text=block_text(body))


def page_links(html: str, base_url: str) -> list[str]:
    return _unique(urljoin(base_url, h.strip()) for h in Selector(text=html).css("a::attr(href)").getall())


# --- pairs ----------------------------------------------------------------------------


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
        pair = _as_pair(m["up"], m["low"], m[0], "shangxia")
        if pair:
            found.append(pair)
            used.append(m.span())
    for m in _LIANYUE.finditer(text):
        if any(a <= m.start() < b for a, b in used):
            continue
        pair = _split_lianyue(m[1], m[0])
        if pair:
            found.append(pair)
            used.append(m.span())
    topic = page_topic(text)
    found.extend(story_pairs(text, used, topic))
    found.extend(example_pairs(text, used))
    found.extend(_quoted_pairs(text, used))
    found.extend(cued_line_pairs(text, used))
    if topic == "couplet":
        found.extend(one_line_pairs(text, used))
    if topic != "other":
        found.extend(_adjacent_pairs(text, used))
    return [p for p in found if not (is_chrome(p.upper) or is_chrome(p.lower))]


# A note in brackets before or after a pair: （正对）, (喜联), （常用无情对）; never part of a line.
_NOTE = re.compile(r"^[（(][^（）()\n]{1,12}[）)]|[（(][^（）()\n]{1,12}[）)]$")


def _clean_line(line: str) -> str:
    line = _NOTE.sub("", line.strip()).strip()
    return line.strip(_QUOTES).strip(_EDGE).strip(_QUOTES).strip()


def is_couplet_line(line: str) -> bool:
    """Han characters with, at most, punctuation between clauses."""
    return bool(line) and all(is_han(c) or is_punct(c) for c in line) and is_han(line[0]) and is_han(line[-1])


def _as_pair(upper: str, lower: str, snippet: str, form: str) -> Pair | None:
    upper, lower = _clean_line(upper), _clean_line(lower)
    if not (is_couplet_line(upper) and is_couplet_line(lower)):
        return None
    if len(upper) != len(lower) or not punctuation_mirrored(upper, lower) or upper == lower:
        return None  # 好对，好对 is a cry, not a pair
    return Pair(upper, lower, snippet.strip(), form)


def _split_lianyue(body: str, snippet: str) -> Pair | None:
    """``联曰：A；B`` (or ``A，B`` when the halves mirror each other exactly)."""
    body = _clean_line(body)
    if body.count("；") == 1:
        upper, lower = body.split("；")
        return _as_pair(upper, lower, snippet, "lianyue")
    if "；" in body:
        return None
    for i, ch in enumerate(body):
        if ch == "，" and 2 * i + 1 == len(body):
            return _as_pair(body[:i], body[i + 1 :], snippet, "lianyue")
    return None


# Words that introduce an example: 如“A，B”, 例如：A；B。
_EXAMPLE = re.compile(r"(?:如|例如|比如|譬如|像)$")
_BETWEEN_EXAMPLES = re.compile(r"\s*(?:[；，、]|以及|和|与|及)\s*")


def _quoted_pairs(text: str, used: list[tuple[int, int]]) -> Iterator[Pair]:
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
            pair = _split_lianyue(m[1], m[0])
            if pair and not cue and (_prose_like(pair.upper) or _prose_like(pair.lower)):
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
            body = _clean_line(_NOTE.sub("", sentence.strip()))
            if not body or any(a < span[1] and span[0] < b for a, b in used):
                continue
            pair = _split_lianyue(body, sentence)
            if pair and not (_prose_like(pair.upper) or _prose_like(pair.lower)):
                used.append(span)
                yield Pair(pair.upper, pair.lower, sentence.strip(), "example")


def _standalone_lines(text: str, used: list[tuple[int, int]]) -> Iterator[tuple[str, str] | None]:
    """(cleaned, raw) for each text line outside the spans already used; None breaks a run."""
    pos = 0
    for raw in text.split("\n"):
        start, pos = pos, pos + len(raw) + 1
        if any(a < start + len(raw) and start < b for a, b in used):
            yield None
            continue
        yield _clean_line(raw), raw


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
    ends = [_end_mark(line[1]) if line else "?" for line in lines]
    uppers, lowers = set(ends[::2]), set(ends[1::2])
    if len(ends) % 2 == 0 and lowers == {"。"} and uppers in ({"；"}, {""}):
        return True
    return unpunctuated_couplets([line[0] if line and not _end_mark(line[1]) else "" for line in lines])


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


def may_end_oblique(line: str) -> bool:
    """The last character has an oblique reading, or is an old entering tone (结, 节, 福:
    level in Mandarin, oblique in the 平水韵 that couplet writers still follow)."""
    ch = line[-1]
    return bool(char_tone(ch, "lenient") & Tone.OBLIQUE) or char_tone(ch, "classical") == Tone.OBLIQUE


def may_end_level(line: str) -> bool:
    """The last character has a level reading (长 cháng as well as zhǎng)."""
    return bool(char_tone(line[-1], "lenient") & Tone.LEVEL)


def _end_mark(raw: str) -> str:
    """The punctuation that ends a raw line, "" for none."""
    last = raw.rstrip()[-1:]
    return last if last and is_punct(last) else ""


def _adjacent_pairs(text: str, used: list[tuple[int, int]]) -> Iterator[Pair]:
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


def _sentence_around(line: str, start: int, end: int) -> str:
    """The text of ``line`` around ``line[start:end]`` (a quote), back to the previous
    sentence end and on to the next one, the quote itself left out."""
    left = re.split(r"[。！？]", line[:start])[-1]
    right = re.split(r"[。！？]", line[end:])[0]
    return f"{left} {right}"


def _line_starts(text: str) -> list[int]:
    starts, pos = [], 0
    for line in text.split("\n"):
        starts.append(pos)
        pos += len(line) + 1
    return starts


# --- stories: a cued upper line, narration, a cued lower line ---------------------------

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
    starts = _line_starts(text)
    lines = text.split("\n")

    def line_of(pos: int) -> int:
        return max(0, bisect_right(starts, pos) - 1)

    def cued(cue: re.Pattern[str], speech: bool = False) -> dict[int, _Half]:
        halves: dict[int, _Half] = {}
        for m in cue.finditer(text):
            begin = m.end() + (m.end() < len(text) and text[m.end()] == "\n")
            while begin < len(text) and text[begin] in _QUOTES:
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
        if not lines[i - 1].endswith("：") or not is_couplet_line(_clean_line(line)):
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
    upper, lower = _clean_line(up.text), _clean_line(low.text)
    if len(lower) > len(upper) and is_punct(lower[len(upper)]):
        lower = lower[: len(upper)]  # 对道：B，众人称妙: the lower line ends where the upper's length does
    snippet = f"{text[up.start : up.end]} … {text[low.start : low.end]}"
    pair = _as_pair(upper, lower, snippet, "story")
    if pair is None or sum(map(is_han, upper)) < 4:
        return None
    if not (up.cued or low.cued) or low.speech:
        return pair if looks_like_couplet(upper, lower) else None
    if not (up.cued and low.cued) and (_prose_like(upper) or _prose_like(lower)):
        return None
    return pair


# --- one line: A，B after a cue word; numbered or 横批 lines on a page about couplets -----

# Words that name a couplet just before it: 一副对联：A，B / 对联是叫A，B / 春联：A；B.
_PAIR_CUE = re.compile("对联|春联|楹联|门联|寿联|挽联|喜联|婚联|联语|一联|此联")
_FILLER = re.compile(r"[是为叫曰云作道]{0,2}：?[“「『‘]?")
_COLON_REACH = 8  # a colon this many characters after the cue word at most (对联，上头写着：)
_BODY_END = re.compile(r"[。！？”’」』\n]")
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
            while begin < len(text) and text[begin] in _QUOTES:
                begin += 1
            stop = _BODY_END.search(text, begin)
            span = (begin, stop.start() if stop else len(text))
            if span[1] <= span[0] or any(a < span[1] and span[0] < b for a, b in used):
                continue
            pair = _split_lianyue(text[span[0] : span[1]], text[m.start() : span[1]])
            if pair and looks_like_couplet(pair.upper, pair.lower):
                used.append(span)
                yield Pair(pair.upper, pair.lower, pair.snippet, "cued")
                break


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
    starts, raws = _line_starts(text), text.split("\n")
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
    body = _clean_line(body[: hengpi.start()] if hengpi else body)
    plain = not (number or hengpi or body.count("；") == 1)
    if plain and not (_end_mark(_NOTE.sub("", raw).strip()) in ("。", "；") and body.count("，") == 1):
        return None, False
    halves = dun_halves(body) if number else None
    if halves:
        pair = _as_pair(*halves, raw, "one_line")  # 1、年丰人寿、景泰春和；
    elif number and body.count("。") == 1 and "；" not in body:
        upper, _, lower = body.partition("。")  # 7、遍地春光新岁月。一天元气会风云。
        pair = _as_pair(upper, lower, raw, "one_line")
    else:
        pair = _split_lianyue(body, raw)
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


def looks_like_couplet(upper: str, lower: str) -> bool:
    """Strict test for two bare lines: the weakest evidence, so every rule must hold."""
    if not (is_couplet_line(upper) and is_couplet_line(lower)) or len(upper) != len(lower):
        return False
    han = sum(map(is_han, upper))
    if han < 4 or len(upper) > 40:
        return False
    if not (punctuation_mirrored(upper, lower) and repeats_mirrored(upper, lower) and no_reuse(upper, lower)):
        return False
    return not any(_prose_like(line) for line in (upper, lower))


def _prose_like(line: str) -> bool:
    """Lists, dates, numbers and chatty particles: what a couplet line is not."""
    if _DATE.search(line) or _LIST_ITEM.match(line):
        return True
    if sum(c in _NUMERALS for c in line) * 2 > len(line):
        return True
    if any(c in _PARTICLES for c in line) or _PROSE_WORDS.search(line):
        return True
    clauses = [c for c in re.split(r"[，、；：]", line) if c]
    return len(clauses) > 1 and max(map(len, clauses)) <= 2  # 梅、兰、竹、菊: a list


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
