"""Guards: what on a page is never a couplet. Pure functions on normalised text.

* page chrome: login links, "related articles", comment boxes, copyright lines;
* menus: runs of short lines without punctuation (首页 / 新闻中心 / 产品展示 ...);
* poems and proverbs: a page that names proverbs or poems (谚语, 俗话, 律诗, 绝句 ...)
  more often than couplets gives no pair from the weak rules (bare lines, one-line
  pairs), and the lines right after a poem's title or author line are not paired;
  a poem's even rows rhyme (``one_rhyme``), the lower lines of a list of couplets do not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pypinyin import Style, pinyin

from data.text import is_han, is_punct

# Words of page chrome: navigation, account links, comment and "related" boxes, footers.
_CHROME = re.compile(
    "登录|登陆|注册|找回密码|忘记密码|退出登录|相关文章|相关阅读|相关推荐|相关内容|网友评论|发表评论|"
    "评论区|我要评论|上一篇|下一篇|上一页|下一页|返回首页|网站首页|设为首页|加入收藏|版权所有|"
    "免责声明|联系我们|关于我们|网站地图|热门文章|推荐阅读|猜你喜欢|分享到|阅读全文|点击查看|"
    "责任编辑|浏览次数|阅读次数|扫一扫|二维码|客户端|广告合作|投稿"
)
# Words that say a page is about couplets, and words that say it is about something else.
COUPLET_WORDS = re.compile("对联|春联|楹联|上联|下联|横批|联语|门联|寿联|挽联|喜联|婚联|此联|一联|对子|联曰")
OTHER_WORDS = re.compile(
    "谚语|俗语|俗话|格言|名言|警句|歇后语|成语|古诗|律诗|绝句|七律|五律|七绝|五绝|唐诗|宋词|诗词|这首诗|全诗|诗句"
)
# A poem's author line (【唐】杜甫, 唐·杜甫, （唐）杜甫), maybe after its title (《登高》【唐】杜甫).
_POEM_HEAD = re.compile(
    r"^(?:《[^》]{1,20}》\s*)?[【〔（]?[秦汉晋魏隋唐宋元明清][代朝]?[】〕）·]\s*[\u4e00-\u9fff]{2,4}$"
)
MENU_RUN = 3  # this many short unpunctuated lines in a row are a menu
MENU_LINE = 4  # characters at most in a menu entry


def is_chrome(line: str) -> bool:
    """A line of page chrome (找回密码, 立即注册, 相关文章, 网友评论 ...): never half of a pair."""
    return bool(_CHROME.search(line))


def page_topic(text: str) -> str:
    """``couplet`` when the page names couplets more often than proverbs or poems,
    ``other`` when the other way round, ``unknown`` when it names neither."""
    couplet, other = len(COUPLET_WORDS.findall(text)), len(OTHER_WORDS.findall(text))
    if couplet > other:
        return "couplet"
    return "other" if other else "unknown"


def is_poem_head(line: str) -> bool:
    """A poem's author line (【唐】杜甫, 唐·杜甫), maybe after its 《title》: the rows after it
    are the poem's."""
    return bool(_POEM_HEAD.match(line.strip()))


_MEDIALS = ("i", "u", "v")
_RHYME_OF = {"n": "en", "ng": "eng", "ong": "eng", "v": "i"}  # the wide rhymes of 中华新韵


def rhyme(ch: str) -> str:
    """The rhyme of a character's usual reading, its medial left out, so 光 and 乡 rhyme (ang),
    流 and 楼 (ou), 春 and 人 (en), 龙 and 灯 (eng); "" for a character without a reading."""
    if not is_han(ch):
        return ""
    final = pinyin(ch, style=Style.FINALS, strict=True)[0][0]  # 流 iou, 春 uen, 云 vn
    if len(final) > 1 and final[0] in _MEDIALS:
        final = final[1:]
    return _RHYME_OF.get(final, final)


def one_rhyme(lines: Sequence[str]) -> bool:
    """Two or more lines whose last characters all rhyme: a poem's even rows (白日依山尽 /
    黄河入海流 / 欲穷千里目 / 更上一层楼: 流, 楼), not the lower lines of a list of couplets."""
    rhymes = {rhyme(line[-1]) if line else "" for line in lines}
    return len(lines) >= 2 and len(rhymes) == 1 and "" not in rhymes


def short_words(upper: str, lower: str) -> bool:
    """Two lines of at most ``MENU_LINE`` characters and no punctuation at all (中秋对联 /
    注明出处, a title split at its space; 帐心大字 / 永垂干古, words of a sentence): a
    heading, a label or a menu's two entries, too weak to be read as a couplet's halves
    (``menu_rows`` takes three or more such lines for a menu). Four-character couplets
    printed as bare lines carry their ；/。 (楼前芳草； / 江上烟波。)."""
    return all(0 < len(line) <= MENU_LINE and not any(map(is_punct, line)) for line in (upper, lower))


def menu_rows(lines: Sequence[str | None]) -> set[int]:
    """Indexes of lines in a run of ``MENU_RUN`` or more short lines without punctuation:
    a menu or a tag cloud, whose entries are not couplet halves."""
    rows: set[int] = set()
    run: list[int] = []
    for i, line in enumerate([*lines, None]):
        if line is not None and 0 < len(line) <= MENU_LINE and not any(map(is_punct, line)):
            run.append(i)
            continue
        if len(run) >= MENU_RUN:
            rows.update(run)
        run = []
    return rows
