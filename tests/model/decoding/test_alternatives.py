"""Alternatives at one position of a lower line (``Decoder.alternatives``), with real tiny models:
every listed character keeps every hard rule, the list is ranked by the search's own score of the
whole line, the line's own character is in it, repeats change together, locks and listed words
hold, and bad input is refused in Chinese and English."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from data.rules import check
from data.segment import boundaries
from data.text import is_punct
from data.vocab import BOS_ID, Vocab
from model.decoding.blocked import BlockedWords
from model.decoding.decoder import Decoder
from model.decoding.options import DecodeOptions
from model.decoding.plan import ConstraintError
from model.export.engines import torch_decoder
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, ModelConfig
from tests.model.decoding.fixtures import decode_vocab, tiny_model

UPPERS = ["两个黄鹂鸣翠柳", "风声雨声读书声", "海纳百川有容乃大", "天对地，雨对风"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    return decode_vocab(tmp_path_factory.mktemp("alternatives_vocab"), pairs)


@pytest.fixture(scope="module")
def model(vocab: Vocab) -> CoupletTransformer:
    return tiny_model(vocab, seed=5)


@pytest.fixture(scope="module")
def decoder(model: CoupletTransformer, vocab: Vocab) -> Decoder:
    return torch_decoder(model, vocab)


def best_line(decoder: Decoder, upper: str, **options: object) -> str:
    with torch.inference_mode():
        return decoder.generate(upper, DecodeOptions(n_best=1, **options)).candidates[0].text  # type: ignore[arg-type]


def hard_ok(upper: str, lower: str) -> bool:
    report = check(upper, lower)
    return report.hard_ok and report.tone_end is not False


@pytest.mark.parametrize("upper", UPPERS)
def test_every_alternative_keeps_every_rule_and_they_come_best_first(decoder: Decoder, upper: str) -> None:
    lower = best_line(decoder, upper)
    for position in [i for i, ch in enumerate(upper) if not is_punct(ch)]:
        found = decoder.alternatives(upper, lower, position, k=10)
        assert found.upper == upper and found.lower == lower and found.position == position
        alternatives = found.alternatives
        assert len(alternatives) >= 10  # the whole vocabulary to choose from: never short
        ranks = [a.rank_score for a in alternatives]
        assert ranks == sorted(ranks, reverse=True)
        assert [a.char for a in alternatives if a.original] == [lower[position]]
        assert len({a.char for a in alternatives}) == len(alternatives)
        for a in alternatives:
            assert a.text[position] == a.char
            assert all(a.text[i] == lower[i] for i in range(len(lower)) if i not in found.positions)
            assert hard_ok(upper, a.text), (upper, a.text)
            assert a.report == check(upper, a.text)
            assert math.isfinite(a.rank_score) and a.score <= 0


def test_the_lines_own_score_is_the_searchs(
    decoder: Decoder, model: CoupletTransformer, vocab: Vocab
) -> None:
    """The original line scores exactly as the beam search scored it (the same rules, the same
    model steps), and ``score`` is the model's teacher-forced log-probability of the line."""
    upper = "两个黄鹂鸣翠柳"
    with torch.inference_mode():
        candidate = decoder.generate(upper, DecodeOptions(n_best=1)).candidates[0]
    own = next(a for a in decoder.alternatives(upper, candidate.text, 2).alternatives if a.original)
    assert own.rank_score == pytest.approx(candidate.rank_score, abs=1e-5)
    assert own.score == pytest.approx(candidate.score, abs=1e-5)
    tgt = vocab.encode(candidate.text)
    with torch.inference_mode():
        logits = model(torch.tensor([vocab.encode(upper)]), torch.tensor([[BOS_ID, *tgt[:-1]]]))
        logp = F.log_softmax(logits[0].float(), dim=-1)
    forward = float(sum(logp[i, t] for i, t in enumerate(tgt))) / len(tgt)
    assert own.score == pytest.approx(forward, abs=1e-4)


