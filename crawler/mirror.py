"""A local mirror for tests and benchmarks: both source layouts, served on 127.0.0.1.

``build_site(pairs)`` generates the pages; ``MirrorServer(site)`` serves them with a real
HTTP server. The site has what the crawler must cope with: pagination, 404 links, a
redirect, a page that always answers 500, a page cut off mid-HTML, the same pair on two
pages, prose that is not a couplet (parallel sentences of unequal length, lists, dates),
a GBK page (charset in the header) and a GB18030 page (charset only in a ``<meta>`` tag
that says gb2312), and a robots.txt that forbids a page full of pairs.

``site.expected[spider]`` is the set of pairs a correct crawl of that layout finds:
everything on the allowed pages, once. The pairs are hand-written (``HAND_PAIRS``), or a
sample of the corpus read at run time (``corpus_pairs``); no corpus text is in the repo.
"""

from __future__ import annotations

import gzip
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from crawler.couplet_lines import looks_like_couplet
from crawler.guards import short_words
from crawler.pipelines import invalid_reason, normalise_line
from data.paths import corpus_dir
from data.text import is_han

Pair = tuple[str, str]

# Written for this project, or folk couplets (春联 and the like) in the public domain.
HAND_PAIRS: list[Pair] = [
    ("天增岁月人增寿", "春满乾坤福满门"),
    ("春回大地千山秀", "日照神州万木荣"),
    ("一帆风顺年年好", "万事如意步步高"),
    ("绿柳舒眉辞旧岁", "红梅含笑迎新春"),
    ("瑞雪兆丰年", "东风迎新岁"),
    ("爆竹声声辞旧岁", "梅花点点报新春"),
    ("山清水秀风光好", "人寿年丰喜事多"),
    ("竹报平安", "花开富贵"),
    ("风调雨顺", "国泰民安"),
    ("书山有路勤为径", "学海无涯苦作舟"),
    ("海纳百川，有容乃大", "壁立千仞，无欲则刚"),
    ("风声雨声读书声，声声入耳", "家事国事天下事，事事关心"),
    ("雄鸡，鲤鱼，猪婆肉", "香菇，木耳，曲子耙"),
    ("松涛入梦清", "月色临窗静"),
    ("晨钟敲醒千山月", "暮鼓催开万户灯"),
    ("小院栽花香满径", "南窗读史墨盈池"),
    ("溪声洗尽尘中耳", "山色开扬眼底春"),
    ("一湖烟雨", "半岭松风"),
    ("桃李争春艳", "江山入画新"),
    ("柳岸莺啼三月暖", "荷塘蛙鼓五更凉"),
    ("闲来煮茗邀明月", "醉后题诗写白云"),
    ("古渡斜阳归客远", "长亭芳草故人稀"),
    ("半亩方塘开宝鉴", "一竿修竹拂青云"),
    ("秋水长天，雁字横空书远意", "春山细雨，燕泥衔梦筑新巢"),
    ("灯花结彩", "岁稔呈祥"),
    ("石上清泉流古调", "林间明月照新诗"),
    ("家和万事兴", "人勤百业旺"),
    ("梅开五福", "竹报三多"),
    ("登高望远天地阔", "种德修身日月长"),
    ("江南烟柳千重翠", "塞北风沙万里黄"),
    ("渔火数星江浦静", "钟声几杵寺门幽"),
    ("墨香盈室", "翠色满庭"),
    ("金鸡报晓", "紫燕衔春"),
    ("草色遥看近却无", "花光乍见浓如染"),
    ("门迎百福", "户纳千祥"),
    ("琴心剑胆", "月魄冰魂"),
    ("雨打芭蕉声碎玉", "风摇杨柳影流金"),
    ("一径苔痕侵屐齿", "半帘花影上书窗"),
    ("四海宾朋，同心共醉", "九州风雨，携手偕行"),
    ("青山不墨千秋画", "绿水无弦万古琴"),
    ("鸟语花香春意闹", "山明水秀画图新"),
    ("笔底烟霞生素纸", "胸中丘壑起高楼"),
    ("岁岁平安", "年年有余"),
    ("春风化雨", "桃李芬芳"),
    ("云开见日", "水落知源"),
    ("千年古镇镕新色", "百代长河涌大潮"),  # 镕: in GBK but not in GB2312
    ("杏坛传道", "桂苑育英"),
    ("夜雨剪春韭", "晨霜烹早茶"),
    ("一池荷叶衣无尽", "数亩松花食有余"),
    ("庭前花发三分艳", "案上书开一片香"),
    ("江上清风山间明月", "天边落日塞外孤烟"),
    ("万里江山如画", "一时人物风流"),
    ("竹影扫阶尘不动", "月轮穿沼水无痕"),
    ("春到人间草木知", "风来林下鸟雀喧"),
    ("浅草才能没马蹄", "深林犹可藏龙影"),
    ("红日初升千嶂晓", "白云深处一僧归"),
    ("宁静致远", "淡泊明志"),
    ("花间一壶酒", "月下半床书"),
    ("细雨湿衣看不见", "闲花落地听无声"),
    ("乾坤清气满", "日月大明新"),
]

