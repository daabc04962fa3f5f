"""The couplet rules as string checks, and tones, on hand-written pairs."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data import tones as tones_module
from data.rules import (
    check,
    no_reuse,
    repeat_faults,
    repeats_mirrored,
    reused_positions,
    rhythm_positions,
)
from data.text import clauses, is_han, is_punct, repeat_pattern
from data.tones import Tone, char_tone, line_tones, mark, opposed, pingshui_rusheng, wanted_end


def test_char_classes():
    assert is_han("春") and not is_han("，") and not is_han("a")
    assert is_punct("，") and not is_punct(",") and not is_punct("春")


def test_repeat_pattern_and_clauses():
    assert repeat_pattern("天天向上") == [0, 0, 2, 3]
    assert repeat_pattern("上海自来水来自海上") == [0, 1, 2, 3, 4, 3, 2, 1, 0]
    assert clauses("春风，秋雨。") == [(0, 2), (3, 5)]


def test_tone_traps():
    # 一 and 不 keep their citation tones whatever pypinyin's phrase sandhi says.
    assert line_tones("一定")[0] == Tone.LEVEL
    assert line_tones("不要")[0] == Tone.OBLIQUE
    # punctuation keeps positions aligned
    tones = line_tones("春，，风")
    assert len(tones) == 4 and tones[1] == Tone.NONE and tones[3] == Tone.LEVEL
    # a heteronym is either tone in lenient mode
    assert char_tone("长", "lenient") == Tone.EITHER
    assert mark(Tone.LEVEL) == "平" and mark(Tone.OBLIQUE) == "仄"


def test_tone_modes():
    with pytest.raises(ValueError, match="unknown tone mode"):
        line_tones("春", "ancient")
    assert line_tones("国", "classical", rusheng=frozenset("国")) == [Tone.OBLIQUE]
    assert line_tones("国", "modern") == [Tone.LEVEL]


def test_the_pingshui_rusheng_table(monkeypatch: pytest.MonkeyPatch):
    """The 入声 of the 平水韵 in both scripts; level rhymes stay out, and so does a character
    the rhyme dictionary lists under both (不)."""
    table = pingshui_rusheng()
    assert set("国國十白竹一月发發学學") <= table
    assert not set("东東风風春家年") & table and "不" not in table
    monkeypatch.delenv("RUSHENG_TABLE", raising=False)
    assert line_tones("十年白发", "classical") == [Tone.OBLIQUE, Tone.LEVEL, Tone.OBLIQUE, Tone.OBLIQUE]
    assert line_tones("十年白发", "modern")[:3] == [Tone.LEVEL, Tone.LEVEL, Tone.LEVEL]


LINES_READ_BOTH_WAYS = [
    "长城万里",  # 长 is zhǎng alone, cháng in the phrase: the phrase reading decides
    "重重山外",
    "觉得头发",  # neutral tones in phrases
    "银行长",  # a phrase whose reading keeps every tone class: no phrase reading needed
    "一行白鹭上青天，不觉晓。",
    "桌子",
    "还我河山",
    "数一数二",
    "𠀾春a，",  # a character outside pypinyin's tables, and Latin
]


@pytest.mark.parametrize("mode", ["modern", "classical"])
def test_lines_without_tone_changing_phrases_skip_the_phrase_reading(
    mode: str, monkeypatch: pytest.MonkeyPatch
):
    """A line in which no phrase changes a character's tone class reads each character's first
    reading; every line gets what pypinyin's phrase reading gives (both paths are taken)."""
    monkeypatch.delenv("RUSHENG_TABLE", raising=False)
    table = frozenset(pingshui_rusheng()) if mode == "classical" else frozenset()
    paths = set()
    for line in LINES_READ_BOTH_WAYS:
        paths.add(tones_module._first_readings_hold(line))
        assert line_tones(line, mode) == list(tones_module._phrase_reading(line, mode, table)), line
    assert paths == {True, False}
    assert not tones_module._first_readings_hold("长城") and tones_module._first_readings_hold("春风")


def test_opposition():
    assert opposed(Tone.LEVEL, Tone.OBLIQUE) and not opposed(Tone.LEVEL, Tone.LEVEL)
    assert opposed(Tone.EITHER, Tone.LEVEL)
    assert wanted_end(Tone.OBLIQUE) == Tone.LEVEL and wanted_end(Tone.LEVEL) == Tone.OBLIQUE


def test_check_good_pair():
    report = check("风吹柳絮千山雪", "雨打梨花万树香")
    assert report.hard_ok and report.tone_end is True


@pytest.mark.parametrize(
    ("upper", "lower", "broken"),
    [
        ("春风得意", "秋雨无", "length"),
        ("春风，得意", "秋雨无声。", "punctuation"),
        ("天天向上", "日月进步", "repeats"),
        ("春风得意", "秋风无声", "no_reuse"),
    ],
)
def test_check_each_hard_rule(upper, lower, broken):
    report = check(upper, lower)
    assert not getattr(report, broken)
    assert not report.hard_ok


def test_rhythm_positions():
    assert rhythm_positions("一二三四五六七") == [1, 3, 5, 6]
    assert rhythm_positions("一二三，四五") == [1, 2, 5]


@pytest.mark.parametrize("mode", ["modern", "lenient", "classical"])
def test_check_with_the_upper_tones_read_before_is_check(mode: str) -> None:
    """The decoder reports its candidates with the upper line's tones read once per request."""
    for upper, lower in [
        ("春风得意马蹄疾", "秋雨无情羊角笑"),
        ("一帆风顺", "万事如意"),
        ("山高，水长", "月白，风清"),
        ("天", "地人"),
    ]:
        tones = line_tones(upper, mode)
        assert check(upper, lower, mode, tuple(tones)) == check(upper, lower, mode)


def test_the_tone_tables_are_built_once_when_many_threads_ask_first() -> None:
    import threading

    from data import tones

    tones._load_tables.cache_clear()
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        tones._phrase_tables()

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    info = tones._load_tables.cache_info()
    assert (info.misses, info.hits) == (1, 7)  # a server's first burst of requests: one build


def test_a_characters_readings_are_pypinyins_for_every_character_it_knows() -> None:
    from pypinyin import Style, pinyin
    from pypinyin.constants import PINYIN_DICT

    from data.text import is_han
    from data.tones import char_readings

    chars = [*[chr(cp) for cp in PINYIN_DICT if is_han(chr(cp))][::7], "𣃁", "鑫", "长", "行"]
    for ch in chars:
        if ch in "一不":
            continue
        # an item per character, as data.tones asks (pypinyin's annotation says str; it takes lists)
        no_reading = lambda text: [""] * len(text)  # noqa: E731
        items = pinyin(ch, style=Style.TONE3, heteronym=True, errors=no_reading)  # type: ignore[arg-type]
        assert char_readings(ch) == tuple(r for r in items[0] if r), ch
    assert char_readings("，") == () and char_readings("a") == ()


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet="春风秋月天地，。a1〇𠀀", max_size=9),
    st.text(alphabet="春风秋月天地，。a1〇𠀀", max_size=9),
)
def test_the_quick_rule_checks_agree_with_the_positions(upper: str, lower: str) -> None:
    """``repeats_mirrored`` and ``no_reuse`` answer from sets where they can (the data stage asks
    them of a million pairs); their answer is the positions' ``repeat_faults`` and
    ``reused_positions`` have none, on lines with repeats, marks and unequal lengths."""
    assert repeats_mirrored(upper, lower) == (not repeat_faults(upper, lower))
    assert no_reuse(upper, lower) == (not reused_positions(upper, lower))
