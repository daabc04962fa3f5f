"""Composing whole couplets from a head or keywords (duilian/compose.py) on the shipped model, as
the site and the command line run it: every couplet keeps every rule, its heads stand where the
request puts them, the same request gets the same couplets, and bad input is refused in Chinese
and English before any decode."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from data.paths import default_model_dir, graph_cache_dir
from data.rules import check
from duilian.check import check_with
from duilian.compose import (
    ComposeRequest,
    Composition,
    compose,
    make_compose_request,
    seed_ok,
    seeds,
)
from duilian.compose_seeds import MIN_LINES, SeedIndex, seed_index, shape_of
from duilian.engine import Engine
from duilian.inputs import InputError
from duilian.service import LoadedModel
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from model.decoding.plan import ConstraintError


@pytest.fixture(scope="module")
def model() -> Iterator[LoadedModel]:
    """The shipped bundle on the site's default engine (int8 on ONNX Runtime)."""
    yield LoadedModel.load(
        default_model_dir(), None, Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir()), warm=False, lazy=True
    )


def keeps_every_rule(found: Composition, clauses: int) -> None:
    assert found.couplets, "no couplet composed"
    for c in found.couplets:
        report = check(c.upper, c.lower, found.tone_mode)
        assert report.hard_ok, (c.upper, c.lower, report)
        assert report.tone_end is True
        assert c.check.upper_tones[-1] == "仄" and c.check.lower_tones[-1] == "平", (c.upper, c.lower)
        assert report.horse_hoof is (True if clauses > 1 else None)
        assert c.check.report == report and c.check.hard_ok
        assert c.banner is not None and c.banner == c.banners[0].text and len(c.banner) == 4
        assert abs(c.score - (c.upper_score + c.lower_score)) < 1e-3
    uppers = [c.upper for c in found.couplets]
    assert len(set(uppers)) == len(uppers)


@pytest.mark.slow
def test_a_name_heads_the_two_lines(model: LoadedModel) -> None:
    found = compose(model, make_compose_request("张伟", length=7, n=3))
    assert len(found.couplets) == 3 and found.head == "张伟" and found.pattern == "7"
    keeps_every_rule(found, 1)
    for c in found.couplets:
        assert len(c.upper) == len(c.lower) == 7
        assert c.upper[0] == "张" and c.lower[0] == "伟"
        assert c.check == check_with(model, c.upper, c.lower, "modern")  # the check's own report


def test_the_same_request_gets_the_same_couplets(model: LoadedModel) -> None:
    request = make_compose_request("明月", length=5, n=2)
    assert compose(model, request) == compose(model, request)


def test_four_characters_head_the_clauses(model: LoadedModel) -> None:
    found = compose(model, make_compose_request("恭贺新禧", length="4,7", n=2))
    keeps_every_rule(found, 2)
    for c in found.couplets:
        assert len(c.upper) == 12 and c.upper[4] == c.lower[4] == "，"
        assert (c.upper[0], c.upper[5], c.lower[0], c.lower[5]) == tuple("恭贺新禧")


def test_keywords_are_placed_one_line_each(model: LoadedModel) -> None:
    found = compose(model, make_compose_request(None, keywords="山水", length=5, n=2))
    keeps_every_rule(found, 1)
    assert all("山" in c.upper and "水" in c.lower for c in found.couplets)


def test_a_classical_tone_mode_and_a_clause_pattern(model: LoadedModel) -> None:
    found = compose(model, make_compose_request("春福", length="4，7", n=2, tone_mode="classical"))
    assert found.pattern == "4,7" and found.tone_mode == "classical"
    keeps_every_rule(found, 2)


def test_another_seed_drafts_from_other_lines(model: LoadedModel) -> None:
    index = seed_index(model.bundle)
    first, other = (make_compose_request("张伟", length=7, seed=s) for s in (0, 7))
    assert seeds(index, first) != seeds(index, other)
    assert seeds(index, first) == seeds(index, first)
    keeps_every_rule(compose(model, other), 1)


def test_a_pattern_no_couplet_has_is_refused(model: LoadedModel) -> None:
    with pytest.raises(ConstraintError) as refused:
        compose(model, make_compose_request("张伟", length=16))
    assert " / " in str(refused.value) and "16" in str(refused.value)


@pytest.mark.parametrize(
    ("head", "keywords", "length", "n", "said"),
    [
        ("张a", None, 7, 3, "汉字"),
        ("Zhang", None, 7, 3, "汉字"),
        ("张伟明", None, 7, 3, "2 个字"),
        ("恭贺新禧", None, 7, 3, "2 个字"),
        ("张伟", None, "4x", 3, "字数格式"),
        ("张伟", None, "七", 3, "字数格式"),
        ("张伟", None, "²", 3, "字数格式"),
        ("张伟", None, 1, 3, "每个分句"),
        ("张伟", None, "4,4,4,4,4", 3, "每个分句"),
        ("张伟", None, "16,16", 3, "最多"),
        ("张张", None, 7, 3, "不重字"),
        ("张伟", "张", 7, 3, "重复"),
        ("张伟", "伟明", 7, 3, "不重字"),
        (None, None, 7, 3, "藏头"),
        ("", "", 7, 3, "藏头"),
        ("张伟", None, 7, 0, "至少"),
        ("张伟", None, 7, 11, "最多"),
        (None, "山水云天地日月星辰风雨", 5, 3, "放不下"),
    ],
)
def test_bad_input_is_refused_in_two_languages(
    head: str | None, keywords: str | None, length: int | str, n: int, said: str
) -> None:
    with pytest.raises(InputError) as refused:
        make_compose_request(head, keywords, length, n)
    assert said in refused.value.zh and refused.value.en, str(refused.value)


def test_a_request_splits_its_characters_between_the_lines() -> None:
    r = make_compose_request("恭贺新禧", keywords="山水云", length="4,7")
    assert r.locks(False) == "恭____贺______" and r.locks(True) == "新____禧______"
    assert r.chars(False) == "恭贺山云" and r.chars(True) == "新禧水"
    assert ComposeRequest("张伟", "", (7,)).locks(True) == "伟______"


def test_the_seed_index_keeps_lines_by_shape_and_head() -> None:
    sevens = [f"{ch}海无涯苦作舟" for ch in "学文书乐" * 6]  # 24 lines of one shape
    clause = [f"{ch}风化雨，桃李满天下" for ch in "春秋" * 11]
    odd = ["学海无涯；苦作舟", "短", "春风，化雨"]  # another mark, too few of a shape
    index = SeedIndex.build(sevens + clause + odd)
    assert index.shapes() == sorted([shape_of(sevens[0]), "____，_____"])
    assert index.heads["_______"]["学"] == ["学海无涯苦作舟"] * 6
    assert len(index.general["____，_____"]) == 22 >= MIN_LINES
    assert SeedIndex.from_json(index.to_json()) == index


def test_a_seed_must_end_level_and_leave_the_upper_heads_out() -> None:
    request = make_compose_request("张伟", length=7)
    assert seed_ok("伟大同怀后辈心", request)
    assert not seed_ok("伟大同怀后辈志", request)  # ends 仄
    assert not seed_ok("伟大张怀后辈心", request)  # holds the upper line's head