# Narrative filler: every sentence carries 的 or 了, so none reads as a couplet line.
_PROSE = [
    "这是作者多年前抄录的旧作，今日整理出来，与诸位同好分享。",
    "那年冬天雪下得很大，村口的老先生在祠堂里写了许多春联。",
    "对联讲究字数相等、词性相对、平仄相谐，初学的人往往顾此失彼。",
    "据说这副对联是一位塾师的手笔，后来被刻在了书院的门柱上。",
    "读者来信问起出处，笔者查了几本旧书，仍然没有找到确切的记载。",
]
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


def _ok(text: str, encoding: str = "utf-8", header_charset: str | None = "utf-8") -> Page:
    ctype = "text/html" + (f"; charset={header_charset}" if header_charset else "")
    return Page(200, text.encode(encoding, "xmlcharrefreplace"), {"Content-Type": ctype})


def _gbk_ok(pairs: list[Pair]) -> bool:
    try:
        "".join(up + lo for up, lo in pairs).encode("gbk")
    except UnicodeEncodeError:
        return False
    return True


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# --- the Sina blog layout -------------------------------------------------------------------

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
    articles = _chunks(pairs, per)
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
        if not gbk_done and i >= 2 and _gbk_ok(chunk):
            pages[path] = _ok(_sina_article(title, body, "GBK", meta=False), "gbk", "GBK")
            gbk_done = True
            special["gbk"] = path
        elif i == 3:  # cut off inside the HTML, after the pairs
            page = _sina_article(title, body)
            pages[path] = _ok(page[: page.index("</div></div>")])
            special["truncated"] = path
        else:
            pages[path] = _ok(_sina_article(title, body))
        links.append((path, title))
    # the broken page, a 404, a redirect to an article linked elsewhere, a forbidden page
    pages["/s/blog_broken.html"] = Page(500, b"Internal Server Error", {"Content-Type": "text/plain"})
    pages["/s/blog_moved.html"] = Page(301, b"", {"Location": links[0][0]})
    body = _sina_body(extra, rng, ascii_comma=False)
    pages["/private/blog_hidden.html"] = _ok(_sina_article("不公开", body))
    specials = [
        ("/s/blog_broken.html", "坏页"),
        ("/s/blog_missing.html", "已删除"),
        ("/s/blog_moved.html", "旧址"),
        ("/private/blog_hidden.html", "私密"),
    ]
    per_list = 10
    lists = _chunks(links, per_list)
    lists[0] = lists[0] + specials
    for n, chunk in enumerate(lists, start=1):
        pages[_sina_list_path(n)] = _ok(_sina_list(n, len(lists), chunk))
    return 1


# --- the prose layout -----------------------------------------------------------------------


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
        parts.append(f"<p>{rng.choice(_PROSE)}</p>")
        parts.append(_prose_form(pair, k0 + k))
    parts.append(f"<p>{rng.choice(_PROSE)}</p>")
    look = rng.choice(_LOOKALIKES).split("\n")
    parts.append("".join(f"<p>{escape(x)}</p>" for x in look))
    return "<article>" + "".join(parts) + "</article>"


