"""The sensitive-word filter inside the search (model/decoding/blocked.py), with real tiny
models: listed words never come out where they would be words, and the answer keeps its size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from data.segment import boundaries
from data.sensitive import SensitiveFilter
from data.vocab import Vocab
from model.decoding.blocked import BlockedWords, NoBlockedWords, key_of
from model.decoding.decoder import Decoder, ModelView
from model.decoding.options import DecodeOptions
from model.decoding.plan import ConstraintError
from model.export.engines import torch_decoder
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer
from tests.model.decoding.fixtures import decode_vocab, tiny_model, tiny_tagger


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    return decode_vocab(tmp_path_factory.mktemp("blocked_vocab"), pairs)


@pytest.fixture(scope="module")
def model(vocab: Vocab) -> CoupletTransformer:
    return tiny_model(vocab, seed=3)


@pytest.fixture(scope="module")
def tagger(vocab: Vocab) -> CoupletTagger:
    return tiny_tagger(vocab, seed=4)


def texts(decoder: Decoder, upper: str, n: int = 10, **options: object) -> list[str]:
    with torch.inference_mode():
        result = decoder.generate(upper, DecodeOptions(n_best=n, **options))  # type: ignore[arg-type]
    return [c.text for c in result.candidates]


def word_hits(words: list[str], upper: str, lines: list[str]) -> list[str]:
    """Lines holding a listed word where it counts (on the upper line's word boundaries)."""
    f = SensitiveFilter(words, normalise=False)
    return [line for line in lines if not f.is_clean(line, boundaries(upper))]


def test_table_round_trip_and_lookup(vocab: Vocab, tmp_path: Path) -> None:
    table = BlockedWords.from_words(["春风", "明月", "花", "不在词表里的字䶮"], vocab.pieces)
    assert len(table) == 3 and table.lengths == (1, 2)  # the word with an unknown character is left out
    table.save(tmp_path / "blocked.npz")
    again = BlockedWords.load(tmp_path / "blocked.npz")
    assert again.keys.dtype == again.last.dtype == np.int64
    assert np.array_equal(again.keys, table.keys) and np.array_equal(again.last, table.last)
    ids = np.array([vocab.encode("春风"), vocab.encode("风春"), vocab.encode("明月")], dtype=np.int64)
    assert again.contains(ids, 2).tolist() == [True, False, True]
    assert again.by_key[key_of(vocab.encode("春"), 2)] == vocab.encode("风")
    assert key_of(vocab.encode("秋"), 2) not in again.by_key
    assert again.singles == vocab.encode("花")


@pytest.mark.parametrize("upper", ["两个黄鹂鸣翠柳", "海纳百川有容乃大"])
@pytest.mark.parametrize("proposer", [False, True])
def test_listed_words_never_come_out_and_the_answer_keeps_its_size(
    model: CoupletTransformer, tagger: CoupletTagger, vocab: Vocab, upper: str, proposer: bool
) -> None:
    """Words taken from the unfiltered answer itself, so the model does want them; with the
    proposer the search runs over its shortlist's columns."""
    tag = tagger if proposer else None
    plain = texts(torch_decoder(model, vocab, proposer=tag), upper)
    bounds = boundaries(upper)
    words = sorted(
        {
            line[i : i + 2]
            for line in plain[:4]
            for i in range(len(line) - 1)
            if not bounds[i + 1] or (bounds[i] and bounds[i + 2])  # a span that counts there
        }
    )
    assert words and len(word_hits(words, upper, plain)) >= 4
    blocked = BlockedWords.from_words(words, vocab.pieces)
    found = texts(torch_decoder(model, vocab, proposer=tag, blocked=blocked), upper)
    assert word_hits(words, upper, found) == []
    assert len(found) == len(plain) == 10


def test_repeats_are_looked_ahead(model: CoupletTransformer, vocab: Vocab) -> None:
    """风声/雨声/读书声/声声/入耳: the lower line's character at position 1 comes back at 3, 6,
    7 and 8, and 7-8 (声声) is a word. With every doubled character but one listed, a search
    that only looked back would choose position 1 freely and die at 8; looking ahead it
    takes the one character left there."""
    upper = "风声雨声读书声声声入耳"
    plain = texts(torch_decoder(model, vocab), upper)
    # a character no beam chose there: without the look-ahead every beam would die
    chosen = {x[1] for x in plain}
    keep = next(p for p in ("月", "花", "云", "山") if p in vocab and p not in upper and p not in chosen)
    doubles = [p + p for p in vocab.pieces if len(p) == 1 and p != keep]
    blocked = BlockedWords.from_words(doubles, vocab.pieces)
    rule = NoBlockedWords([torch_decoder(model, vocab).plan(upper, DecodeOptions())], blocked)
    assert 1 in rule.ahead[0]  # choosing position 1 completes the word at 7-8
    found = texts(torch_decoder(model, vocab, blocked=blocked), upper)
    assert len(found) == len(plain) and all(line[7:9] == keep + keep for line in found)


def test_locks_that_spell_a_listed_word_are_refused(model: CoupletTransformer, vocab: Vocab) -> None:
    blocked = BlockedWords.from_words(["明月"], vocab.pieces)
    decoder = torch_decoder(model, vocab, blocked=blocked)
    upper = "两个黄鹂鸣翠柳"  # 两个/黄鹂/鸣/翠柳: positions 3-4 (黄鹂) are a word
    with pytest.raises(ConstraintError) as err:
        texts(decoder, upper, locks="__明月___")
    assert err.value.constraint == "sensitive"
    # a lock that forces the word's first character only: the search avoids completing it
    found = texts(decoder, upper, locks="__明____")
    assert found and all(line[2:4] != "明月" for line in found)


def test_a_word_across_the_upper_lines_word_boundary_is_let_through(
    model: CoupletTransformer, vocab: Vocab
) -> None:
    """两个/黄鹂: 个黄 straddles them, so locks spelling a listed word there are the user's
    business."""
    assert boundaries("两个黄鹂鸣翠柳")[:4] == (True, False, True, False)
    blocked = BlockedWords.from_words(["明月"], vocab.pieces)
    found = texts(torch_decoder(model, vocab, blocked=blocked), "两个黄鹂鸣翠柳", locks="_明月____")
    assert found and all(line[1:3] == "明月" for line in found)


def test_a_listed_single_character_is_never_written_and_cannot_be_locked(
    model: CoupletTransformer, vocab: Vocab
) -> None:
    upper = "两个黄鹂鸣翠柳"
    plain = texts(torch_decoder(model, vocab), upper)
    banned = plain[0][2]  # the model's own choice
    decoder = torch_decoder(model, vocab, blocked=BlockedWords.from_words([banned], vocab.pieces))
    found = texts(decoder, upper)
    assert len(found) == len(plain) and all(banned not in line for line in found)
    with pytest.raises(ConstraintError) as err:
        texts(decoder, upper, locks="__" + banned + "____")
    assert err.value.constraint == "sensitive"


@pytest.mark.parametrize(
    ("upper", "line", "bounds"),
    [
        # jieba: 学/《/论语/》/言 on the whole line, 学/论/语言 on the line without its marks
        ("学《论语》言", "学论语言", (True, True, False, True, True)),
        # 看/“/明月/”/光 on the whole line, 看/明月光 without the marks
        ("看“明月”光", "看明月光", (True, True, False, True, True)),
    ],
)
def test_the_search_reads_the_whole_lines_words_when_marks_are_left_out(
    vocab: Vocab, model: CoupletTransformer, upper: str, line: str, bounds: tuple[bool, ...]
) -> None:
    """The model reads the line without 《》“” (ModelView), which jieba may segment otherwise:
    the plan the filter in the search reads carries the whole line's boundaries, those the
    check of a finished line reads, so the two never disagree about where a word counts."""
    assert boundaries(line) != bounds  # the case this is about: the shortened line segments otherwise
    view = ModelView.of(upper, vocab)
    assert view.line == line and view.word_bounds() == bounds
    plan = view.plan(torch_decoder(model, vocab), DecodeOptions())
    assert plan.upper == line and plan.bounds() == bounds
    plain = ModelView.of(line, vocab).plan(torch_decoder(model, vocab), DecodeOptions())
    assert plain.word_bounds is None and plain.bounds() == boundaries(line)  # nothing left out
