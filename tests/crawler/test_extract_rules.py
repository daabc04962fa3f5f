"""The prose extraction rules of issue 29, each on its own hand-written examples, and the
guards: pages with no couplet give no pair."""

from __future__ import annotations

import pytest

from crawler.couplet_lines import looks_like_couplet, may_end_level, may_end_oblique
from crawler.cued_pairs import cued_line_pairs, example_pairs, names_couplet, run_on
from crawler.extract import prose_pairs
from crawler.guards import is_chrome, is_poem_head, menu_rows, one_rhyme, page_topic, rhyme, short_words
from crawler.list_pairs import dun_halves, one_line_pairs, unpunctuated_couplets
from crawler.page_text import join_broken_quotes, normalise_text
from crawler.stories import story_halves, story_pairs


def pairs(text: str) -> list[tuple[str, str, str]]:
    return [(p.upper, p.lower, p.form) for p in prose_pairs(text)]


# --- stories --------------------------------------------------------------------------


def test_story_cued_upper_and_lower_with_narration_between() -> None:
    text = (
        "先生出了个上联：\n"
        "春风吹绿千山柳，\n"
        "众人想了半天，都说对不出来。过了一会儿，一个学童站起来，对了个下句：\n"
        "细雨润红万树花。\n"
        "先生连声称妙。"
    )
    assert pairs(text) == [("春风吹绿千山柳", "细雨润红万树花", "story")]


def test_story_upper_ends_at_its_semicolon_and_lower_after_dui_yue() -> None:
    text = "老者念出的上联是：\n山高月小水流急；少年随即应声对曰：天阔云低雁过迟。老者大笑。"
    assert pairs(text) == [("山高月小水流急", "天阔云低雁过迟", "story")]


def test_story_quoted_halves_in_speech() -> None:
    text = "皇上说道：“朕的上联是：‘东风送暖，桃李争春花满园。’”\n"
    text += "大臣想了想，答道：“此联可对：‘北雁传书，江山入梦月临窗。’”"
    assert pairs(text) == [("东风送暖，桃李争春花满园", "北雁传书，江山入梦月临窗", "story")]


def test_story_uncued_halves_after_lines_that_end_in_a_colon() -> None:
    text = "二人对饮，先生想了想道：\n孤舟独钓，一老翁寒江垂纶；\n学生一愣，半晌无言。\n"
    text += "走到桥头，学生笑道：\n双燕齐飞，两少年春野踏青。"
    assert pairs(text) == [("孤舟独钓，一老翁寒江垂纶", "双燕齐飞，两少年春野踏青", "story")]


def test_story_label_stops_at_the_sentence_end() -> None:
    """上联：A。 … narration … 下联：B is a story, not one label run through the narration."""
    text = "上联：花开富贵年年好。众人苦思良久，终于有人说出了下联：竹报平安步步高。"
    uppers, lowers = story_halves(normalise_text(text))
    assert [h.text for h in uppers] == ["花开富贵年年好"]
    assert [h.text for h in lowers] == ["竹报平安步步高"]
    assert pairs(text) == [("花开富贵年年好", "竹报平安步步高", "story")]


def test_story_lower_is_cut_at_the_upper_length_before_narration() -> None:
    text = "先生出一联：松间明月照。学生对道：石上清泉流，先生大喜。"
    assert pairs(text) == [("松间明月照", "石上清泉流", "story")]


@pytest.mark.parametrize(
    "text",
    [
        "先生出了个上联：春风吹绿千山柳。学生对不出来，只好认输。",  # no lower line
        "先生出了个上联：春风吹绿千山柳。学生对道：我不会。",  # a lower that does not mirror
        "先生出了个上联：春风吹绿千山柳。" + "众人议论。\n" * 9 + "学生对道：细雨润红万树花。",  # too far
        "他想了想道：\n今天天气很好；\n我说道：\n明天还会下雨。",  # uncued prose
    ],
)
def test_story_lookalikes_are_rejected(text: str) -> None:
    assert pairs(text) == []


