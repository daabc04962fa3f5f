"""What a person asks (``Query``, made by ``make_query``) and the checks of what they type,
before it reaches the model or the database.

The same checks for the site (serve/validation.py answers an ``InputError`` with a 422) and
the command line (which prints it): each refusal says, in Chinese and in English, what is
wrong. Imports no web framework and no model.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from data.normalize import Normalizer
from data.text import DIRECTIONS, LONGEST_LINE, REGISTERS, is_han, is_punct

_HTML = re.compile(r"<\s*/?\s*[A-Za-z!][^>]*>|&#?\w+;")
LOCK_FREE = "_＿"  # a free position in a lock pattern
# The site's defaults (serve/settings.py), which the command line keeps too
MAX_CHARS = LONGEST_LINE  # the longest upper line accepted (``max_chars``); from 33 on, segment by segment
SCROLL_CHARS = 32  # the longest line drawn as a scroll (a door's 春联, not a pillar's 长联)
MAX_ASKED = 10  # the most candidates one request may ask for (``max_candidates``)
OVERSAMPLE = 2  # extra candidates asked of the decoder for filtered ones (``oversample``)
MAX_ALTERNATIVES = 16  # the most characters (besides the line's own) one alternatives request may ask for
TONE_MODES = ("modern", "lenient", "classical")
FORWARD, REVERSE = DIRECTIONS  # 上联 -> 下联, and 下联求上联 (the given line is the lower one)
_normalise = Normalizer()  # its tables fill lazily: nothing is loaded at import
# Characters a person asks for that stay as typed: alone, OpenCC reads 乾 as the traditional
# form of 干 (乾燥 → 干燥), but 乾 is a standard simplified character too (乾坤, 乾隆, which the
# corpus keeps), so a 藏头, 嵌字 or locked 乾 is meant as 乾.
KEPT_AS_TYPED = frozenset("乾")


class InputError(ValueError):
    """Input refused: ``zh`` and ``en`` say why; ``str()`` is "中文 / English"."""

    def __init__(self, zh: str, en: str) -> None:
        super().__init__(f"{zh} / {en}")
        self.zh, self.en = zh, en


def clean_line(
    raw: str, max_chars: int = MAX_CHARS, name: tuple[str, str] = ("上联", "The upper line")
) -> str:
    """The line normalised as the training data was (data.normalize: spaces, compatibility
    forms, full-width marks, simplified characters), or an ``InputError`` saying what is wrong."""
    zh, en = name
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co") and not ch.isspace() for ch in raw):
        raise InputError(f"{zh}含有控制字符", f"{en} contains control characters.")
    if _HTML.search(raw):
        raise InputError(f"{zh}不能含有 HTML 标记", f"{en} must not contain HTML.")
    line = _normalise(raw)
    if not line:
        raise InputError(f"{zh}不能为空", f"{en} is empty.")
    if any(ch.isascii() and ch.isalpha() for ch in line):
        raise InputError(f"{zh}只能用汉字和中文标点，不能有拉丁字母", f"{en} must not contain Latin letters.")
    if any(unicodedata.category(ch) == "Nd" for ch in line):
        raise InputError(
            f"{zh}不能有阿拉伯数字，请写成汉字", f"{en} must not contain digits; write them in Chinese."
        )
    bad = "".join(dict.fromkeys(ch for ch in line if not (is_han(ch) or is_punct(ch))))
    if bad:
        raise InputError(
            f"{zh}含有不支持的字符：{bad}",
            f"{en} contains unsupported characters (only Chinese characters and punctuation): {bad}",
        )
    if not any(is_han(ch) for ch in line):
        raise InputError(f"{zh}至少要有一个汉字", f"{en} needs at least one Chinese character.")
    if len(line) > max_chars:
        raise InputError(
            f"{zh}最多 {max_chars} 个字（现在 {len(line)} 个）",
            f"{en} has {len(line)} characters; at most {max_chars}.",
        )
    return line


def check_direction(direction: str) -> str:
    if direction not in DIRECTIONS:
        raise InputError(
            f"方向只能是 {'、'.join(DIRECTIONS)}", f"The direction is one of {', '.join(DIRECTIONS)}."
        )
    return direction


def given_line(upper: str | None, lower: str | None, direction: str | None) -> tuple[str, str]:
    """(the line given, the direction) of a request that names its line ``upper`` or ``lower``:
    one of them, the one its direction reads (inferred when ``direction`` is None)."""
    if direction is None:
        direction = REVERSE if lower is not None and upper is None else FORWARD
    check_direction(direction)
    given, other = (lower, upper) if direction == REVERSE else (upper, lower)
    field, other_field = ("lower", "upper") if direction == REVERSE else ("upper", "lower")
    (gzh, gen), (ozh, _) = line_names(direction)
    if other is not None:
        raise InputError(
            f"{direction} 方向只给{gzh}（{field}），不给{ozh}（{other_field}）",
            f"Direction {direction} takes the field {field} only, not {other_field}.",
        )
    if given is None:
        raise InputError(f"请给出{gzh}（{field}）", f"{gen} is missing (field {field}).")
    return given, direction


def line_names(direction: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """(the given line's names, the written line's names) in Chinese and English."""
    upper, lower = ("上联", "The upper line"), ("下联", "The lower line")
    return (lower, upper) if direction == REVERSE else (upper, lower)


def clean_locks(raw: str | None, upper: str, given: str = "上联") -> str | None:
    """A lock pattern as long as the given line (``given`` names it): ``_`` free, a Han
    character fixed there. One that locks nothing is no constraint (None), but it too must
    be as long as the line."""
    if raw is None or not raw.strip():
        return None
    pattern = "".join("_" if ch in LOCK_FREE else ch for ch in normalise_chars(raw))
    if len(pattern) != len(upper):
        en = "upper line" if given == "上联" else "lower line"
        raise InputError(
            f"锁定模式要和{given}一样长（{len(upper)} 个字，用 _ 表示不锁定）",
            f"The lock pattern must be as long as the {en} ({len(upper)}), with _ for free positions.",
        )
    for i, ch in enumerate(pattern):
        if ch != "_" and not is_han(ch) and ch != upper[i]:
            raise InputError(
                f"锁定的字必须是汉字：{ch}", f"A locked character must be a Chinese character: {ch}"
            )
    return pattern if pattern.strip("_") else None


def normalise_chars(raw: str) -> str:
    """Characters asked for one by one (藏头, 嵌字, a lock pattern), each normalised as the
    corpus is (data.normalize: spaces, compatibility forms, full-width marks, simplified
    characters: 後 → 后, 發 → 发), except those ``KEPT_AS_TYPED`` (乾 stays 乾)."""
    return "".join(ch if ch in KEPT_AS_TYPED else _normalise(ch) for ch in raw)


def clean_chars(raw: str | None, name: tuple[str, str]) -> str | None:
    """Required characters (藏头 / 嵌字), normalised (``normalise_chars``): Chinese characters only."""
    if raw is None:
        return None
    chars = normalise_chars(raw)
    if not chars:
        return None
    zh, en = name
    if not all(is_han(ch) for ch in chars):
        raise InputError(f"{zh}只能是汉字", f"{en} must be Chinese characters.")
    return chars


def clean_couplet(upper: str, lower: str, max_chars: int = MAX_CHARS) -> tuple[str, str]:
    """Both lines cleaned as :func:`clean_line` does, and of one length, or an ``InputError``."""
    up = clean_line(upper, max_chars)
    low = clean_line(lower, max_chars, ("下联", "The lower line"))
    if len(up) != len(low):
        raise InputError(
            f"上联和下联要一样长（上联 {len(up)} 个字，下联 {len(low)} 个字）",
            f"The upper and lower lines must be the same length ({len(up)} and {len(low)}).",
        )
    return up, low


def check_count(n: int, max_asked: int = MAX_ASKED) -> int:
    """How many candidates one request asks for: 1 to ``max_asked``."""
    if n > max_asked:
        raise InputError(f"最多可以要 {max_asked} 个下联", f"At most {max_asked} candidates.")
    if n < 1:
        raise InputError("至少要一个下联", "Ask for at least one candidate.")
    return n


@dataclass(frozen=True)
class Query:
    """One request, its input already checked (``make_query``). ``upper`` is the line given:
    the upper line, or with ``direction`` ``lower_to_upper`` (下联求上联) the lower line."""

    upper: str
    n: int
    tone_mode: str = "modern"
    locks: str | None = None
    required_first: str | None = None
    required_chars: str | None = None
    fast: bool = False
    diverse: bool = False
    direction: str = FORWARD
    register: str = REGISTERS[0]  # what the model writes in, for a model with registers

    @property
    def reverse(self) -> bool:
        return self.direction == REVERSE


def make_query(
    upper: str,
    n: int = 5,
    tone_mode: str = "modern",
    locks: str | None = None,
    required_first: str | None = None,
    required_chars: str | None = None,
    fast: bool = False,
    diverse: bool = False,
    direction: str = FORWARD,
    register: str = REGISTERS[0],
    *,
    max_chars: int = MAX_CHARS,
    max_asked: int = MAX_ASKED,
) -> Query:
    """A query from what a person typed, normalised as the training data was, or an
    ``InputError`` (Chinese and English) saying what is wrong, checked in this order."""
    check_count(n, max_asked)
    if tone_mode not in TONE_MODES:
        raise InputError(
            f"声调模式只能是 {'、'.join(TONE_MODES)}", f"The tone mode is one of {', '.join(TONE_MODES)}."
        )
    check_direction(direction)
    if register not in REGISTERS:
        raise InputError(
            f"语体只能是 {'、'.join(REGISTERS)}", f"The register is one of {', '.join(REGISTERS)}."
        )
    given, _ = line_names(direction)
    line = clean_line(upper, max_chars, given)
    query = Query(
        upper=line,
        n=n,
        tone_mode=tone_mode,
        locks=clean_locks(locks, line, given[0]),
        required_first=clean_chars(required_first, ("藏头字", "The required first character")),
        required_chars=clean_chars(required_chars, ("嵌字", "The required characters")),
        fast=fast,
        diverse=diverse,
        direction=direction,
        register=register,
    )
    if query.required_first is not None and len(query.required_first) != 1:
        raise InputError("藏头只能是一个字", "The required first character must be one character.")
    return query


@dataclass(frozen=True)
class AlternativesQuery:
    """Characters for one position of a lower line (``make_alternatives_query``): ``position``
    counts from 0 in the normalised lines. With ``direction`` ``lower_to_upper`` the lower line
    is the one given and the position is in the upper line (written for it)."""

    upper: str
    lower: str
    position: int
    n: int = 10
    tone_mode: str = "modern"
    locks: str | None = None
    required_first: str | None = None
    required_chars: str | None = None
    direction: str = FORWARD
    rules: bool = True  # False: ranked without the couplet rules (the check's suggestions judge them after)
    pool: int | None = None  # characters scored whole (None: the decoder's ALTERNATIVE_POOL)

    @property
    def reverse(self) -> bool:
        return self.direction == REVERSE

    @property
    def given(self) -> str:
        return self.lower if self.reverse else self.upper

    @property
    def written(self) -> str:
        return self.upper if self.reverse else self.lower


def make_alternatives_query(
    upper: str,
    lower: str,
    position: int,
    n: int = 10,
    tone_mode: str = "modern",
    locks: str | None = None,
    required_first: str | None = None,
    required_chars: str | None = None,
    direction: str = FORWARD,
    *,
    max_chars: int = MAX_CHARS,
    max_asked: int = MAX_ALTERNATIVES,
) -> AlternativesQuery:
    """A query for the characters that may stand at ``position`` of ``lower``, or an
    ``InputError`` (Chinese and English): both lines as :func:`clean_couplet` makes them, the
    position inside the line and not on a punctuation mark, and the constraints of
    :func:`make_query`."""
    if n > max_asked:
        raise InputError(f"最多可以要 {max_asked} 个字", f"At most {max_asked} characters.")
    if n < 1:
        raise InputError("至少要一个字", "Ask for at least one character.")
    check_direction(direction)
    up, low = clean_couplet(upper, lower, max_chars)
    reverse = direction == REVERSE
    given, _ = line_names(direction)
    query = make_query(
        low if reverse else up, 1, tone_mode, locks, required_first, required_chars,
        direction=direction, max_chars=max_chars,
    )  # fmt: skip
    if not 0 <= position < len(low):
        raise InputError(
            f"位置须在 0 到 {len(low) - 1} 之间（从 0 数起），现在是 {position}",
            f"The position must be 0 to {len(low) - 1} (counted from 0), not {position}.",
        )
    if is_punct(query.upper[position]):
        raise InputError(
            f"第 {position + 1} 字对的是{given[0]}的标点「{query.upper[position]}」，"
            "须与之相同，没有别的字可换",
            f"Position {position + 1} mirrors the {given[1][4:].lower()}'s mark {query.upper[position]!r}; "
            "nothing else may stand there.",
        )
    return AlternativesQuery(
        upper=up,
        lower=low,
        position=position,
        n=n,
        tone_mode=query.tone_mode,
        locks=query.locks,
        required_first=query.required_first,
        required_chars=query.required_chars,
        direction=direction,
    )
