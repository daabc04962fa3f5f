"""Property: every candidate of a random CoupletTransformer on random upper lines (with
punctuation, repeats, palindromes, lengths 1 to 32) keeps every hard rule and every lock."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data.paths import graph_cache_dir
from data.rules import check
from data.text import is_han, is_punct
from data.vocab import Vocab
from model.decoding.decoder import Decoder
from model.decoding.long_lines import LONG_FROM
from model.decoding.options import DecodeOptions
from model.export.engines import torch_decoder
from model.net.checkpoint import build_model
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, ModelConfig
from tests.model.decoding.fixtures import SMALL, decode_vocab

MARKS = "，。！？；："


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    return decode_vocab(tmp_path_factory.mktemp("decode_vocab"), pairs)


@pytest.fixture(scope="module", params=["model", "tagger shortlist", "tagger shortlist onnx int8"])
def decoder(vocab: Vocab, request: pytest.FixtureRequest) -> Decoder:
    """The model alone, or with a tagger whose top 6 tokens per position are all the output
    layer scores (few enough that the rules often need the fallback to every token), also as
    served: int8 on ONNX Runtime."""
    torch.manual_seed(7)
    cfg = ModelConfig(vocab_size=len(vocab), **SMALL)
    model = CoupletTransformer(cfg).eval()
    if request.param == "model":
        return torch_decoder(model, vocab)
    tagger = build_model(cfg.with_(kind="tagger"))
    served = request.param.endswith("onnx int8")
    return torch_decoder(
        model,
        vocab,
        int8=served,
        proposer=cast(CoupletTagger, tagger).eval(),
        runtime="onnx" if served else "torch",
        graph_cache=graph_cache_dir(),
    )


def han_chars(vocab: Vocab) -> list[str]:
    return sorted(p for p in vocab.pieces if len(p) == 1 and is_han(p))


@st.composite
def upper_lines(draw: st.DrawFn, pool: list[str]) -> str:
    """Lines drawn from a small pool (so characters repeat), with marks, or palindromes."""
    chars = st.sampled_from([*pool[:24], "哔"])  # 哔 is outside the vocabulary
    if draw(st.booleans()):
        half = draw(st.lists(chars, min_size=1, max_size=16))
        middle = draw(st.lists(chars, max_size=1))
        return "".join(half + middle + half[::-1])
    items = draw(st.lists(st.one_of(chars, chars, chars, st.sampled_from(MARKS)), min_size=1, max_size=32))
    return "".join(items)


@st.composite
def requests(draw: st.DrawFn, pool: list[str]) -> tuple[str, DecodeOptions]:
    """An upper line and options whose locks / required characters can be met together."""
    upper = draw(upper_lines(pool))
    spare = [ch for ch in pool[24:] if ch not in upper]
    heads = [i for i, ch in enumerate(upper) if not is_punct(ch) and upper.index(ch) == i]
    last = max((i for i, ch in enumerate(upper) if not is_punct(ch)), default=-1)
    heads = [h for h in heads if last < 0 or upper[h] != upper[last]]  # the tone-end group stays free
    locked = draw(st.lists(st.sampled_from(heads), unique=True, max_size=3)) if heads else []
    chars = draw(
        st.lists(st.sampled_from(spare), unique=True, min_size=len(locked) + 2, max_size=len(locked) + 2)
    )
    lock_of = dict(zip(locked, chars, strict=False))
    pattern = "".join(lock_of.get(upper.index(ch), "_") for ch in upper)
    free = len([h for h in heads if h not in lock_of]) + (1 if last >= 0 else 0)
    required = "".join(chars[len(locked) :][: max(0, min(2, free - 1))])
    if len(upper) >= LONG_FROM:  # a long line (33, a palindrome's most) is refused 嵌字
        required = ""
    options = DecodeOptions(
        n_best=draw(st.integers(1, 6)),
        tone_mode=draw(st.sampled_from(["modern", "lenient"])),
        locks=pattern if locked else None,
        required_chars=required,
        rhythm_weight=draw(st.sampled_from([0.0, 1.0, 5.0])),
        three_level_weight=draw(st.sampled_from([0.0, 2.0])),
        diversity=draw(st.sampled_from([0.0, 0.0, 1.0])),  # diverse beam search
    )
    return upper, options


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_candidate_keeps_every_hard_rule_and_lock(decoder, vocab, data):
    upper, options = data.draw(requests(han_chars(vocab)))
    if decoder.proposer is not None:  # the normal search or the fast mode, both with the shortlist
        options = replace(options, shortlist=6, fast=data.draw(st.booleans()), proposals=12)
    result = decoder.generate(upper, options)
    assert 1 <= len(result.candidates) <= options.n_best
    assert len({c.text for c in result.candidates}) == len(result.candidates)
    assert ("哔" in result.unknown_chars) == ("哔" in upper)
    for c in result.candidates:
        report = check(upper, c.text, options.tone_mode)
        assert report.hard_ok, (upper, c.text, report)
        assert report.tone_end is not False, (upper, c.text)  # the decoder's tone table agrees
        assert c.report == report
        if options.locks:
            assert all(lk == "_" or lk == ch for lk, ch in zip(options.locks, c.text, strict=True))
        assert all(ch in c.text for ch in options.required_chars)