def test_story_pairs_mark_their_text_used() -> None:
    used: list[tuple[int, int]] = []
    text = normalise_text("先生出一联：松间明月照。学生对道：石上清泉流。")
    assert [(p.upper, p.lower) for p in story_pairs(text, used)] == [("松间明月照", "石上清泉流")]
    assert len(used) == 2 and list(story_pairs(text, used)) == []


# --- one line after a cue word ----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "他在门上贴了一副对联，上面写着：春回大地千山秀，日照神州万木荣。",
        "老人说：“我家的对联是叫春回大地千山秀，日照神州万木荣。横批是万象更新。”",
        "春联：春回大地千山秀；日照神州万木荣",
    ],
)
def test_one_line_pair_after_a_cue_word(text: str) -> None:
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [("春回大地千山秀", "日照神州万木荣")]


def test_cued_line_pairs_alone() -> None:
    text = normalise_text("门上一副对联：海阔凭鱼跃，天高任鸟飞。")
    assert [(p.upper, p.lower, p.form) for p in cued_line_pairs(text, [])] == [
        ("海阔凭鱼跃", "天高任鸟飞", "cued")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "对联是中国传统文化的瑰宝，历史悠久。",
        "贴对联是一种习俗，我们今天还在贴，大家都喜欢。",
        "写对联的人很多：有的写得好，有的写不好。",
    ],
)
def test_cue_word_prose_is_no_pair(text: str) -> None:
    assert prose_pairs(text) == []


# --- one-line pairs on a page about couplets ----------------------------------------------

COUPLET_LIST = """春联大全：五言、七言春联精选
一、春回大地千山秀，日照神州万木荣。横批：万象更新
二、天增岁月人增寿；春满乾坤福满门
3. 海阔凭鱼跃，天高任鸟飞。
（4）莺歌燕舞新春到，鸟语花香好景来。
欢度佳节贴对联，家家户户喜洋洋。"""


def test_numbered_and_hengpi_lines_on_a_couplet_page() -> None:
    found = [(p.upper, p.lower, p.form) for p in prose_pairs(COUPLET_LIST)]
    assert found == [
        ("春回大地千山秀", "日照神州万木荣", "one_line"),
        ("天增岁月人增寿", "春满乾坤福满门", "one_line"),
        ("海阔凭鱼跃", "天高任鸟飞", "one_line"),
        ("莺歌燕舞新春到", "鸟语花香好景来", "one_line"),
    ]  # the last line, a prose sentence with a 对联 in it, is not numbered


def test_one_line_pairs_keep_the_line_as_snippet() -> None:
    text = normalise_text("春联\n一、春回大地千山秀，日照神州万木荣。横批：万象更新")
    (pair,) = one_line_pairs(text, [])
    assert pair.snippet == "一、春回大地千山秀，日照神州万木荣。横批：万象更新"


def test_an_unnumbered_comma_line_is_not_a_pair_without_a_cue() -> None:
    """A，B。 alone is how poems print their rows; it needs a number, a 横批 or a cue."""
    assert prose_pairs("春联\n春回大地千山秀，日照神州万木荣。") == []


# --- guards: pages with no couplet give no pair -------------------------------------------

PROVERB_PAGE = """谚语的种类很多，下面是常见的谚语。
一、春雨贵如油，冬雪兆丰年。
二、路遥知马力，日久见人心。
3. 好事不出门，坏事传千里。
莫道君行早；更有早行人。
路遥知马力
日久见人心"""

POEM_PAGE = """春晓
【唐】孟浩然
春眠不觉晓，处处闻啼鸟。
夜来风雨声，花落知多少。
这首诗是孟浩然的名作，全诗语言平易。"""


