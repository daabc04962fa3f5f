"""Regression test of the shipped default model: every candidate keeps every hard rule.

Quality figures live in `make eval` and the model card; this only guards the contract a
person relies on when they run `make serve` on a fresh clone.
"""

import pytest

from data.paths import default_model_dir
from model.decoding.decoder import Decoder
from model.decoding.options import DecodeOptions
from model.export.engines import torch_decoder
from model.export.models import models_of
from model.store.bundle import load_bundle
from model.store.layout import verify_bundle

UPPERS = [
    "春风得意马蹄疾",
    "海内存知己",
    "天天向上，步步高升",  # repeats and punctuation
    "上海自来水来自海上",  # a palindrome
    "一帆风顺年年好",
    "绿水青山，千秋画卷",
    "月",  # one character
    "书山有路勤为径，学海无涯苦作舟",
    "红红火火过大年，欢欢喜喜迎新春",
]


@pytest.fixture(scope="module")
def decoder() -> Decoder:
    root = default_model_dir()
    bundle = load_bundle(root)
    return torch_decoder(models_of(bundle).model, bundle.vocab)


def test_bundle_fits_the_size_budget():
    size = sum(p.stat().st_size for p in default_model_dir().iterdir() if p.is_file())
    assert size <= 40 * 10**6


@pytest.mark.parametrize("upper", UPPERS)
def test_every_candidate_keeps_the_hard_rules(decoder: Decoder, upper: str):
    result = decoder.generate(upper, DecodeOptions(n_best=10))
    assert result.candidates, upper
    texts = [c.text for c in result.candidates]
    assert len(set(texts)) == len(texts)
    for cand in result.candidates:
        report = cand.report
        assert report.length and report.punctuation and report.repeats and report.no_reuse, (upper, cand)
        assert report.tone_end is not False, (upper, cand.text)


def test_locks_and_unknown_characters(decoder: Decoder):
    result = decoder.generate("春风得意马蹄疾", DecodeOptions(n_best=5, locks="__秋____"))
    assert all(c.text[2] == "秋" for c in result.candidates)
    unknown = decoder.generate("春风𠀋意", DecodeOptions(n_best=3))
    assert "𠀋" in unknown.unknown_chars
    assert all(len(c.text) == 4 for c in unknown.candidates)


def test_the_shipped_bundle_matches_its_manifest():
    # after replacing its files: python -m model.bundle --write-manifest models/default
    assert verify_bundle(default_model_dir())