def test_a_wider_pool_can_only_add_better_lines(decoder: Decoder) -> None:
    """The pre-ranking keeps the best ``pool``; scoring every allowed character whole gives the
    same scores for the characters both lists hold."""
    upper = "海纳百川有容乃大"
    lower = best_line(decoder, upper)
    narrow = {a.char: a.rank_score for a in decoder.alternatives(upper, lower, 3, k=20, pool=24).alternatives}
    wide = {
        a.char: a.rank_score for a in decoder.alternatives(upper, lower, 3, k=20, pool=100_000).alternatives
    }
    assert min(wide.values()) >= min(narrow.values()) - 1e-6  # every char's score is its own
    for ch in set(narrow) & set(wide):
        assert narrow[ch] == pytest.approx(wide[ch], abs=1e-5)


def test_a_repeated_position_changes_with_its_copies(decoder: Decoder) -> None:
    upper = "风声雨声读书声"  # 声 at 1, 3 and 6
    lower = best_line(decoder, upper)
    for position in (1, 3, 6):
        found = decoder.alternatives(upper, lower, position, k=8)
        assert found.positions == [1, 3, 6]
        for a in found.alternatives:
            assert a.text[1] == a.text[3] == a.text[6] == a.char
            assert hard_ok(upper, a.text)
    # a character that is not repeated may not take one the line already holds elsewhere
    found = decoder.alternatives(upper, lower, 0, k=20)
    assert found.positions == [0]
    assert not {a.char for a in found.alternatives} & set(lower[1:])


def test_the_end_keeps_its_tone(decoder: Decoder) -> None:
    upper = "两个黄鹂鸣翠柳"  # ends oblique: the lower line ends level
    lower = best_line(decoder, upper)
    found = decoder.alternatives(upper, lower, 6, k=20)
    assert all(a.report.tone_end is not False for a in found.alternatives)
    assert all(a.char not in upper for a in found.alternatives)


def test_locks_hold(decoder: Decoder) -> None:
    upper = "两个黄鹂鸣翠柳"
    lower = best_line(decoder, upper, locks="____月__")
    assert lower[4] == "月"
    # elsewhere the locked character may not come in
    found = decoder.alternatives(upper, lower, 1, DecodeOptions(locks="____月__"), k=20)
    assert "月" not in {a.char for a in found.alternatives} and len(found.alternatives) > 1
    # the locked position itself has only its lock
    locked = decoder.alternatives(upper, lower, 4, DecodeOptions(locks="____月__"))
    assert [(a.char, a.original) for a in locked.alternatives] == [("月", True)]


def test_required_characters_stay(decoder: Decoder) -> None:
    upper = "两个黄鹂鸣翠柳"
    lower = best_line(decoder, upper, required_chars="春")
    at = lower.index("春")
    found = decoder.alternatives(upper, lower, at, DecodeOptions(required_chars="春"))
    assert [a.char for a in found.alternatives] == ["春"]  # 嵌字 has nowhere else to go


def test_no_alternative_completes_a_listed_word(model: CoupletTransformer, vocab: Vocab) -> None:
    """The characters the unfiltered decoder offers after 黄鹂's first place are listed as words
    with it; the filtered decoder offers none of them there."""
    upper = "两个黄鹂鸣翠柳"  # 两个/黄鹂/鸣/翠柳: positions 2-3 are a word
    assert boundaries(upper)[2:5] == (True, False, True)
    plain = torch_decoder(model, vocab)
    lower = best_line(plain, upper)
    offered = [a.char for a in plain.alternatives(upper, lower, 3, k=6).alternatives if not a.original]
    words = [lower[2] + ch for ch in offered]
    blocked = torch_decoder(model, vocab, blocked=BlockedWords.from_words(words, vocab.pieces))
    found = blocked.alternatives(upper, lower, 3, k=20).alternatives
    assert found and not {a.char for a in found} & set(offered)
    assert all(a.text[2:4] not in words for a in found)


def test_with_a_proposer_the_tagger_opinion_is_in_the_rank(model: CoupletTransformer, vocab: Vocab) -> None:
    torch.manual_seed(6)
    cfg = ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=2, d_ff=64, kind="tagger")
    decoder = torch_decoder(model, vocab, proposer=CoupletTagger(cfg).eval())
    upper = "两个黄鹂鸣翠柳"
    lower = best_line(decoder, upper)
    with_tagger = decoder.alternatives(upper, lower, 1).alternatives
    without = decoder.alternatives(upper, lower, 1, DecodeOptions(ensemble_weight=0.0)).alternatives
    same = {a.char: a for a in without}
    assert all(hard_ok(upper, a.text) for a in with_tagger)
    for a in with_tagger:  # the model's own score is the same; the rank adds the tagger's opinion
        if a.char in same:
            assert a.score == pytest.approx(same[a.char].score, abs=1e-5)
    assert any(
        a.rank_score != pytest.approx(same[a.char].rank_score, abs=1e-4)
        for a in with_tagger
        if a.char in same
    )