@pytest.mark.parametrize(
    "text",
    [
        "找回密码\n立即注册",
        "相关文章\n网友评论",
        "设为首页\n加入收藏",
        "首页\n新闻\n图片\n视频",  # a menu
        "网站首页\n诗词名句\n春联大全\n对联故事",  # a menu that names couplets
        "找回密码 立即注册",  # chrome on one line, split by the space
        PROVERB_PAGE,
        POEM_PAGE,
        "登高\n唐·杜甫\n万里悲秋常作客，百年多病独登台。\n艰难苦恨繁霜鬓，潦倒新停浊酒杯。",
        "真是“运用之妙，存乎一心”！他还写过一副对联。",  # the cue is in another sentence
    ],
)
def test_pages_with_no_couplet_give_no_pair(text: str) -> None:
    assert prose_pairs(text) == []


def test_is_chrome() -> None:
    assert is_chrome("找回密码") and is_chrome("相关文章") and is_chrome("下一篇：春联")
    assert not is_chrome("春回大地千山秀")


def test_page_topic() -> None:
    assert page_topic(PROVERB_PAGE) == "other"
    assert page_topic(POEM_PAGE) == "other"
    assert page_topic(COUPLET_LIST) == "couplet"
    assert page_topic("今日天晴") == "unknown"


def test_poem_head_and_menu_rows() -> None:
    assert is_poem_head("【唐】杜甫") and is_poem_head("宋·苏轼") and is_poem_head("《登高》（唐）杜甫")
    assert not is_poem_head("《登高》") and not is_poem_head("春回大地千山秀")
    assert menu_rows(["首页", "新闻", "图片", "春回大地千山秀", "日照神州万木荣"]) == {0, 1, 2}
    assert menu_rows(["首页", "新闻", None, "图片"]) == set()


# --- normalisation and the date rule ------------------------------------------------------


def test_a_space_between_chinese_text_is_a_line_break() -> None:
    assert normalise_text("春回大地千山秀 日照神州万木荣") == "春回大地千山秀\n日照神州万木荣"
    assert normalise_text("上联: 春回大地") == "上联：春回大地"  # after a colon: dropped
    assert pairs("春回大地千山秀 日照神州万木荣") == [("春回大地千山秀", "日照神州万木荣", "adjacent")]


def test_durations_are_not_dates() -> None:
    found = pairs("五十年风雨同舟路\n八千里山河入画图")
    assert found == [("五十年风雨同舟路", "八千里山河入画图", "adjacent")]
    assert pairs("二〇一八年春节快乐\n二〇一九年元宵团圆") == []


# --- from the pages added to the tune split (hand-written look-alikes) ----------------------


def test_numbered_line_with_a_title_before_the_pair() -> None:
    text = "五字春联选录如下：\n1.万象更新：春回大地暖，福到万家欢。\n2.吉星高照：门迎百福至，户纳千祥来。"
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [
        ("春回大地暖", "福到万家欢"),
        ("门迎百福至", "户纳千祥来"),
    ]


def test_a_quoted_poem_is_not_a_couplet() -> None:
    text = "古人有诗云：“春眠不觉晓，处处闻啼鸟”，后来人们过年都贴春联。"
    assert prose_pairs(text) == []


def test_rows_ending_in_semicolon_and_full_stop_by_turns_are_a_couplet_list() -> None:
    rows = ["春回大地千山秀；", "日照神州万木荣。", "莺歌燕舞新春到；", "鸟语花香好景来。"]
    found = [(p.upper, p.lower) for p in prose_pairs("春联\n" + "\n".join(rows))]
    assert found == [("春回大地千山秀", "日照神州万木荣"), ("莺歌燕舞新春到", "鸟语花香好景来")]
    poem = "\n".join(r[:-1] + e for r, e in zip(rows, "，。，。", strict=True))
    assert prose_pairs(poem) == []  # the same rows printed as a poem's are not paired


# --- one pair a line without number, notes in brackets, halves split by 。 ---------------

