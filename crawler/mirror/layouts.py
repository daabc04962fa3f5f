"""The mirror's two source layouts, the Sina blog's and the prose articles', built from pairs.

``build_site(pairs)`` generates the pages, with what the crawler must cope with: pagination,
404 links, a redirect, a page that always answers 500, a page cut off mid-HTML, the same pair
on two pages, prose that is not a couplet (parallel sentences of unequal length, lists,
dates), a GBK page (charset in the header) and a GB18030 page (charset only in a ``<meta>``
tag that says gb2312), and a robots.txt that forbids a page full of pairs.
"""

from __future__ import annotations

import random
from html import escape

from crawler.couplet_lines import looks_like_couplet
from crawler.guards import short_words
from crawler.mirror.pages import PROSE, Page, Site, chunks, gbk_ok, html_page, ok_page
from crawler.mirror.pairs import Pair

# Lookalikes: read as parallel, but are not couplets; a correct extractor finds nothing here.
_LOOKALIKES = [
    "他喜欢读书写字，\n她喜欢画画。",
    "二〇一八年十月\n二〇一九年三月",
    "一、春联\n二、寿联\n三、挽联",
    "梅、兰、竹、菊\n春、夏、秋、冬",
    "今日天晴风暖\n我们出门踏青",
    "上联：春眠不觉晓，下联：处处闻啼鸟鸣。",
    "对曰：不知也。",
    "第一章 楹联的起源\n第二章 楹联的格律",
]
_SEPARATORS = ["", "\u200b", "|", " ", "\u200b|\u200b"]
ROBOTS = "User-agent: *\nDisallow: /private/\n"


SINA_UID = "1195052695"


def _sina_list_path(n: int) -> str:
    return f"/s/articlelist_{SINA_UID}_2_{n}.html"


def _sina_body(pairs: list[Pair], rng: random.Random, ascii_comma: bool) -> str:
    lines, i = [], 0
    while i < len(pairs):
        k = rng.randint(1, 3)
        parts = []
        for up, lo in pairs[i : i + k]:
            if ascii_comma and "，" in up:
                up, lo = up.replace("，", ","), lo.replace("，", ",")  # folded back by normalisation
            parts.append(f"{escape(up)}〓{escape(lo)}◎")
        lines.append(rng.choice(_SEPARATORS).join(parts))
        i += k
    tags = ["<p>{}</p>", "<div>{}</div>", "{}<br>", "<p>&nbsp;{}&nbsp;</p>"]
    return "".join(rng.choice(tags).format(line) for line in lines)


def _sina_article(title: str, body: str, charset: str = "utf-8", meta: bool = True) -> str:
    return html_page(
        title,
        '<div id="articlebody"><div class="articalTitle">'
        f'<h2 class="titName SG_txta">{escape(title)}</h2></div>'
        f'<div class="articalContent">{body}</div></div>',
        charset,
        meta,
    )


def _sina_list(n: int, n_pages: int, links: list[tuple[str, str]]) -> str:
    items = "".join(
        f'<div class="articleCell SG_j_linedot1"><p class="atc_main SG_dot">'
        f'<span class="atc_title"><a title="" target="_blank" href="{href}">{escape(t)}</a></span></p></div>'
        for href, t in links
    )
    pager = "".join(
        f'<li class="SG_pgon">{k}</li>' if k == n else f'<li><a href="{_sina_list_path(k)}">{k}</a></li>'
        for k in range(1, n_pages + 1)
    )
    nxt = (
        f'<li class="SG_pgnext"><a href="{_sina_list_path(n + 1)}">下一页&gt;</a></li>' if n < n_pages else ""
    )
    return html_page(
        f"博文目录_梨味斋散叶_第{n}页",
        f'<div class="articleList">{items}</div><div class="SG_page"><ul class="SG_pages">'
        f"<span>共{n_pages}页</span>{pager}{nxt}</ul></div>",
    )


def _build_sina(
    pages: dict[str, Page],
    special: dict[str, str],
    pairs: list[Pair],
    extra: list[Pair],
    rng: random.Random,
    per: int,
) -> int:
    """Sina layout; returns the number of malformed pairs planted. ``extra``: two pairs for
    the robots-forbidden page."""
    articles = chunks(pairs, per)
    if len(articles) > 1:  # a pair that is on two pages
        articles[-1] = [*articles[-1], articles[0][0]]
    links: list[tuple[str, str]] = []
    gbk_done = ascii_done = False
    for i, chunk in enumerate(articles):
        path, title = f"/s/blog_{SINA_UID}{i:06d}.html", f"散叶 第{i + 1}篇"
        ascii_comma = not ascii_done and any("，" in up for up, _ in chunk)
        ascii_done |= ascii_comma
        body = "<p>梨味斋散叶，录旧作若干。</p>" + _sina_body(chunk, rng, ascii_comma)
        if i == 0:
            body += "<p>春风得意〓秋雨◎</p>"  # malformed: lines of unequal length
        if not gbk_done and i >= 2 and gbk_ok(chunk):
            pages[path] = ok_page(_sina_article(title, body, "GBK", meta=False), "gbk", "GBK")
            gbk_done = True
            special["gbk"] = path
        elif i == 3:  # cut off inside the HTML, after the pairs
            page = _sina_article(title, body)
            pages[path] = ok_page(page[: page.index("</div></div>")])
            special["truncated"] = path
        else:
            pages[path] = ok_page(_sina_article(title, body))
        links.append((path, title))
    # the broken page, a 404, a redirect to an article linked elsewhere, a forbidden page
    pages["/s/blog_broken.html"] = Page(500, b"Internal Server Error", {"Content-Type": "text/plain"})
    pages["/s/blog_moved.html"] = Page(301, b"", {"Location": links[0][0]})
    body = _sina_body(extra, rng, ascii_comma=False)
    pages["/private/blog_hidden.html"] = ok_page(_sina_article("不公开", body))
    specials = [
        ("/s/blog_broken.html", "坏页"),
        ("/s/blog_missing.html", "已删除"),
        ("/s/blog_moved.html", "旧址"),
        ("/private/blog_hidden.html", "私密"),
    ]
    per_list = 10
    lists = chunks(links, per_list)
    lists[0] = lists[0] + specials
    for n, chunk in enumerate(lists, start=1):
        pages[_sina_list_path(n)] = ok_page(_sina_list(n, len(lists), chunk))
    return 1


