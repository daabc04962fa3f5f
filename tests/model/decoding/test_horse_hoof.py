"""马蹄韵 in the search (issue 42 item 3): where the given line keeps it, every candidate's clause
ends keep it (a hard rule, ``HorseHoof``); where it breaks it, the candidates are reported, not
held to it. Hand-made couplets of two to four clauses, a 长联, 下联求上联, a lock."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from data.rules import check, hoof_ends
from data.tones import Tone, line_tones
from data.vocab import Vocab
from model.decoding.decoder import Decoder
from model.decoding.options import DecodeOptions
from model.decoding.plan import hoof_wants
from model.decoding.score_rules import HorseHoof
from model.decoding.vocab_tables import NEG_INF
from model.export.engines import torch_decoder
from tests.model.decoding.fixtures import decode_vocab, reverse_of, tiny_model

KEEPING = [  # upper lines whose clause ends keep 马蹄韵: 平仄, 平平仄, 仄平平仄
    "绿水青山，千秋画卷",
    "花好月圆，春满乾坤，万家灯火映天地",
    "山高水阔，雨过天晴，人寿年丰，一江春水向东去",
]
BREAKING = "春回大地，福满人间，万紫千红呈锦绣"  # 仄平仄: the first clause should end 平
OPTIONS = DecodeOptions(n_best=5)


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    return decode_vocab(tmp_path_factory.mktemp("hoof_vocab"), pairs)


@pytest.fixture(scope="module", params=[0, 1, 2])
def decoder(request: pytest.FixtureRequest, vocab: Vocab) -> Decoder:
    return torch_decoder(tiny_model(vocab, seed=request.param), vocab)


def test_the_plan_asks_each_clause_end_but_the_last_for_the_mirrored_tone(decoder: Decoder) -> None:
    _, plan = decoder.plan_view(KEEPING[1], OPTIONS)
    assert plan.hoof == ((3, Tone.OBLIQUE), (8, Tone.OBLIQUE))  # 仄仄 (平 at the end: the tone-end rule)
    assert decoder.plan_view(BREAKING, OPTIONS)[1].hoof == ()
    assert decoder.plan_view("春风得意马蹄疾", OPTIONS)[1].hoof == ()
    assert decoder.plan_view(KEEPING[1], replace(OPTIONS, rules=False))[1].hoof == ()


def test_the_rule_leaves_only_characters_of_the_wanted_tone(decoder: Decoder) -> None:
    _, plan = decoder.plan_view(KEEPING[1], OPTIONS)
    table = HorseHoof([plan], decoder.tables).table()[0]  # (L+1, V)
    for pos, want in plan.hoof:
        assert np.array_equal(table[pos] == 0, decoder.tables.end_ok("modern", want))
    others = [p for p in range(plan.length + 1) if p not in dict(plan.hoof)]
    assert (table[others] == 0).all()
    assert (table[3] == NEG_INF).any()


def _breaks(result_texts: list[str], upper: str) -> list[bool]:
    return [check(upper, text).horse_hoof is False for text in result_texts]


def test_candidates_keep_it_where_the_upper_line_does_and_would_break_it_without_the_rule(
    decoder: Decoder,
) -> None:
    # without the rhythm preference, which already leans toward opposed clause ends
    options = replace(OPTIONS, rhythm_weight=0.0)
    broken_without = kept = 0
    for upper in KEEPING:
        found = decoder.generate(upper, options).candidates
        assert found and all(c.report.hard_ok and c.report.horse_hoof is not False for c in found)
        # (None: a clause end read in a neutral tone in its phrase, as 柳子; unknown, never wrong)
        kept += sum(c.report.horse_hoof is True for c in found)
        view, plan = decoder.plan_view(upper, options)
        off = decoder.decode_plans([replace(plan, hoof=())], options)[0]
        assert off is not None
        broken_without += sum(_breaks([view.text(c.text) for c in off.candidates], upper))
    assert kept >= len(KEEPING)  # the verdicts are read, not all unknown
    assert broken_without > 0  # the rule, not chance, keeps the candidates to it


def test_an_upper_line_that_breaks_it_is_reported_not_enforced(decoder: Decoder) -> None:
    found = decoder.generate(BREAKING, OPTIONS).candidates
    assert found and all(c.report.hard_ok and c.report.horse_hoof is False for c in found)


def test_a_lock_on_a_clause_end_wins_and_the_report_says_so(decoder: Decoder) -> None:
    upper = KEEPING[0]  # the lower line's first clause must end 仄; 平 locked there
    found = decoder.generate(upper, replace(OPTIONS, locks="___天_____")).candidates
    assert found and all(c.text[3] == "天" and c.report.horse_hoof is False for c in found)


def test_a_long_couplet_keeps_it_across_its_segments(decoder: Decoder) -> None:
    upper = "桃李争春，雁过长空，山川锦绣，花开富贵，竹报平安，一片丹心寄远方，万家灯火映天地"
    ends = hoof_ends(line_tones(upper, "modern"), upper)
    assert len(upper) >= 33 and len(ends) == 7
    if not hoof_wants(upper, "modern"):  # (the line itself must keep it for the test to mean anything)
        pytest.fail(f"the test line breaks 马蹄韵: {[(p, t) for p, _, t in ends]}")
    found = decoder.generate(upper, replace(OPTIONS, n_best=2)).candidates
    assert found and all(c.report.hard_ok and c.report.horse_hoof is not False for c in found)


def test_upper_lines_for_a_lower_line_keep_the_upper_pattern(vocab: Vocab) -> None:
    reverse = torch_decoder(reverse_of(tiny_model(vocab, seed=4)), vocab)
    lower = "风调雨顺，福临门第，一城喜气贯神州"  # 仄仄平
    _, plan = reverse.plan_view(lower, OPTIONS)
    assert plan.hoof == ((3, Tone.LEVEL), (8, Tone.LEVEL))
    found = reverse.generate(lower, OPTIONS).candidates
    assert found and all(check(c.text, lower).horse_hoof is not False for c in found)