PLAIN_LIST = """春联精选
春回大地千山秀，日照神州万木荣；
莺歌燕舞新春到，鸟语花香好景来；
门迎百福福星照，户纳千祥祥云开。"""


def test_unnumbered_one_line_pairs_in_a_run_of_three() -> None:
    assert pairs(PLAIN_LIST) == [
        ("春回大地千山秀", "日照神州万木荣", "one_line"),
        ("莺歌燕舞新春到", "鸟语花香好景来", "one_line"),
        ("门迎百福福星照", "户纳千祥祥云开", "one_line"),
    ]
    two = "\n".join(PLAIN_LIST.split("\n")[:3])
    assert pairs(two) == []  # two such lines may be a quatrain printed two rows a line
    poem = "对联与诗\n【唐】王维\n" + "\n".join(PLAIN_LIST.split("\n")[1:])
    assert pairs(poem) == []  # rows after a poem's author line


def test_a_run_of_comma_lines_ending_in_semicolon_and_full_stop_by_turns_is_two_line_pairs() -> None:
    text = "春联\n壬佩六符，允征吉兆；\n寅恭五服，相励和衷。\n癸鼎镌铭，百世宝用；\n卯门启运，万物孳生。"
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [
        ("壬佩六符，允征吉兆", "寅恭五服，相励和衷"),
        ("癸鼎镌铭，百世宝用", "卯门启运，万物孳生"),
    ]


def test_a_note_in_brackets_after_a_pair_is_left_out() -> None:
    text = "对联的种类，如：\n觉行圆满；功德庄严。（正对）\n庭前花始放；\n阁下李先生。（常用无情对）"
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [
        ("觉行圆满", "功德庄严"),
        ("庭前花始放", "阁下李先生"),
    ]


def test_numbered_halves_split_by_a_full_stop() -> None:
    text = "七字春联\n7、春回大地千山秀。日照神州万木荣。\n8、一年好景同春到。四季财源顺时来。"
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [
        ("春回大地千山秀", "日照神州万木荣"),
        ("一年好景同春到", "四季财源顺时来"),
    ]
    assert prose_pairs("七字春联\n春回大地千山秀。日照神州万木荣。") == []  # two sentences


def test_unpunctuated_rows_and_full_stops_by_turns_are_a_couplet_list() -> None:
    rows = ["春回大地千山秀", "日照神州万木荣。", "莺歌燕舞新春到", "鸟语花香好景来。"]
    assert [(p.upper, p.lower) for p in prose_pairs("春联\n" + "\n".join(rows))] == [
        ("春回大地千山秀", "日照神州万木荣"),
        ("莺歌燕舞新春到", "鸟语花香好景来"),
    ]


# Wedding couplets written for these tests, two lines a pair, no punctuation; the first
# upper line ends in 节 (level in Mandarin, an entering tone: oblique), the second lower line
# in 长 (cháng or zhǎng).
WEDDING = [
    ("良辰美景逢佳节", "玉镜红妆映彩霞"),
    ("鸳鸯比翼同心久", "琴瑟和鸣百岁长"),
    ("花好月圆迎吉日", "天长地久庆佳期"),
    ("喜酒一杯酬亲友", "春风十里送新娘"),
]
# 登鹳雀楼 (王之涣): each row pair passes the bare-line test and ends oblique, then level; its
# even rows rhyme (流, 楼)
STORK_TOWER = ["白日依山尽", "黄河入海流", "欲穷千里目", "更上一层楼"]


def test_unpunctuated_rows_two_by_two_are_a_couplet_list_when_the_lowers_do_not_rhyme() -> None:
    rows = [line for pair in WEDDING for line in pair]
    page = "婚联大全\n" + "\n".join(rows) + "\n以上婚联，供新人选用。"
    assert [(p.upper, p.lower, p.form) for p in prose_pairs(page)] == [(u, w, "adjacent") for u, w in WEDDING]
    assert unpunctuated_couplets(rows)
    assert unpunctuated_couplets(rows[:4])  # two pairs: 霞 and 长 do not rhyme