def _prose_form(pair: Pair, k: int) -> str:
    up, lo = pair
    forms = ["shangxia", "lianyue", "adjacent"]
    form = forms[k % 3]
    if form == "lianyue" and any(c in up + lo for c in "；。！？"):
        form = "shangxia"
    if form == "adjacent" and not looks_like_couplet(up, lo):
        form = "shangxia"
    if form == "lianyue":
        return f"<p>相传此联出自乡间，联曰：{up}；{lo}。众人皆笑了。</p>"
    if form == "adjacent" and short_words(up, lo):
        return f"<p>{up}；</p><p>{lo}。</p>"  # four characters a line: punctuated, as pages print them
    if form == "adjacent":
        return f"<p>{up}</p><p>{lo}</p>"
    if k % 2:
        return f"<p>上联：{up}</p><p>下联：{lo}</p>"
    return f"<p>有人出了上联，又有人对了下联。上联是“{up}”，下联是“{lo}”。</p>"


def _prose_article(title: str, pairs: list[Pair], rng: random.Random, k0: int) -> str:
    parts = [f"<h1>{escape(title)}</h1>"]
    for k, pair in enumerate(pairs):
        parts.append(f"<p>{rng.choice(PROSE)}</p>")
        parts.append(_prose_form(pair, k0 + k))
    parts.append(f"<p>{rng.choice(PROSE)}</p>")
    look = rng.choice(_LOOKALIKES).split("\n")
    parts.append("".join(f"<p>{escape(x)}</p>" for x in look))
    return "<article>" + "".join(parts) + "</article>"


def _build_prose(
    pages: dict[str, Page], special: dict[str, str], pairs: list[Pair], rng: random.Random, per: int
) -> None:
    articles = chunks(pairs, per)
    if len(articles) > 1:
        articles[-1] = [*articles[-1], articles[0][-1]]
    links = []
    meta_done = False
    for i, chunk in enumerate(articles):
        path, title = f"/wenzhang/{i + 1}.html", f"联话{i + 1}"
        body = _prose_article(title, chunk, rng, i)
        if not meta_done and i >= 1 and gbk_ok(chunk):
            # gb2312 in the <meta>, no charset in the header: decoded as GB18030, its superset
            pages[path] = ok_page(html_page(title, body, "gb2312"), "gb18030", None)
            meta_done = True
            special["gb18030"] = path
        else:
            pages[path] = ok_page(html_page(title, body))
        links.append(path)
    per_index = 10
    groups = chunks(links, per_index)
    index_paths = ["/wenzhang/index.html"] + [f"/wenzhang/index_{n}.html" for n in range(2, len(groups) + 1)]
    for n, group in enumerate(groups):
        items = "".join(f'<li><a href="{p}">联话</a></li>' for p in group)
        if n == 0:
            items += '<li><a href="/wenzhang/gone.html">已删除</a></li>'
        pager = "".join(f'<a href="{p}">{k + 1}</a> ' for k, p in enumerate(index_paths))
        pages[index_paths[n]] = ok_page(
            html_page("联话目录", f"<ul>{items}</ul><div class='pager'>{pager}</div>")
        )


def build_site(pairs: list[Pair], *, per_article: int = 6, seed: int = 0) -> Site:
    """Both layouts from distinct, valid, normalised pairs: 60% Sina, the rest prose,
    two more for the robots-forbidden page."""
    pairs = list(dict.fromkeys(pairs))
    if len(pairs) < 12:
        raise ValueError("need at least 12 pairs")
    rng = random.Random(seed)
    forbidden, pairs = pairs[:2], pairs[2:]
    cut = len(pairs) * 3 // 5
    sina, prose = pairs[:cut], pairs[cut:]
    pages: dict[str, Page] = {"/robots.txt": Page(200, ROBOTS.encode(), {"Content-Type": "text/plain"})}
    special: dict[str, str] = {}
    invalid = _build_sina(pages, special, sina, forbidden, rng, per_article)
    _build_prose(pages, special, prose, rng, max(2, per_article // 2))
    return Site(
        pages=pages,
        start={"sina": _sina_list_path(1), "prose": "/wenzhang/index.html"},
        expected={"sina": set(sina), "prose": set(prose)},
        forbidden=set(forbidden),
        invalid={"sina": invalid, "prose": 0},
        special=special,
    )
