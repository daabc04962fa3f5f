"""Checks of user text before it reaches the model or the database.

Every refusal is an HTTP 422 whose message says, in Chinese and in English, what is wrong.
"""

from __future__ import annotations

import re
import unicodedata

from fastapi import HTTPException, status

from data.normalize import Normalizer
from data.text import is_han, is_punct

_HTML = re.compile(r"<\s*/?\s*[A-Za-z!][^>]*>|&#?\w+;")
LOCK_FREE = "_＿"  # a free position in a lock pattern
_normalise = Normalizer()  # its tables fill lazily: nothing is loaded at import


def refuse(zh: str, en: str) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=f"{zh} / {en}")


def clean_line(raw: str, max_chars: int, name: tuple[str, str] = ("上联", "The upper line")) -> str:
    """The line normalised as the training data was (data.normalize: spaces, compatibility
    forms, full-width marks, simplified characters), or a 422 saying what is wrong."""
    zh, en = name
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co") and not ch.isspace() for ch in raw):
        raise refuse(f"{zh}含有控制字符", f"{en} contains control characters.")
    if _HTML.search(raw):
        raise refuse(f"{zh}不能含有 HTML 标记", f"{en} must not contain HTML.")
    line = _normalise(raw)
    if not line:
        raise refuse(f"{zh}不能为空", f"{en} is empty.")
    if any(ch.isascii() and ch.isalpha() for ch in line):
        raise refuse(f"{zh}只能用汉字和中文标点，不能有拉丁字母", f"{en} must not contain Latin letters.")
    if any(unicodedata.category(ch) == "Nd" for ch in line):
        raise refuse(
            f"{zh}不能有阿拉伯数字，请写成汉字", f"{en} must not contain digits; write them in Chinese."
        )
    bad = "".join(dict.fromkeys(ch for ch in line if not (is_han(ch) or is_punct(ch))))
    if bad:
        raise refuse(
            f"{zh}含有不支持的字符：{bad}",
            f"{en} contains unsupported characters (only Chinese characters and punctuation): {bad}",
        )
    if not any(is_han(ch) for ch in line):
        raise refuse(f"{zh}至少要有一个汉字", f"{en} needs at least one Chinese character.")
    if len(line) > max_chars:
        raise refuse(
            f"{zh}最多 {max_chars} 个字（现在 {len(line)} 个）",
            f"{en} has {len(line)} characters; at most {max_chars}.",
        )
    return line


def clean_locks(raw: str | None, upper: str) -> str | None:
    """A lock pattern as long as the upper line: ``_`` free, a Han character fixed there.
    One that locks nothing is no constraint (None), but it too must be as long as the line."""
    if raw is None or not raw.strip():
        return None
    pattern = "".join("_" if ch in LOCK_FREE else ch for ch in _normalise(raw))
    if len(pattern) != len(upper):
        raise refuse(
            f"锁定模式要和上联一样长（{len(upper)} 个字，用 _ 表示不锁定）",
            f"The lock pattern must be as long as the upper line ({len(upper)}), with _ for free positions.",
        )
    for i, ch in enumerate(pattern):
        if ch != "_" and not is_han(ch) and ch != upper[i]:
            raise refuse(f"锁定的字必须是汉字：{ch}", f"A locked character must be a Chinese character: {ch}")
    return pattern if pattern.strip("_") else None


def clean_chars(raw: str | None, name: tuple[str, str]) -> str | None:
    """Required characters (藏头 / 嵌字): Chinese characters only."""
    if raw is None:
        return None
    chars = _normalise(raw)
    if not chars:
        return None
    zh, en = name
    if not all(is_han(ch) for ch in chars):
        raise refuse(f"{zh}只能是汉字", f"{en} must be Chinese characters.")
    return chars


def clean_couplet(upper: str, lower: str, max_chars: int) -> tuple[str, str]:
    """Both lines cleaned as :func:`clean_line` does, and of one length, or a 422."""
    up = clean_line(upper, max_chars)
    low = clean_line(lower, max_chars, ("下联", "The lower line"))
    if len(up) != len(low):
        raise refuse(
            f"上联和下联要一样长（上联 {len(up)} 个字，下联 {len(low)} 个字）",
            f"The upper and lower lines must be the same length ({len(up)} and {len(low)}).",
        )
    return up, low
