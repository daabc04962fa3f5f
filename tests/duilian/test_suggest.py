"""Suggestions in the check of a couplet (duilian/suggest.py, issue 42): on the site's tiny real
bundle and its alternatives search, hand-made couplets with a known broken rule get, at that place,
a first replacement whose line keeps the rule (judged by data.rules.check); a couplet that keeps
every rule gets no rule-mending suggestion; the check without a model says why there are none."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from data.pairing import PairingTable
from data.rules import check
from duilian.check import CheckReport, check_couplet, check_with
from duilian.engine import Engine
from duilian.inputs import FORWARD
from duilian.service import LoadedModel
from duilian.suggest import NEAR, PAIR, Unsuggestable, assemble, needs_retry, plan, queries
from duilian.suggestions import NO_MODEL, NONE_AS_GOOD, NOT_ALIGNED, NOTHING_WEAK
from model.decoding.alternatives import Kept
from model.decoding.answer import Alternative, Alternatives, tone_marks
from model.decoding.plan import ConstraintError
from serve.settings import Settings
from tests.serve.conftest import PAIRS


@pytest.fixture(scope="module")
def model(bundle_a: Path, graph_cache: Path) -> LoadedModel:
    settings = Settings(model_dir=bundle_a)
    return LoadedModel.load(bundle_a, engine=Engine(settings.int8, settings.runtime, graph_cache))


def suggested(model: LoadedModel, upper: str, lower: str) -> CheckReport:
    report = check_with(model, upper, lower, "modern")
    return replace(report, suggestions=model.suggestions(report))


# hand-made couplets with broken rules and weak pairs, and the site's own pairs mangled
COUPLETS = [
    ("春风得意", "秋月生雨"),
    ("春风得意", "秋风生辉"),
    ("春风得意", "秋秋生辉"),
    ("春风得意", "春月生雨"),
    ("绿水青山，千秋画卷", "红梅白雪，万里诗山"),
    *[(u, w[::-1]) for u, w in PAIRS],
    *[(u, w[1:] + w[0]) for u, w in PAIRS if "，" not in u],
]


@pytest.mark.parametrize(("upper", "lower"), COUPLETS)
def test_describing_the_first_characters_first_gives_what_describing_them_all_gives(
    model: LoadedModel, upper: str, lower: str
) -> None:
    """``suggest`` describes five characters a place first and the rest only where those do not
    settle it; its answer is the one the whole list of ``MAX_ALTERNATIVES`` gives at once (the
    rules-off retry as ``suggest`` asks it)."""
    report = check_with(model, upper, lower, "modern")
    pairing = model.bundle.pairing
    try:
        places = plan(report, pairing)
    except Unsuggestable as exc:
        assert model.suggestions(report) == exc.answer
        return
    found = model.alternatives_at(queries(report, places)) if places else []
    retry = [i for i, f in enumerate(found) if needs_retry(f)]
    if retry:  # together, as ``suggest`` asks them (one walk: the places share its batches)
        again = model.alternatives_at(queries(report, [places[i] for i in retry], rules_on=False))
        for i, f in zip(retry, again, strict=True):
            found[i] = f
    assert model.suggestions(report) == assemble(report, places, found, pairing)


def test_a_second_ask_about_a_kept_place_only_describes_more_of_it(model: LoadedModel) -> None:
    """``kept`` holds each place's scored lines after the first ask; a second ask for more
    characters reads them (no new entry) and answers as a fresh ask of that many does."""
    report = check_with(model, "春风得意", "秋月生雨", "modern")
    places = plan(report, model.bundle.pairing)
    kept: Kept = {}
    few = model.alternatives_at(queries(report, places, n=2), kept)
    assert len(kept) == len([f for f in few if not isinstance(f, ConstraintError)]) > 0
    entries = dict(kept)
    more = model.alternatives_at(queries(report, places), kept)
    assert kept == entries and all(kept[key] is entries[key] for key in kept)  # nothing scored again
    assert more == model.alternatives_at(queries(report, places))
    for f, m in zip(few, more, strict=True):  # the few are the first of the more
        if isinstance(f, Alternatives) and isinstance(m, Alternatives):
            first = [a for a in f.alternatives if not a.original]
            assert first == [a for a in m.alternatives if not a.original][: len(first)]


@pytest.mark.parametrize(
    ("upper", "lower", "rule", "position"),
    [
        ("春风得意", "秋月生雨", "tone_end", 3),  # 雨 is oblique after 意 (oblique)
        ("春风得意", "秋风生辉", "no_reuse", 1),  # 风 is the upper line's
        ("春风得意", "秋秋生辉", "repeats", 1),  # 秋秋 where the upper line has no repeat
        ("春风得意", "春月生雨", "no_reuse", 0),  # two rules broken: the rest breaks one too
    ],
)
def test_the_first_suggestion_at_a_broken_place_mends_it(
    model: LoadedModel, upper: str, lower: str, rule: str, position: int
) -> None:
    assert getattr(check(upper, lower), rule) is False
    report = suggested(model, upper, lower)
    s = report.suggestions
    assert s.searched and s.reason is None
    item = next(i for i in s.items if i.position == position)
    assert rule in item.weakness and item.current == lower[position]
    assert item.replacements, item.note
    first = item.replacements[0]
    assert rule in first.mends and first.char != lower[position]
    assert first.text == lower[:position] + first.char + lower[position + 1 :]
    after = check(upper, first.text)
    assert getattr(after, rule) is True or (rule == "no_reuse" and position not in _reused(upper, first.text))
    before = check(upper, lower)
    for name in ("length", "punctuation", "repeats", "no_reuse", "tone_end"):
        assert not (getattr(before, name) is True and getattr(after, name) is False), name
    rules_first = [i.position for i in s.items if PAIR not in i.weakness]
    assert s.items[: len(rules_first)] == [i for i in s.items if PAIR not in i.weakness]  # broken rules first


def _reused(upper: str, lower: str) -> list[int]:
    return [i for i, ch in enumerate(lower) if ch in upper]


@pytest.mark.parametrize(
    ("upper", "lower"), [("绿水青山，千秋画卷", "红梅白雪，万里诗篇"), ("春风得意", "秋月生辉")]
)
def test_a_couplet_that_keeps_every_rule_gets_no_rule_mending_suggestion(
    model: LoadedModel, upper: str, lower: str
) -> None:
    assert all(r.kept is not False for r in check_couplet(upper, lower).rules)  # rhythm 100% too
    s = suggested(model, upper, lower).suggestions
    assert s.searched
    assert all(i.weakness == [PAIR] for i in s.items)
    assert all(r.mends == [PAIR] for i in s.items for r in i.replacements)
    if model.bundle.pairing is None:  # the tiny bundle without pairs: nothing weak to say
        assert s.items == [] and s.reason == NOTHING_WEAK


def test_weak_pairs_come_after_broken_rules_and_mend_the_pair() -> None:
    table = PairingTable.count(PAIRS)  # 春/秋, 风/月, 得/生 pair; 意/雨 never
    upper, lower = "春风得意", "秋月生雨"
    report = check_couplet(upper, lower, "modern", table)
    places = plan(report, table)
    assert places[0].position == 3 and "tone_end" in places[0].weakness  # the broken rule first
    assert all(p.weakness == (PAIR,) for p in places[1:])


def test_without_a_model_the_check_says_why_there_are_no_suggestions() -> None:
    s = check_couplet("春风得意", "秋月生雨").suggestions
    assert not s.searched and s.reason == NO_MODEL and s.items == []
    assert "未载入模型" in NO_MODEL and "No model" in NO_MODEL  # both languages


def test_lines_that_do_not_align_get_no_suggestion_and_the_reason(model: LoadedModel) -> None:
    s = suggested(model, "春风得意", "秋月生辉好").suggestions
    assert not s.searched and s.reason == NOT_ALIGNED
    s = suggested(model, "春风，得意", "秋月生，辉").suggestions
    assert s.reason == NOT_ALIGNED


@pytest.mark.parametrize(("rank", "shown"), [(-1.02, True), (-1.5, False)])
def test_a_soft_mend_is_shown_only_when_the_search_ranks_its_line_near_the_lines_own(
    rank: float, shown: bool
) -> None:
    """A place weak only by its pair (a soft weakness) is mended only by a line the search ranks at
    most ``NEAR`` per character below the line's own: blind readers preferred the line as it was
    where the mend cost more. Hand-made search answers, the rules and the table real."""
    table = PairingTable.count([*PAIRS, *[("春", "夏")] * 20])  # 夏 pairs with 春 far better than 秋
    upper, lower = "春风得意", "秋月生辉"
    report = check_couplet(upper, lower, "modern", table)
    places = [p for p in plan(report, table) if p.position == 0]
    assert places and places[0].weakness == (PAIR,)

    def alternative(char: str, rank_score: float, original: bool) -> Alternative:
        text = char + lower[1:]
        return Alternative(
            char, text, rank_score, rank_score, tone_marks(text, "modern"), check(upper, text), original
        )

    own, better = alternative("秋", -1.0, True), alternative("夏", rank, False)
    assert -1.0 - NEAR < -1.02 and -1.0 - NEAR > -1.5
    found = Alternatives(FORWARD, upper, lower, 0, [0], sorted([own, better], key=lambda a: -a.rank_score))
    item = assemble(report, places, [found], table).items[0]
    if shown:
        assert [r.char for r in item.replacements] == ["夏"] and item.replacements[0].mends == [PAIR]
    else:
        assert item.replacements == [] and item.note == NONE_AS_GOOD
