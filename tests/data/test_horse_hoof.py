"""马蹄韵 (the clause-end tones, docs/COUPLET_RULES.md) and the rules' fault positions, on hand-made
couplets of two to four clauses, kept and broken."""

from __future__ import annotations

import itertools

import pytest

from data import rules
from data.rules import check, clause_ends, clause_spans, hoof_pattern, horse_hoof
from data.tones import Tone, line_tones

L, O, N, E = Tone.LEVEL, Tone.OBLIQUE, Tone.NONE, Tone.EITHER  # noqa: E741 (平, 仄, none, either)


def marks(tones: list[Tone]) -> str:
    return "".join("平" if t == L else "仄" for t in tones)


@pytest.mark.parametrize(
    ("n", "upper", "lower"),
    [
        (1, "仄", "平"),
        (2, "平仄", "仄平"),
        (3, "平平仄", "仄仄平"),
        (4, "仄平平仄", "平仄仄平"),
        (5, "仄仄平平仄", "平平仄仄平"),
    ],
)
def test_the_pattern_runs_back_from_the_last_clause_in_pairs(n: int, upper: str, lower: str) -> None:
    assert marks(hoof_pattern(n)) == upper
    assert marks(hoof_pattern(n, lower=True)) == lower


def test_clauses_end_at_pause_marks_not_at_quotes_or_brackets() -> None:
    assert clause_ends("读《论语》，知天下") == [3, 8]
    assert clause_spans("“春风”化雨，润物无声。") == [(1, 6), (7, 11)]
    assert clause_ends("……春风，") == [3]
    assert clause_ends("白塔街，黄铁匠，生红炉") == [2, 6, 10]


KEPT = [
    ("绿水青山，千秋画卷", "红梅白雪，万里诗篇"),  # 平仄 / 仄平
    ("花好月圆，春满乾坤，万家灯火映天地", "风调雨顺，福临门第，一城喜气贯神州"),  # 平平仄 / 仄仄平
]
BROKEN = [
    # the upper line keeps it, the lower's first clause ends 平 where it must end 仄
    ("花好月圆，春满乾坤，万家灯火映天地", "人寿年丰，福临门第，一城喜气贯神州", [3]),
    # the upper line's first clause ends 仄 where three clauses want 平 (and the lower's 平 there)
    ("春回大地，福满人间，万紫千红呈锦绣", "燕舞晴空，莺歌柳岸，一帆风顺向前程", [3]),
]


@pytest.mark.parametrize(("upper", "lower"), KEPT)
def test_hand_made_couplets_that_keep_it(upper: str, lower: str) -> None:
    report = check(upper, lower)
    assert report.hard_ok and report.horse_hoof is True


@pytest.mark.parametrize(("upper", "lower", "where"), BROKEN)
def test_hand_made_couplets_that_break_it(upper: str, lower: str, where: list[int]) -> None:
    report = check(upper, lower)
    assert report.hard_ok and report.horse_hoof is False
    ends = rules.hoof_ends(line_tones(upper, "modern"), upper)
    ends += rules.hoof_ends(line_tones(lower, "modern"), lower, lower=True)
    assert sorted({p for p, _, kept in ends if kept is False}) == where


def test_one_clause_or_clause_counts_that_differ_do_not_apply() -> None:
    assert check("春风得意马蹄疾", "秋月生辉燕语迟").horse_hoof is None
    assert horse_hoof([L, L, N, O], [O, L, O, L], "青山，绿", "红梅白雪") is None


def test_an_unknown_tone_leaves_it_unjudged_and_either_keeps_it() -> None:
    up, low = "青山，绿水", "白雪，红梅"
    assert horse_hoof([L, L, N, O, O], [O, O, N, L, L], up, low) is True
    assert horse_hoof([L, N, N, O, O], [O, O, N, L, L], up, low) is None  # 山 unknown
    assert horse_hoof([L, N, N, O, L], [O, O, N, L, L], up, low) is False  # a break outweighs
    assert horse_hoof([L, E, N, O, E], [O, O, N, L, L], up, low) is True  # lenient: either


LINES = ["春风，秋月", "天天向上", "山山水水", "花，花", "春风得意", "月下，风前", "好好学习"]


def test_fault_positions_are_empty_exactly_when_a_rule_is_kept() -> None:
    for upper, lower in itertools.product(LINES, repeat=2):
        if len(upper) == len(lower):
            assert (not rules.punctuation_faults(upper, lower)) == rules.punctuation_mirrored(upper, lower)
        assert (not rules.repeat_faults(upper, lower)) == rules.repeats_mirrored(upper, lower)
        assert (not rules.reused_positions(upper, lower)) == rules.no_reuse(upper, lower)
    assert rules.punctuation_faults("春风，秋月", "春风秋，月") == [2, 3]
    assert rules.repeat_faults("天天向上", "步步登高") == []
    assert rules.repeat_faults("天天向上", "好学好学") == [1, 2, 3]
    assert rules.reused_positions("春风得意", "风和春暖") == [0, 2]