def test_a_poem_of_unpunctuated_rows_stays_a_poem() -> None:
    assert not unpunctuated_couplets(STORK_TOWER)  # 流 and 楼 rhyme
    assert prose_pairs("\n".join(STORK_TOWER)) == []
    # 春晓's rows: 晓 then 鸟, both oblique, so no couplet whatever the rhyme
    assert not unpunctuated_couplets(["春眠不觉晓", "处处闻啼鸟", "夜来风雨声", "花落知多少"])
    rows = [line for pair in WEDDING for line in pair]
    assert not unpunctuated_couplets(rows[1:7])  # out of step: uppers end level
    assert not unpunctuated_couplets(rows[:3])  # odd
    assert not unpunctuated_couplets([rows[0] + "。", rows[1], rows[2], rows[3]])  # punctuated


def test_rhymes_and_end_tones() -> None:
    assert rhyme("光") == rhyme("乡") == "ang"
    assert rhyme("流") == rhyme("楼") == "ou"
    assert rhyme("春") == rhyme("人") == rhyme("云") == "en"
    assert rhyme("龙") == rhyme("灯") == "eng"
    assert rhyme("，") == ""
    assert one_rhyme(["黄河入海流", "更上一层楼"])
    assert not one_rhyme(["玉镜红妆映彩霞", "琴瑟和鸣百岁长"])
    assert not one_rhyme(["黄河入海流"])  # one line rhymes with nothing
    assert may_end_oblique("良辰美景逢佳节") and may_end_oblique("喜酒一杯酬亲友")
    assert not may_end_oblique("玉镜红妆映彩霞")
    assert may_end_level("琴瑟和鸣百岁长") and not may_end_level("花好月圆迎吉日")


# --- examples after 如：, quotes cued in the sentence before, more story cues -------------


def test_examples_after_ru_on_a_line_that_names_a_couplet() -> None:
    text = normalise_text(
        "贺联：喜庆时用。如：一门瑞气盈庭院；满院春光照画堂。（喜联）福如东海；寿比南山。（寿联）"
    )
    found = [(p.upper, p.lower, p.form) for p in example_pairs(text, [])]
    assert found == [
        ("一门瑞气盈庭院", "满院春光照画堂", "example"),
        ("福如东海", "寿比南山", "example"),
    ]
    assert list(example_pairs(normalise_text("水果很多，如：苹果，香蕉。"), [])) == []  # names no couplet
    assert prose_pairs("对联的作用有很多，如：我们可以贴，你们可以挂。") == []  # prose


def test_a_quoted_example_whose_cue_is_in_the_sentence_before() -> None:
    text = "五字对联很受喜爱。有的家庭喜欢传统的，如“海阔凭鱼跃，天高任鸟飞”；也有人写别的。"
    assert pairs(text) == [("海阔凭鱼跃", "天高任鸟飞", "quoted")]
    assert pairs("他爱写对联。\n有的人喜欢说，如“我们走吧，你们来吧”。") == []  # prose in quotes
    assert pairs("天气很好。如“海阔凭鱼跃，天高任鸟飞”。") == []  # nothing names a couplet


@pytest.mark.parametrize(
    "text",
    [
        "例如这幅春联，上联是“春回大地千山秀”，下联可能是“日照神州万木荣”，横批是“万象更新”。",
        "有一位先生出联：「春回大地千山秀。」有人对：「日照神州万木荣。」众人叫好。",
        "一酒家出「春回大地千山秀」征求下联，久无人对。后来一位书生乃对下联「日照神州万木荣」。",
    ],
)
def test_story_cues_before_quotes(text: str) -> None:
    assert pairs(text) == [("春回大地千山秀", "日照神州万木荣", "story")]


