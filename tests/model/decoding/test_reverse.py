"""下联求上联: a lower_to_upper model's decoder writes upper lines for a lower line under the
mirrored rules (the upper line ends 仄 where the lower ends 平), reports each pair as
(written upper, given lower), and names the lines the right way round in its refusals."""

from __future__ import annotations

import pytest

from data.pairing import PairingTable
from data.rules import check, check_answer, reads_reversed
from data.tones import Tone, line_tones, wanted_end
from data.vocab import Vocab
from model.decoding.decoder import Decoder
from model.decoding.options import DecodeOptions
from model.decoding.plan import ConstraintError, plan_request
from model.decoding.vocab_tables import VocabTables
from model.export.engines import torch_decoder
from model.net.transformer import CoupletTransformer, ModelConfig
from tests.model.decoding.fixtures import decode_vocab, reverse_of, tiny_model

LEVEL_END = "家和万事兴"  # 兴 xīng: ends 平, as a lower line should
OBLIQUE_END = "花开富贵"  # 贵: ends 仄, as an upper line should


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    extra = [(LEVEL_END, "国泰民安乐"), (OBLIQUE_END, "竹报平安")]
    return decode_vocab(tmp_path_factory.mktemp("reverse"), [*pairs, *extra])


def reverse_model(vocab: Vocab, seed: int = 0) -> CoupletTransformer:
    return reverse_of(tiny_model(vocab, seed), scale=0.0)


@pytest.fixture(scope="module")
def reverse(vocab: Vocab) -> Decoder:
    return torch_decoder(reverse_model(vocab), vocab)


def test_the_tone_at_the_end_is_mirrored() -> None:
    assert wanted_end(Tone.LEVEL, reverse=True) == Tone.OBLIQUE
    assert wanted_end(Tone.EITHER, reverse=True) == Tone.OBLIQUE  # the upper line's usual end
    assert wanted_end(Tone.OBLIQUE, reverse=True) == Tone.LEVEL
    assert wanted_end(Tone.EITHER) == Tone.LEVEL  # the forward direction's, unchanged
    assert reads_reversed(Tone.LEVEL) and not reads_reversed(Tone.LEVEL, reverse=True)
    assert reads_reversed(Tone.OBLIQUE, reverse=True) and not reads_reversed(Tone.OBLIQUE)


def test_the_direction_is_a_checked_model_option() -> None:
    assert ModelConfig(direction="lower_to_upper").reverse and not ModelConfig().reverse
    with pytest.raises(ValueError, match="direction must be one of"):
        ModelConfig(direction="sideways")


def test_the_plan_of_a_lower_line_wants_an_oblique_end(vocab: Vocab) -> None:
    tables = VocabTables.build(vocab, vocab.pieces)
    plan = plan_request(LEVEL_END, vocab, tables, reverse=True)
    assert plan.want_end == Tone.OBLIQUE and plan.end_pos == len(LEVEL_END) - 1
    assert plan_request(LEVEL_END, vocab, tables).want_end == Tone.OBLIQUE  # a level end either way
    assert plan_request(OBLIQUE_END, vocab, tables, reverse=True).want_end == Tone.LEVEL


def test_upper_lines_for_a_lower_line_keep_the_mirrored_rules(reverse: Decoder, vocab: Vocab) -> None:
    result = reverse.generate(LEVEL_END, DecodeOptions(n_best=5))
    assert result.candidates and result.lower == result.given == LEVEL_END and result.upper is None
    given = set(LEVEL_END)
    for c in result.candidates:
        assert len(c.text) == len(LEVEL_END) and not given & set(c.text)
        tones = line_tones(c.text, "modern")
        assert tones[-1] & Tone.OBLIQUE, c.text  # the written upper line ends 仄
        assert c.report == check(c.text, LEVEL_END)  # reported as (upper, lower)
        assert c.report.tone_end is not False
    assert not result.reads_reversed  # a lower line that ends 平 reads as a lower line
    assert reverse.generate(OBLIQUE_END, DecodeOptions(n_best=1)).reads_reversed


def test_the_forward_model_on_the_same_line_is_not_reported_reversed(vocab: Vocab) -> None:
    forward = torch_decoder(tiny_model(vocab), vocab)
    c = forward.generate(LEVEL_END, DecodeOptions(n_best=1)).candidates[0]
    assert c.report == check(LEVEL_END, c.text)
    assert check_answer(LEVEL_END, c.text, reverse=True) == check(c.text, LEVEL_END)


def test_refusals_name_the_lines_the_right_way_round(reverse: Decoder) -> None:
    with pytest.raises(ConstraintError) as caught:
        reverse.generate(LEVEL_END, DecodeOptions(required_chars="家"))
    assert "下联" in caught.value.zh and "上联" not in caught.value.zh, caught.value.zh
    assert "lower line" in caught.value.en and "upper line" not in caught.value.en
    with pytest.raises(ConstraintError, match="锁字模式长度为2，下联长度为5"):
        reverse.generate(LEVEL_END, DecodeOptions(locks="__"))


def test_alternatives_in_the_reverse_direction_keep_its_rules(reverse: Decoder) -> None:
    written = reverse.generate(LEVEL_END, DecodeOptions(n_best=1)).candidates[0].text
    found = reverse.alternatives(LEVEL_END, written, len(LEVEL_END) - 1, k=5)
    assert found.alternatives
    for a in found.alternatives:
        assert line_tones(a.text, "modern")[-1] & Tone.OBLIQUE
        assert a.report == check(a.text, LEVEL_END)


def test_the_pairing_table_read_the_other_way() -> None:
    table = PairingTable.count([("春风得意", "秋月生辉"), ("天高", "地厚"), ("春风", "秋雨")] * 5)
    swapped = table.swapped()
    swapped.check()
    assert len(swapped) == len(table)
    for u, lo in [("春", "秋"), ("风", "雨"), ("天", "地"), ("意", "辉")]:
        assert swapped.get(lo, u) == table.get(u, lo) != 0
    assert swapped.get("春", "秋") == 0
    back = swapped.swapped()
    assert (back.upper == table.upper).all() and (back.lower == table.lower).all()
    assert (back.score == table.score).all() and (back.indptr == table.indptr).all()