def _build_prose(
    pages: dict[str, Page], special: dict[str, str], pairs: list[Pair], rng: random.Random, per: int
) -> None:
    articles = _chunks(pairs, per)
    if len(articles) > 1:
        articles[-1] = [*articles[-1], articles[0][-1]]
    links = []
    meta_done = False
    for i, chunk in enumerate(articles):
        path, title = f"/wenzhang/{i + 1}.html", f"联话{i + 1}"
        body = _prose_article(title, chunk, rng, i)
        if not meta_done and i >= 1 and _gbk_ok(chunk):
            # gb2312 in the <meta>, no charset in the header: decoded as GB18030, its superset
            pages[path] = _ok(html_page(title, body, "gb2312"), "gb18030", None)
            meta_done = True
            special["gb18030"] = path
        else:
            pages[path] = _ok(html_page(title, body))
        links.append(path)
    per_index = 10
    groups = _chunks(links, per_index)
    index_paths = ["/wenzhang/index.html"] + [f"/wenzhang/index_{n}.html" for n in range(2, len(groups) + 1)]
    for n, group in enumerate(groups):
        items = "".join(f'<li><a href="{p}">联话</a></li>' for p in group)
        if n == 0:
            items += '<li><a href="/wenzhang/gone.html">已删除</a></li>'
        pager = "".join(f'<a href="{p}">{k + 1}</a> ' for k, p in enumerate(index_paths))
        pages[index_paths[n]] = _ok(
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


# --- a small site for the generic spider (crawler/spiders/site.py) ------------------------

LINK_ROBOTS = "User-agent: *\nDisallow: /lian/private/\nSitemap: /sitemap.xml\n"


def _urlset(paths: list[str]) -> str:
    urls = "".join(f"<url><loc>{{base}}{p}</loc></url>" for p in paths)
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="{_SITEMAP_NS}">{urls}</urlset>'


_SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
# path -> links on the page; every page holds one pair, in the 上联：/下联： layout
LINK_PAGES: dict[str, list[str]] = {
    "/lian/index.html": ["/lian/a.html", "/other/o.html", "/lian/private/p.html", "/lian/index.html"],
    "/lian/a.html": ["/lian/b.html", "/lian/index.html"],  # one hop from the start page
    "/lian/b.html": ["/lian/c.html"],  # two hops
    "/lian/c.html": [],  # three hops
    "/other/o.html": [],  # outside the allow-pattern /lian/
    "/lian/private/p.html": [],  # forbidden by robots.txt
    "/lian/s1.html": ["/lian/s1-next.html"],  # in the sitemap
    "/lian/s1-next.html": [],  # one hop from a sitemap page
    "/lian/%E6%98%A5%E8%81%94.html": [],  # in the sitemap: /lian/春联.html
    "/other/s3.html": [],  # in the sitemap, outside the allow-pattern
    "/lian/private/s4.html": [],  # in the sitemap, forbidden by robots.txt
}
LINK_SITEMAP = ["/lian/s1.html", "/lian/%E6%98%A5%E8%81%94.html", "/other/s3.html", "/lian/private/s4.html"]


@dataclass
class LinkSite:
    """Pages whose pairs are known by path; the sitemap's URLs are written at serve time
    (``with_base``), since a sitemap holds absolute URLs."""

    pages: dict[str, Page]
    pair_at: dict[str, Pair]

    def with_base(self, base: str) -> Site:
        pages = dict(self.pages)
        for path in ("/sitemap.xml", "/sitemap-lian.xml"):
            pages[path] = Page(
                200, self.pages[path].body.replace(b"{base}", base.encode()), pages[path].headers
            )
        pairs = set(self.pair_at.values())
        return Site(pages, {"site": "/lian/index.html"}, {"site": pairs}, set(), {"site": 0})


def build_link_site(pairs: list[Pair]) -> LinkSite:
    """A site for the generic spider: a start page with links one, two and three hops deep,
    links outside the allow-pattern and to robots-forbidden pages, and a sitemap index
    (named in robots.txt) whose urlset lists pages in and outside the pattern."""
    pairs = list(dict.fromkeys(pairs))
    if len(pairs) < len(LINK_PAGES):
        raise ValueError(f"need at least {len(LINK_PAGES)} pairs")
    xml = {"Content-Type": "application/xml"}
    index = (
        f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="{_SITEMAP_NS}">'
        "<sitemap><loc>{base}/sitemap-lian.xml</loc></sitemap></sitemapindex>"
    )
    pages: dict[str, Page] = {
        "/robots.txt": Page(200, LINK_ROBOTS.encode(), {"Content-Type": "text/plain"}),
        "/sitemap.xml": Page(200, index.encode(), xml),
        "/sitemap-lian.xml": Page(200, _urlset(LINK_SITEMAP).encode(), xml),
    }
    pair_at: dict[str, Pair] = {}
    for (path, links), (up, lo) in zip(LINK_PAGES.items(), pairs, strict=False):
        title = f"联话 {path}"
        items = "".join(f'<li><a href="{escape(href)}">下一篇</a></li>' for href in links)
        body = f"<h1>{escape(title)}</h1><p>{_PROSE[0]}</p><p>上联：{up}</p><p>下联：{lo}</p><ul>{items}</ul>"
        pages[path] = _ok(html_page(title, body))
        pair_at[path] = (up, lo)
    return LinkSite(pages, pair_at)


def usable(pair: Pair) -> bool:
    """A pair the mirror can plant: valid, already normal, Han with at most ，、； between."""
    up, lo = pair
    return (
        invalid_reason(up, lo) is None
        and normalise_line(up) == up
        and normalise_line(lo) == lo
        and all(is_han(c) or c in "，、；" for c in up + lo)
    )


def corpus_pairs(n: int, seed: int = 0, path: Path | None = None) -> list[Pair] | None:
    """A random sample of n usable pairs from the corpus, or None when it is absent."""
    path = path or corpus_dir() / "wb14123_train.tsv.gz"
    if not path.exists():
        return None
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    sample: list[Pair] = []
    for i in random.Random(seed).sample(range(len(lines)), len(lines)):  # a shuffled order
        parts = lines[i].split("\t")
        if len(parts) == 2 and usable((parts[0], parts[1])):
            sample.append((parts[0], parts[1]))
            if len(sample) == n:
                break
    return sample


# --- the server -----------------------------------------------------------------------------


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a crawler killed mid-request resets its connections: expected in the tests


class MirrorServer:
    """Serves a Site on 127.0.0.1 (a free port) from a thread; counts hits per path."""

    def __init__(self, site: Site, latency: float = 0.0, port: int = 0, held: bool = False) -> None:
        """``latency``: seconds added to every answer. ``held``: answer nothing until
        ``release()`` (at most 60 s), so that several crawlers start at the same moment."""
        self.site = site
        self.latency = latency
        self._open = threading.Event()
        if not held:
            self._open.set()
        self.hits: Counter[str] = Counter()
        self.agents: Counter[str] = Counter()
        self.first_hit: float | None = None  # time.monotonic() of the first and last request
        self.last_hit: float | None = None
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with mirror._lock:
                    mirror.hits[path] += 1
                    mirror.agents[self.headers.get("User-Agent", "")] += 1
                mirror._open.wait(timeout=60)
                with mirror._lock:
                    mirror.first_hit = mirror.first_hit or time.monotonic()
                if mirror.latency:
                    time.sleep(mirror.latency)
                page = mirror.site.pages.get(path) or Page(404, b"Not Found", {"Content-Type": "text/plain"})
                self.send_response(page.status)
                for key, value in page.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(page.body)))
                self.end_headers()
                self.wfile.write(page.body)
                mirror.last_hit = time.monotonic()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def release(self) -> None:
        self._open.set()

    def start(self) -> MirrorServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="mirror", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread:
            self._thread.join()

    def __enter__(self) -> MirrorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