def test_a_bare_dui_between_quotes_is_no_lower_cue() -> None:
    text = "有人出联：「春回大地千山秀」。「大地」对「神州」，「千山」对「万木」，字字工整。"
    assert prose_pairs(text) == []


def test_a_cue_word_ending_a_clause_gives_no_one_line_pair() -> None:
    assert prose_pairs("此联对仗十分工稳，治联技术精湛。") == []
    assert prose_pairs("家家户户贴春联；旧年辞别迎新岁，时序车轮总向前。") == []


def test_a_one_line_pair_is_not_paired_again_with_the_next_line() -> None:
    """Two A；B lines on a couplet page: two one-line pairs, not also one two-line pair."""
    text = "对联的种类，如：\n觉行圆满；功德庄严。（正对）\n心平积福；欲重招殃。（反对）"
    assert [(p.upper, p.lower, p.form) for p in prose_pairs(text)] == [
        ("觉行圆满", "功德庄严", "one_line"),
        ("心平积福", "欲重招殃", "one_line"),
    ]


def test_quoted_examples_one_after_the_other() -> None:
    text = "对联的上下联按时序分，如“春回大地千山秀，日照神州万木荣”；“海阔凭鱼跃，天高任鸟飞”。"
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [
        ("春回大地千山秀", "日照神州万木荣"),
        ("海阔凭鱼跃", "天高任鸟飞"),
    ]
    text = "对联很多，如“春回大地千山秀，日照神州万木荣”。他又说“我们走吧，你们来吧”。"
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [("春回大地千山秀", "日照神州万木荣")]


def test_a_page_that_writes_yi_as_the_formal_numeral_is_read_with_yi() -> None:
    text = (
        "有關數字的春聯\n壹、壹年四季春常在,萬紫千紅永開花,橫批:喜迎新春。\n"
        "二、和順壹門有百福,平安二字值千金。"
    )
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [
        ("一年四季春常在", "万紫千红永开花"),
        ("和顺一门有百福", "平安二字值千金"),
    ]
    assert normalise_text("收到人民币壹佰元整") == "收到人民币壹佰元整"  # an amount keeps its 壹


# --- rules round on pages 54-72 (hand-written examples) -------------------------------------


def test_numbered_halves_split_by_a_list_comma() -> None:
    """1、A、B； with the halves split by 、, maybe with a 横批 after a comma, named or not."""
    text = (
        "新春春联精选\n1、春回大地、福满人间；\n2、天增岁月人增寿、春满乾坤福满门，万象更新；\n"
        "3、莺歌燕舞新春到、鸟语花香好景来，（横批）春意盎然；"
    )
    assert pairs(text) == [
        ("春回大地", "福满人间", "one_line"),
        ("天增岁月人增寿", "春满乾坤福满门", "one_line"),
        ("莺歌燕舞新春到", "鸟语花香好景来", "one_line"),
    ]


@pytest.mark.parametrize(
    "body",
    [
        "万象更新、春满人间",  # two words of a list: the first ends level
        "梅兰竹菊、春夏秋冬、东南西北",  # three items
        "春风得意、马蹄疾",  # unequal
        "春回大地，千山秀、福满人间，万户春",  # clauses inside the halves
        "春回大地、福满人间，万象更新，五福临门",  # more than a 横批 after the pair
    ],
)
def test_a_list_comma_split_needs_two_couplet_halves(body: str) -> None:
    assert dun_halves(body) is None
    assert pairs(f"春联\n1、{body}；\n2、{body}；\n3、{body}；") == []


def test_dun_halves() -> None:
    assert dun_halves("春回大地、福满人间") == ("春回大地", "福满人间")
    assert dun_halves("天增岁月人增寿、春满乾坤福满门，万象更新") == ("天增岁月人增寿", "春满乾坤福满门")


