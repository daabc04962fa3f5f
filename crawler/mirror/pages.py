"""A mirror site as data: its pages (``Page``), the site with the pairs a correct crawl finds
(``Site``), and the helpers that write a page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from crawler.mirror.pairs import Pair

# Narrative filler: every sentence carries 的 or 了, so none reads as a couplet line.
PROSE = [
    "这是作者多年前抄录的旧作，今日整理出来，与诸位同好分享。",
    "那年冬天雪下得很大，村口的老先生在祠堂里写了许多春联。",
    "对联讲究字数相等、词性相对、平仄相谐，初学的人往往顾此失彼。",
    "据说这副对联是一位塾师的手笔，后来被刻在了书院的门柱上。",
    "读者来信问起出处，笔者查了几本旧书，仍然没有找到确切的记载。",
]


@dataclass
class Page:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Site:
    pages: dict[str, Page]
    start: dict[str, str]  # spider name -> start path
    expected: dict[str, set[Pair]]  # spider name -> every pair a correct crawl yields
    forbidden: set[Pair]  # pairs only on robots-disallowed pages
    invalid: dict[str, int]  # spider name -> malformed pairs on its pages (dropped by validation)
    special: dict[str, str] = field(default_factory=dict)  # "gbk", "gb18030", "truncated" -> path

    @property
    def n_pages(self) -> int:
        return sum(p.status == 200 for path, p in self.pages.items() if path.endswith(".html"))

    def summary(self) -> dict[str, int]:
        return {
            "pages": self.n_pages,
            "pairs_sina": len(self.expected["sina"]),
            "pairs_prose": len(self.expected["prose"]),
        }


def html_page(title: str, body: str, charset: str = "utf-8", meta: bool = True) -> str:
    head = f'<meta http-equiv="Content-Type" content="text/html; charset={charset}">' if meta else ""
    return f"<!DOCTYPE html><html><head>{head}<title>{escape(title)}</title></head><body>{body}</body></html>"


def ok_page(text: str, encoding: str = "utf-8", header_charset: str | None = "utf-8") -> Page:
    ctype = "text/html" + (f"; charset={header_charset}" if header_charset else "")
    return Page(200, text.encode(encoding, "xmlcharrefreplace"), {"Content-Type": ctype})


def gbk_ok(pairs: list[Pair]) -> bool:
    try:
        "".join(up + lo for up, lo in pairs).encode("gbk")
    except UnicodeEncodeError:
        return False
    return True


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
