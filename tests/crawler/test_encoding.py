"""Pages in GBK and GB18030 are decoded right, from the header or from a <meta> tag."""

from __future__ import annotations

from scrapy.http import HtmlResponse

from crawler.extract import prose_pairs, sina_pairs
from crawler.pages import prose_article, sina_article

# 镕 and 堃 are in GBK/GB18030 but not in GB2312: a GB2312 decoder would garble them.
# 𠀀 (U+20000) has only a four-byte GB18030 code: a strict GBK decoder would garble it.
SINA = (
    '<html><body><div class="articalTitle"><h2>散叶</h2></div><div class="articalContent">'
    "<p>千年古镇镕新色〓百代长河涌大潮◎</p></div></body></html>"
)
PROSE = (
    '<html><head><meta http-equiv="Content-Type" content="text/html; charset=gb2312"></head>'
    "<body><article><h1>𠀀</h1><p>联曰：堃舆万象新；日月千秋照。</p></article></body></html>"
)


def test_gbk_from_the_content_type_header() -> None:
    response = HtmlResponse(
        "http://127.0.0.1/a.html",
        body=SINA.encode("gbk"),
        headers={"Content-Type": "text/html; charset=GBK"},
    )
    pairs = sina_pairs(sina_article(response.text).text)
    assert [(p.upper, p.lower) for p in pairs] == [("千年古镇镕新色", "百代长河涌大潮")]


def test_gb18030_from_a_meta_tag_that_says_gb2312() -> None:
    response = HtmlResponse("http://127.0.0.1/b.html", body=PROSE.encode("gb18030"))
    # w3lib names the decoder "gb18030" before 2.6 and "gbk" (the WHATWG label) since;
    # either way the four-byte codes must come through.
    assert response.encoding in {"gb18030", "gbk"}
    assert "<h1>𠀀</h1>" in response.text
    pairs = prose_pairs(prose_article(response.text).text)
    assert [(p.upper, p.lower) for p in pairs] == [("堃舆万象新", "日月千秋照")]
