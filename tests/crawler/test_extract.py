"""Extraction on saved, hand-written HTML: pure functions, no network."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawler.couplet_lines import looks_like_couplet
from crawler.extract import prose_pairs, sina_pairs
from crawler.pages import prose_article, sina_article, sina_list_links

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_sina_list_links_articles_and_pages() -> None:
    base = "http://blog.sina.com.cn/s/articlelist_1195052695_2_1.html"
    articles, pages = sina_list_links(fixture("sina_list.html"), base)
    assert articles == [
        "http://blog.sina.com.cn/s/blog_473af4970102a001.html",
        "http://blog.sina.com.cn/s/blog_473af4970102a002.html",
    ]  # relative links resolved, the duplicate link once, the side bar's link not taken
    assert pages == [
        "http://blog.sina.com.cn/s/articlelist_1195052695_2_2.html",
        "http://blog.sina.com.cn/s/articlelist_1195052695_2_3.html",
    ]


def test_sina_article_pairs_in_order_with_every_separator() -> None:
    article = sina_article(fixture("sina_article.html"))
    assert article.title == "散叶（一）"
    pairs = [(p.upper, p.lower) for p in sina_pairs(article.text)]
    assert pairs == [
        ("天增岁月人增寿", "春满乾坤福满门"),
        ("绿柳舒眉辞旧岁", "红梅含笑迎新春"),  # after a zero-width space
        ("竹报平安", "花开富贵"),
        ("风调雨顺", "国泰民安"),  # after |
        ("海纳百川，有容乃大", "壁立千仞，无欲则刚"),  # after a space
        ("书山有路勤为径", "学海无涯苦作舟"),  # text outside any <p>
        ("晨钟敲醒千山月", "暮鼓催开万户灯"),  # &nbsp; around
        ("春风得意", "秋雨"),  # malformed: extracted as written, the validate pipeline drops it
        ("溪声洗尽尘中耳", "山色开扬眼底春"),
    ]  # nothing from <script>, in the head or in the body
    snippets = [p.snippet for p in sina_pairs(article.text)]
    assert snippets[0] == "天增岁月人增寿〓春满乾坤福满门◎"


def test_sina_pairs_ignore_zero_width_inside_lines() -> None:
    pairs = sina_pairs("天增\u200b岁月〓春满\ufeff乾坤◎")
    assert [(p.upper, p.lower) for p in pairs] == [("天增岁月", "春满乾坤")]


def test_prose_article_finds_the_three_forms_and_nothing_else() -> None:
    article = prose_article(fixture("prose_article.html"))
    assert article.title == "乡间趣对"
    found = [(p.upper, p.lower, p.form) for p in prose_pairs(article.text)]
    assert sorted(found) == sorted(
        [
            ("雄鸡，鲤鱼，猪婆肉", "香菇，木耳，曲子耙", "lianyue"),
            ("风声雨声读书声，声声入耳", "家事国事天下事，事事关心", "shangxia"),
            ("青山不墨千秋画", "绿水无弦万古琴", "shangxia"),
            ("春回大地千山秀", "日照神州万木荣", "adjacent"),
        ]
    )


def test_prose_snippet_is_the_raw_text() -> None:
    pairs = prose_pairs("联曰：雄鸡，鲤鱼，猪婆肉；香菇，木耳，曲子耙。")
    assert pairs[0].snippet == "联曰：雄鸡，鲤鱼，猪婆肉；香菇，木耳，曲子耙"


@pytest.mark.parametrize(
    "text",
    [
        "他喜欢读书写字，\n她喜欢画画。",  # parallel, unequal length
        "二〇一八年十月\n二〇一九年三月",  # dates
        "一、春联\n二、寿联",  # a list
        "梅、兰、竹、菊\n春、夏、秋、冬",  # a list in one line
        "今日天晴风暖\n我们出门踏青",  # everyday prose
        "上联：春眠不觉晓，下联：处处闻啼鸟鸣。",  # marked, but unequal
        "联曰：春眠不觉晓，处处闻啼鸟鸣。",  # marked, but unequal halves
        "对曰：不知也。",
        "天增岁月人增寿\n人增福寿岁增春",  # reuses characters of the upper line
        "山山水水处处\n红绿红绿年年",  # repeats that do not mirror
        "春回大地千山秀\n日照神州，万木荣",  # punctuation not mirrored
    ],
)
def test_prose_lookalikes_are_rejected(text: str) -> None:
    assert prose_pairs(text) == []


def test_a_line_belongs_to_one_pair_only() -> None:
    text = "春回大地千山秀\n日照神州万木荣\n风和海晏三江碧"
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [("春回大地千山秀", "日照神州万木荣")]


def test_looks_like_couplet_on_the_human_test_set() -> None:
    """The bare-line rule is strict, but still takes most real pairs (measured: 94%)."""
    sample = [
        ("风弦未拨心先乱", "夜幕已沉梦更闲"),
        ("花梦粘于春袖口", "莺声溅落柳枝头"),
        ("晚风摇树树还挺", "晨露润花花更红"),
    ]
    assert all(looks_like_couplet(u, lo) for u, lo in sample)


def test_text_is_normalised_before_extraction() -> None:
    """Traditional labels, ASCII commas and inserted pinyin (hand-written example)."""
    text = "上聯(lián):此處既非靈山,畢竟什麼世界。\n下聯(lián):其中如無活佛,何用這樣莊嚴。"
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [
        ("此处既非灵山，毕竟什么世界", "其中如无活佛，何用这样庄严")
    ]


def test_rows_of_a_poem_are_not_paired() -> None:
    """登高 (real rows): four equal rows are a poem, not two couplets."""
    rows = ["风急天高猿啸哀,渚清沙白鸟飞回。", "无边落木萧萧下,不尽长江滚滚来。"]
    rows += ["万里悲秋常作客,百年多病独登台。", "艰难苦恨繁霜鬓,潦倒新停浊酒杯。"]
    poem = "\n".join(rows)
    assert prose_pairs(poem) == []
    assert len(prose_pairs("\n".join(poem.split("\n")[2:]))) == 1  # two rows alone still pair


def test_quoted_pairs_on_a_line_that_cues_a_couplet() -> None:
    """From a real news page (huainannet.com): quotes after a cue word are pairs; a quote
    on a line without 联 or 对 is not, nor a repeated cry."""
    text = "“喜居宝地千年旺,福照家门万事兴”、“吉羊踏雪去,金猴报春来”……一副副春联\n"
    text += "他说:“路遥知马力,日久见人心”\n众人都说:“好对,好对。”"
    assert [(p.upper, p.lower, p.form) for p in prose_pairs(text)] == [
        ("喜居宝地千年旺", "福照家门万事兴", "quoted"),
        ("吉羊踏雪去", "金猴报春来", "quoted"),
    ]