@pytest.mark.parametrize(
    ("upper", "lower", "position", "constraint", "zh", "en"),
    [
        ("两个黄鹂鸣翠柳", "一行白鹭上青", 1, "length", "一样长", "characters"),
        ("两个黄鹂鸣翠柳", "一行白鹭上青天", 7, "position", "位置", "position must be"),
        ("天对地，雨对风", "山对海，云对月", 3, "position", "标点", "mirrors the upper line's mark"),
        ("天对地，雨对风", "山对海云对月，", 1, "punctuation", "标点", "marks"),
        ("两个黄鹂鸣翠柳", "一行白鹭上青䶮", 1, "vocabulary", "字表", "vocabulary"),
    ],
)
def test_bad_input_is_refused_in_both_languages(
    decoder: Decoder, upper: str, lower: str, position: int, constraint: str, zh: str, en: str
) -> None:
    with pytest.raises(ConstraintError) as err:
        decoder.alternatives(upper, lower, position)
    assert err.value.constraint == constraint
    assert zh in err.value.zh and en in err.value.en and str(err.value) == f"{err.value.zh} / {err.value.en}"


def test_a_line_whose_rest_breaks_a_rule_has_no_alternative(decoder: Decoder) -> None:
    upper = "两个黄鹂鸣翠柳"
    with pytest.raises(ConstraintError) as err:  # 黄 at position 0 reuses the upper line's
        decoder.alternatives(upper, "黄行白鹭上青天", 3)
    assert err.value.constraint == "search" and "第4字" in err.value.zh
    # the broken position itself can be mended: every alternative there keeps the rules
    mended = decoder.alternatives(upper, "黄行白鹭上青天", 0).alternatives
    assert mended and not any(a.original for a in mended)
    assert all(hard_ok(upper, a.text) for a in mended)


def _same(a: object, b: object) -> bool:
    """The same answer: every field equal, the scores to 1e-5 (the walk scores a place's lines in
    a batch with the others', and a matrix product of another height may round its last bit
    otherwise), so the same characters in the same order."""
    if isinstance(a, ConstraintError) or isinstance(b, ConstraintError):
        return isinstance(a, ConstraintError) and isinstance(b, ConstraintError) and str(a) == str(b)
    return _close(dataclasses.asdict(a), dataclasses.asdict(b))  # type: ignore[call-overload]


def _close(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=1e-5)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("rules", [True, False])
def test_many_places_at_once_answer_as_each_alone(decoder: Decoder, rules: bool) -> None:
    """``alternatives_at`` walks the line once and scores each place's lines from where they leave
    it: every place's answer, or refusal, is the one ``alternatives`` gives it alone (``_same``;
    repeat groups, a mark's position and a place whose rest breaks a rule among them)."""
    cases = [
        ("风声雨声读书声", None, [6, 0, 3, 5]),
        ("天对地，雨对风", None, [0, 3, 6, 2]),
        ("两个黄鹂鸣翠柳", "黄行白鹭上青天", [3, 0, 6]),
    ]
    options = DecodeOptions(rules=rules)
    for upper, lower, positions in cases:
        lower = lower or best_line(decoder, upper)
        many = decoder.alternatives_at(upper, lower, positions, options, k=8, pool=16)
        assert len(many) == len(positions)
        for position, found in zip(positions, many, strict=True):
            try:
                alone: object = decoder.alternatives(upper, lower, position, options, k=8, pool=16)
            except ConstraintError as exc:
                alone = exc
            assert _same(found, alone), (upper, lower, position)
    refused = decoder.alternatives_at("两个黄鹂鸣翠柳", "一行白鹭上青", [0, 1])  # the lengths differ
    assert [f.constraint for f in refused if isinstance(f, ConstraintError)] == ["length", "length"]