def test_one_upper_answered_in_turn_gives_a_pair_for_each_answer() -> None:
    text = (
        "老师出了个上联：春风吹绿千山柳。\n"
        "大弟子想了想说：细雨润红万树花。老师点头称是。\n"
        "二弟子随即对道：明月照临万户窗。\n"
        "小弟子也说：我对不上来。"
    )
    assert pairs(text) == [
        ("春风吹绿千山柳", "细雨润红万树花", "story"),
        ("春风吹绿千山柳", "明月照临万户窗", "story"),
    ]


def test_an_answer_after_shuo_is_judged_as_bare_lines_are() -> None:
    """说： is no couplet word: the half after it needs the bare-line test (here 春风 twice)."""
    assert pairs("先生出了个上联：春风吹绿千山柳。学生说：春风吹到万家门。") == []
    assert pairs("先生出了个上联：春风吹绿千山柳。学生对道：春风吹到万家门。") == [
        ("春风吹绿千山柳", "春风吹到万家门", "story")
    ]
    assert pairs("先生出了个上联：春风吹绿千山柳。学生说：细雨润红万树花。") == [
        ("春风吹绿千山柳", "细雨润红万树花", "story")
    ]


def test_a_lower_named_xialian_after_an_answer_is_another_couplets() -> None:
    text = (
        "例如这幅春联，上联是“春回大地千山秀”，下联可以是“日照神州万木荣”。"
        "另一幅七字春联是“莺歌燕舞新春到”，下联可以是“鸟语花香好景来”。"
    )
    assert pairs(text) == [("春回大地千山秀", "日照神州万木荣", "story")]


def test_a_quote_named_as_the_upper_after_it_and_a_lower_that_xialian_names() -> None:
    text = (
        "老先生指着窗外说：“春风吹绿千山柳。”上联一出，满座皆惊。\n"
        "一个学生站起来，下联脱口而出：“细雨润红万树花。”老先生大喜。"
    )
    uppers, lowers = story_halves(normalise_text(text))
    assert [h.text for h in uppers] == ["春风吹绿千山柳"]
    assert "细雨润红万树花" in [h.text for h in lowers]
    assert pairs(text) == [("春风吹绿千山柳", "细雨润红万树花", "story")]
    # the quote is not named 上联: speech, not a couplet
    assert pairs("老先生说：“春风吹绿千山柳。”众人都笑了。一个学生说：“细雨润红万树花。”") == []


HARD_WRAPPED = (
    "解缙自幼好学，出口成章，人称神童。这年春节，他在门上贴了一副\n"
    "对联：“春回大地千山秀，日照神州\n"
    "万木荣。”邻居看了，很不高兴，第二天一早，他家门上的春联\n"
    "又改为：“海阔凭鱼跃，天高任鸟飞。”"
)


def test_hard_wrapped_quotes_and_a_cue_at_the_end_of_the_row_before() -> None:
    assert [(p.upper, p.lower) for p in prose_pairs(HARD_WRAPPED)] == [
        ("春回大地千山秀", "日照神州万木荣"),
        ("海阔凭鱼跃", "天高任鸟飞"),
    ]
    # a heading is no unfinished sentence: the quote after it has no cue
    assert prose_pairs("对联故事\n他说：“春眠不觉晓，处处闻啼鸟。”") == []


def test_join_broken_quotes() -> None:
    rows = ["他贴了一副对联：“春回大地千山秀，日照神州", "万木荣。”邻居看了。", "又一年。"]
    joined = "他贴了一副对联：“春回大地千山秀，日照神州万木荣。”邻居看了。"
    assert join_broken_quotes(rows) == [joined, "又一年。"]
    assert join_broken_quotes(["他说：“春回大地", "“另一句”"]) == ["他说：“春回大地", "“另一句”"]
    assert join_broken_quotes(["他说：“好。”", "“对。”"]) == ["他说：“好。”", "“对。”"]


