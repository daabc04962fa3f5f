"""Each couplet rule alone, on hand-made score tables over the fixture vocabulary (no model)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from data.tones import Tone, char_tone
from data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab
from model.decoding.plan import ConstraintError, Plan, plan_request
from model.decoding.score_rules import (
    ExactLength,
    Locks,
    NoReuse,
    NoThreeLevelTail,
    PunctuationMirrored,
    RepeatsMirrored,
    RequiredChars,
    Rhythm,
    SpecialTokens,
    Step,
    ToneEnd,
    Weights,
    build_rules,
    fuse,
)
from model.decoding.vocab_tables import VocabTables
from tests.model.decoding.fixtures import decode_vocab

NEG = float("-inf")


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    return decode_vocab(tmp_path_factory.mktemp("decode_vocab"), pairs)


@pytest.fixture(scope="module")
def tables(vocab: Vocab) -> VocabTables:
    return VocabTables.build(vocab)


def plan(vocab: Vocab, tables: VocabTables, upper: str, **kw: object) -> Plan:
    return plan_request(upper, vocab, tables, **kw)  # type: ignore[arg-type]


def ids(vocab: Vocab, chars: str) -> list[int]:
    return vocab.encode(chars)


def allowed(row: np.ndarray) -> set[int]:
    return set(np.flatnonzero(row != NEG).tolist())


def zeros(rows: int, size: int) -> np.ndarray:
    """Fresh (rows, size) float32 scores: a rule may change the array it is given in place."""
    return np.zeros((rows, size), np.float32)


def step_at(pos: int, prefix: list[list[int]]) -> Step:
    p = np.array(prefix, dtype=np.int64).reshape(len(prefix), pos)
    return Step(pos, p, np.zeros(len(prefix), dtype=np.int64))


# ---- position rules ----------------------------------------------------------------------


def test_exact_length_forces_the_end_only_after_the_last_position(vocab, tables):
    rule = ExactLength([plan(vocab, tables, "春风")], tables)
    scores = np.random.default_rng(0).standard_normal((1, tables.size), dtype=np.float32)
    for pos in (0, 1):
        assert rule(scores.copy(), step_at(pos, [[4] * pos]))[0, EOS_ID] == NEG
    assert allowed(rule(scores.copy(), step_at(2, [[4, 5]]))[0]) == {EOS_ID}


def test_special_tokens_are_never_generated(vocab, tables):
    rule = SpecialTokens([plan(vocab, tables, "春风")], tables)
    out = rule(zeros(1, tables.size), step_at(0, [[]]))
    assert all(out[0, i] == NEG for i in (PAD_ID, BOS_ID, UNK_ID))
    assert out[0, ids(vocab, "雨")[0]] == 0


def test_an_unknown_punctuation_mark_is_mirrored_through_unk(vocab, tables):
    assert "《" not in vocab
    p = plan(vocab, tables, "春《风")
    table = fuse(build_rules([p], tables, Weights())[0], 1, 3, tables.size)
    assert allowed(table[0, 1]) == {UNK_ID}
    assert table[0, 0, UNK_ID] == NEG


def test_punctuation_is_forced_at_its_positions_and_forbidden_elsewhere(vocab, tables):
    rule = PunctuationMirrored([plan(vocab, tables, "春风，秋雨")], tables)
    comma = ids(vocab, "，")[0]
    assert allowed(rule(zeros(1, tables.size), step_at(2, [[4, 5]]))[0]) == {comma}
    at0 = rule(zeros(1, tables.size), step_at(0, [[]]))[0]
    assert at0[comma] == NEG and at0[ids(vocab, "雪")[0]] == 0
    assert all(at0[i] == NEG for i in np.flatnonzero(tables.punct).tolist())


def test_no_reuse_forbids_the_upper_lines_characters(vocab, tables):
    rule = NoReuse([plan(vocab, tables, "春风秋雨")], tables)
    out = rule(zeros(1, tables.size), step_at(1, [[4]]))[0]
    assert all(out[i] == NEG for i in ids(vocab, "春风秋雨"))
    assert out[ids(vocab, "花")[0]] == 0


def test_tone_end_wants_level_after_an_oblique_end(vocab, tables):
    # 雪 xue3 is oblique: the lower ends on a character level in every reading.
    rule = ToneEnd([plan(vocab, tables, "千山雪")], tables)
    out = rule(zeros(1, tables.size), step_at(2, [[4, 5]]))[0]
    assert out[ids(vocab, "香")[0]] == 0 and out[ids(vocab, "树")[0]] == NEG
    assert char_tone("长", "lenient") == Tone.EITHER
    assert out[ids(vocab, "长")[0]] == NEG  # context could read it zhang3
    earlier = rule(zeros(1, tables.size), step_at(1, [[4]]))[0]
    assert earlier[ids(vocab, "树")[0]] == 0


def test_tone_end_lenient_mode_accepts_any_reading(vocab, tables):
    rule = ToneEnd([plan(vocab, tables, "千山雪", mode="lenient")], tables)
    out = rule(zeros(1, tables.size), step_at(2, [[4, 5]]))[0]
    assert out[ids(vocab, "长")[0]] == 0 and out[ids(vocab, "树")[0]] == NEG


def test_tone_end_after_a_level_end_wants_oblique(vocab, tables):
    rule = ToneEnd([plan(vocab, tables, "万树香")], tables)
    out = rule(zeros(1, tables.size), step_at(2, [[4, 5]]))[0]
    assert out[ids(vocab, "雪")[0]] == 0 and out[ids(vocab, "花")[0]] == NEG


def test_tone_end_sits_on_the_head_of_a_repeated_last_character(vocab, tables):
    p = plan(vocab, tables, "上海自来水来自海上")
    assert p.end_pos == 0  # 上 ends the line and first appears at 0
    out = ToneEnd([p], tables)(zeros(1, tables.size), step_at(0, [[]]))[0]
    assert out[ids(vocab, "香")[0]] == 0 and out[ids(vocab, "树")[0]] == NEG


def test_locks_force_their_character_and_keep_it_out_of_other_positions(vocab, tables):
    rule = Locks([plan(vocab, tables, "春风秋雨", locks="_花__")], tables)
    flower = ids(vocab, "花")[0]
    assert allowed(rule(zeros(1, tables.size), step_at(1, [[4]]))[0]) == {flower}
    assert rule(zeros(1, tables.size), step_at(0, [[]]))[0, flower] == NEG


def test_rhythm_penalises_an_unopposed_tone_at_rhythm_positions(vocab, tables):
    # 千山雪: position 1 (山, level) and 2 (雪, oblique) are rhythm positions, 0 is not.
    rule = Rhythm([plan(vocab, tables, "千山雪")], tables, weight=2.0)
    level, oblique = ids(vocab, "香")[0], ids(vocab, "树")[0]
    at1 = rule(zeros(1, tables.size), step_at(1, [[4]]))[0]
    assert at1[level] == -2.0 and at1[oblique] == 0.0
    at2 = rule(zeros(1, tables.size), step_at(2, [[4, 5]]))[0]
    assert at2[oblique] == -2.0 and at2[level] == 0.0
    at0 = rule(zeros(1, tables.size), step_at(0, [[]]))[0]
    assert at0[level] == 0.0 and at0[oblique] == 0.0


# ---- step rules ----------------------------------------------------------------------------


def test_repeats_copy_a_repeated_character_and_forbid_a_new_one_from_repeating(vocab, tables):
    rule = RepeatsMirrored([plan(vocab, tables, "天天向上")])
    a, b = ids(vocab, "年春")
    out = rule(zeros(2, tables.size), step_at(1, [[a], [b]]))
    assert allowed(out[0]) == {a} and allowed(out[1]) == {b}
    out = rule(zeros(2, tables.size), step_at(2, [[a, a], [b, b]]))
    assert out[0, a] == NEG and out[1, b] == NEG and out[0, b] == 0


def test_repeats_mirror_a_palindrome(vocab, tables):
    rule = RepeatsMirrored([plan(vocab, tables, "上海自来水来自海上")])
    prefix = ids(vocab, "山河人去")  # the lower's first four characters, then a new one at 4
    out = rule(zeros(1, tables.size), step_at(4, [prefix]))[0]
    assert all(out[i] == NEG for i in prefix)
    prefix = [*prefix, ids(vocab, "花")[0]]
    for pos, want in ((5, prefix[3]), (6, prefix[2]), (7, prefix[1]), (8, prefix[0])):
        row = rule(zeros(1, tables.size), step_at(pos, [prefix]))[0]
        assert allowed(row) == {want}
        prefix.append(want)


def test_required_chars_are_forced_when_the_free_positions_run_out(vocab, tables):
    p = plan(vocab, tables, "春风秋雨", required_chars="花月", tone_end=False)
    rule = RequiredChars([p], tables)
    flower, moon, other = ids(vocab, "花月山")
    # at position 2, two positions remain: a beam missing both must place one now
    out = rule(zeros(3, tables.size), step_at(2, [[other, other], [flower, other], [flower, moon]]))
    assert allowed(out[0]) == {flower, moon}
    assert out[1, other] == 0 and out[1, moon] == 0
    assert out[1, flower] == 0  # placed already: repeating it is RepeatsMirrored's business
    assert out[2, other] == 0
    # at position 0 there is room for both later
    assert rule(zeros(1, tables.size), step_at(0, [[]]))[0, other] == 0


def test_required_chars_keep_a_fitting_ender_for_the_tone_restricted_end(vocab, tables):
    # 千山雪 needs a level end; 香 is level, 树 oblique: 树 must come before the end.
    p = plan(vocab, tables, "千山雪", required_chars="香树")
    rule = RequiredChars([p], tables)
    fragrant, tree, other = ids(vocab, "香树人")
    out = rule(zeros(2, tables.size), step_at(1, [[other], [fragrant]]))
    assert allowed(out[0]) == {tree}  # 香 now would leave 树 for the level end
    assert out[1, tree] == 0 and out[1, other] == NEG


def test_three_level_tail_is_penalised(vocab, tables):
    rule = NoThreeLevelTail([plan(vocab, tables, "千山雪")], tables, weight=3.0)
    level, oblique = ids(vocab, "香树")
    out = rule(zeros(2, tables.size), step_at(2, [[level, level], [level, oblique]]))
    assert out[0, level] == -3.0 and out[0, oblique] == 0.0
    assert out[1, level] == 0.0
    # one step earlier: the end must be level, so a second level already makes 三平尾
    out = rule(zeros(1, tables.size), step_at(1, [[level]]))
    assert out[0, level] == -3.0 and out[0, oblique] == 0.0


def test_fuse_is_the_sum_of_the_position_rules(vocab, tables):
    plans = [plan(vocab, tables, "春风，秋雨"), plan(vocab, tables, "千山万里雪")]
    position, _ = build_rules(plans, tables, Weights())
    fused = fuse(position, 2, 5, tables.size)
    total = sum(r.table() for r in position)
    assert fused.dtype == np.float32 and fused.shape == (2, 6, tables.size)
    assert np.array_equal(fused, total)


def test_rules_off_keeps_only_length_specials_and_user_constraints(vocab, tables):
    p = plan(vocab, tables, "春风秋雨", rules=False, locks="花___")
    position, stepwise = build_rules([p], tables, Weights())
    assert [type(r).__name__ for r in position] == ["SpecialTokens", "ExactLength", "Locks"]
    assert stepwise == []
    _, stepwise = build_rules([plan(vocab, tables, "春风")], tables, Weights(rhythm=0, three_level_tail=0))
    assert [type(r).__name__ for r in stepwise] == ["RepeatsMirrored"]


# ---- impossible requests are refused up front -------------------------------------------


@pytest.mark.parametrize(
    ("upper", "kw", "constraint", "words"),
    [
        ("春风，秋雨", {"locks": "__花__"}, "locks", "punctuation"),
        ("春风秋雨", {"locks": "_春__"}, "locks", "no reuse"),
        ("春风秋雨", {"locks": "花，__"}, "locks", "punctuation"),
        ("春风秋雨", {"locks": "花_"}, "locks", "characters"),
        ("天天向上", {"locks": "花月__"}, "locks", "repeat"),
        ("春风秋雨", {"locks": "花_花_"}, "locks", "repeats must mirror"),
        ("千山雪", {"locks": "__树"}, "tone_end", "level"),
        ("春风秋雨", {"required_chars": "秋"}, "required_chars", "no reuse"),
        ("春风", {"required_chars": "花月山"}, "required_chars", "free positions"),
        ("春风", {"required_chars": "哔"}, "required_chars", "vocabulary"),
        ("春风", {"required_first": "花", "locks": "月_"}, "required_first", "conflicts"),
        ("“春风”", {"required_first": "花", "locks": "_月__"}, "required_first", "conflicts"),
        ("春风", {"required_first": "春"}, "required_first", "no reuse"),  # named 藏头, not a lock
        ("春风", {"required_first": "哔"}, "required_first", "vocabulary"),
        ("春风", {"required_first": "，"}, "required_first", "punctuation"),
        ("千山雪", {"required_chars": "树木", "locks": "人__"}, "required_chars", "tone"),
        ("", {}, "length", "empty"),
        ("春风", {"mode": "ancient"}, "tone_mode", "unknown tone mode"),
    ],
)
def test_impossible_constraints_name_the_constraint(vocab, tables, upper, kw, constraint, words):
    with pytest.raises(ConstraintError) as err:
        plan(vocab, tables, upper, **kw)
    assert err.value.constraint == constraint
    assert words in err.value.en and err.value.zh in str(err.value)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in err.value.zh)


@pytest.mark.parametrize("upper", ["春风秋雨", "“春风”秋雨", "《春风》"])
def test_required_first_sits_on_the_first_character_after_opening_punctuation(vocab, tables, upper):
    p = plan(vocab, tables, upper, required_first="花")
    first = 1 if upper[0] in "“《" else 0
    assert p.lock[first] == ids(vocab, "花")[0]
    assert [i for i, t in enumerate(p.lock) if t >= 0] == [first]  # the opening mark stays mirrored
    assert p.punct[0] >= 0 if first else p.punct[0] < 0


def test_a_lock_on_a_repeated_position_spreads_to_its_group(vocab, tables):
    p = plan(vocab, tables, "天天向上", locks="_花__")
    flower = ids(vocab, "花")[0]
    assert p.lock[:2] == (flower, flower) and p.copy_of[1] == 0
    assert p.free == (False, False, True, True)


@pytest.mark.parametrize("pos", [0, 1, 2, 3])
def test_step_rules_on_a_shortlist_are_the_rules_on_its_columns(vocab, tables, pos):
    """``rule.on_columns(ids)`` on scores over each request's listed tokens gives the rule's
    own result on those tokens, with the chosen tokens given as columns; two requests with
    lists and required characters of different sizes (the padding of both)."""
    plans = [
        plan(vocab, tables, "春风秋雨", required_chars="花月", tone_end=False),
        plan(vocab, tables, "千山暮雪", required_chars="香"),
    ]
    lists = [sorted({EOS_ID, *ids(vocab, "花月山人水年香树")}), sorted({EOS_ID, *ids(vocab, "香树人天")})]
    width = max(len(row) for row in lists)
    listed = np.array([row + [PAD_ID] * (width - len(row)) for row in lists], dtype=np.int64)  # (N, M)
    gen = np.random.default_rng(pos)
    beams = 3
    row = np.repeat(np.arange(2, dtype=np.int64), beams)  # (B,)
    picks = (
        np.stack([gen.integers(len(lists[int(r)]), size=pos) for r in row])
        .reshape(len(row), pos)
        .astype(np.int64)
    )  # (B, pos) columns
    prefix = listed[row[:, None], picks]  # (B, pos) the same tokens as ids
    scores = gen.standard_normal((len(row), tables.size), dtype=np.float32)
    columns = listed[row]  # (B, M)
    for rule in (RepeatsMirrored(plans), RequiredChars(plans, tables), NoThreeLevelTail(plans, tables, 2.0)):
        # (copies: a rule may change the scores it is given in place)
        want = np.take_along_axis(rule(scores.copy(), Step(pos, prefix, row)), columns, 1)
        got = rule.on_columns(listed)(np.take_along_axis(scores, columns, 1), Step(pos, picks, row))
        pad = columns == PAD_ID
        assert got.dtype == want.dtype == np.float32, type(rule).__name__
        assert np.array_equal(got[~pad], want[~pad]), type(rule).__name__
    banked = RequiredChars(plans, tables)
    want_banks = np.take_along_axis(banked.banks(Step(pos, prefix, row), tables.size), columns, 1)
    got_banks = banked.on_columns(listed).banks(Step(pos, picks, row), width)
    assert np.array_equal(got_banks[columns != PAD_ID], want_banks[columns != PAD_ID])


def test_a_shortlist_without_a_required_character_is_refused(vocab, tables):
    rule = RequiredChars([plan(vocab, tables, "春风秋雨", required_chars="花")], tables)
    with pytest.raises(ValueError, match="required"):
        rule.on_columns(np.array([sorted({EOS_ID, *ids(vocab, "山人")})], dtype=np.int64))


def test_classical_tables_follow_the_rusheng_table_the_check_reads(vocab, tmp_path, monkeypatch):
    """Tables kept for the classical mode are kept under the 入声 table they were read with: a
    process whose ``RUSHENG_TABLE`` changes (a test, an operator's restart of the same object)
    must not end lines with a character the check now reads oblique."""
    tables = VocabTables.build(vocab)  # a fresh one: nothing kept yet
    one = vocab.encode("一")[0]  # level today, 入声 in the 平水韵
    table = tmp_path / "rusheng.txt"
    table.write_text("国竹白", encoding="utf-8")
    monkeypatch.setenv("RUSHENG_TABLE", str(table))
    assert char_tone("一", "classical") == Tone.LEVEL
    assert tables.end_ok("classical", Tone.LEVEL)[one]
    table.write_text("国竹白一", encoding="utf-8")  # the same file, changed
    os.utime(table, ns=(1, 2))  # another stamp, whatever the clock's grain
    assert char_tone("一", "classical") == Tone.OBLIQUE
    assert not tables.end_ok("classical", Tone.LEVEL)[one]
    table.write_text("国竹白", encoding="utf-8")
    os.utime(table, ns=(3, 4))
    assert tables.end_ok("classical", Tone.LEVEL)[one]
    monkeypatch.delenv("RUSHENG_TABLE")
    assert char_tone("一", "classical") == Tone.OBLIQUE
    assert not tables.end_ok("classical", Tone.LEVEL)[one]
    assert tables.fixed_tone("classical")[one] == int(Tone.OBLIQUE)