def test_run_on() -> None:
    unfinished = "邻居看了，很不高兴，第二天一早，他家门上的春联"
    row_before = "这年春节，他在门上贴了一副对联，上面写的是什么呢，我们"
    assert run_on(unfinished, row_before) == unfinished
    assert run_on("万木荣。”" + unfinished, row_before) == "”" + unfinished
    assert run_on(unfinished, "这年春节，他在门上贴了一副对联。") == ""  # one cut row: maybe a caption
    assert run_on("春联故事", row_before) == ""  # a heading
    assert run_on("邻居看了，很不高兴，第二天一早，他家门上贴了春联。", row_before) == ""  # a full sentence


def test_a_table_border_at_a_line_end_is_not_text() -> None:
    text = "挽联\n花落春归去；月沉夜更深。 |\n| 音容宛在，永记慈恩；风范长存，难忘教诲。 |"
    assert normalise_text(text).split("\n")[1:] == [
        "花落春归去；月沉夜更深。",
        "音容宛在，永记慈恩；风范长存，难忘教诲。",
    ]
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [
        ("花落春归去", "月沉夜更深"),
        ("音容宛在，永记慈恩", "风范长存，难忘教诲"),
    ]
    assert normalise_text("| 设为首页 | 加入收藏 |") == "设为首页|加入收藏"  # inside a line: kept


def test_two_short_unpunctuated_words_are_no_pair() -> None:
    """A title split at its space (新春佳节 阖家欢乐) or two words of a sentence: no halves."""
    assert looks_like_couplet("新春佳节", "阖家欢乐")  # the bare-line test alone would pair them
    assert pairs("新春佳节 阖家欢乐\n春节到了，家家户户贴春联。") == []
    assert pairs("挽联的写法：\n顿首敬挽 灵前大字 永垂不朽 下款写名") == []
    assert pairs("黄鹤楼的楹联很多。\n楼前芳草；\n江上烟波。\n萧娴题黄鹤楼。") == [
        ("楼前芳草", "江上烟波", "adjacent")
    ]
    assert short_words("帐心大字", "永垂千古") and not short_words("楼前芳草；", "江上烟波。")
    assert not short_words("春回大地千山秀", "日照神州万木荣")


def test_a_quote_in_a_sentence_on_one_half_is_no_pair() -> None:
    text = "他写的这副对联很妙。下联巧妙地说屋子不大，但“山不在高，有仙则名”，又用了典故。"
    assert prose_pairs(text) == []
    assert not names_couplet("下联巧妙地说屋子不大，但 ，又用了典故")
    assert names_couplet("上联写景，下联抒情，好比 ")  # both halves: a couplet
    assert names_couplet("门上贴着一副春联 ")
    text = "上联写景，下联抒情，好比“春回大地千山秀，日照神州万木荣”。"
    assert [(p.upper, p.lower) for p in prose_pairs(text)] == [("春回大地千山秀", "日照神州万木荣")]


def test_plain_one_line_pairs_count_the_pairs_next_to_them_in_their_run() -> None:
    """Two unnumbered A，B。 lines and an A；B line: a run of three one-line pairs."""
    rows = [*PLAIN_LIST.split("\n")[1:3], "海阔凭鱼跃；天高任鸟飞。"]
    assert [(p.upper, p.lower) for p in prose_pairs("春联精选\n" + "\n".join(rows))] == [
        ("春回大地千山秀", "日照神州万木荣"),
        ("莺歌燕舞新春到", "鸟语花香好景来"),
        ("海阔凭鱼跃", "天高任鸟飞"),
    ]
    assert pairs("春联精选\n" + "\n".join(rows[:2]) + "\n以上春联，供选用。") == []  # two alone


def test_feichang_reads_as_prose_only_before_what_it_modifies() -> None:
    assert looks_like_couplet("花开富贵美非常", "竹报平安乐无边")  # 非常 ends a clause: a couplet's word
    assert not looks_like_couplet("花开富贵非常美", "竹报平安特别好")  # prose's "very"
