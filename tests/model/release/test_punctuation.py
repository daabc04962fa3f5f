"""Punctuation marks the model never saw (。《》“” and the like) are punctuation, not unknown
characters: a final 。 leaves the shipped model's candidates and the training-set badge as
they are without it, and marks inside the line are mirrored (issue 25, item 3)."""

from __future__ import annotations

import pytest

from data.paths import corpus_dir, default_model_dir, graph_cache_dir
from data.text import PUNCTUATION, is_punct
from model.decoding.decoder import Decoder, ModelView
from model.decoding.options import DecodeOptions
from model.decoding.plan import ConstraintError
from model.export.engines import torch_decoder
from model.export.models import models_of
from model.store.bundle import Bundle, decoder_graph_keys, load_bundle
from tests.model.conftest import FIXTURES, read_pairs

MARKS = "，。、；：？！“”‘’《》（）·～—…"


def upper_lines(n: int = 300) -> list[str]:
    """The first ``n`` upper lines of the wb14123 test set when the corpora are here, else the
    fixture couplets' (50)."""
    test = corpus_dir() / "wb14123_test.tsv"
    rows = test.read_text("utf-8").splitlines() if test.is_file() else []
    uppers = [r.split("\t")[0] for r in rows if "\t" in r]
    uppers = [u for u in uppers if u and not is_punct(u[-1])][:n]
    return uppers or [u for u, _ in read_pairs(FIXTURES / "couplets50.tsv")]


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return load_bundle(default_model_dir())


@pytest.fixture(scope="module")
def decoder(bundle: Bundle) -> Decoder:
    keys = decoder_graph_keys(bundle)  # the site's: exported once a run
    models = models_of(bundle)
    return torch_decoder(models.model, bundle.vocab, int8=True, proposer=models.proposer, runtime="onnx",
                         pairing=bundle.pairing, blocked=bundle.blocked, graph_cache=graph_cache_dir(),
                         graph_keys=keys)  # fmt: skip


def test_every_mark_couplets_use_is_punctuation() -> None:
    assert set(MARKS) <= PUNCTUATION


@pytest.mark.slow
def test_a_final_full_stop_changes_neither_candidates_nor_badge(bundle: Bundle, decoder: Decoder) -> None:
    uppers = upper_lines()
    options = DecodeOptions(n_best=10)
    plain = decoder.generate_batch(uppers, options)
    stopped = decoder.generate_batch([u + "。" for u in uppers], options)
    for u, a, b in zip(uppers, plain, stopped, strict=True):
        assert [c.text + "。" for c in a.candidates] == [c.text for c in b.candidates], u
        assert [c.score for c in a.candidates] == [c.score for c in b.candidates], u
        assert b.unknown_chars == a.unknown_chars and "。" not in b.unknown_chars
        assert all(c.report.punctuation and c.report.length for c in b.candidates)
        assert bundle.in_training_data(u + "。") == bundle.in_training_data(u)
    if corpus_dir().joinpath("wb14123_test.tsv").is_file():
        assert len(uppers) == 300
    for known in ("烟锁池塘柳", "书山有路勤为径"):  # training upper lines (the test set's are not)
        assert bundle.in_training_data(known) and bundle.in_training_data(known + "。")
        assert bundle.in_training_data(known + "！") and not bundle.in_training_data(known + "好")


@pytest.mark.parametrize(
    "upper",
    ["读《论语》，知礼义", "“春风”得意马蹄疾！", "（上联）千山鸟飞绝", "明月·清风～", "天对地。雨对风"],
)
def test_marks_inside_the_line_are_mirrored_and_not_unknown(decoder: Decoder, upper: str) -> None:
    result = decoder.generate(upper, DecodeOptions(n_best=5))
    assert result.candidates and result.unknown_chars == []
    for c in result.candidates:
        assert [i for i, ch in enumerate(c.text) if is_punct(ch)] == [
            i for i, ch in enumerate(upper) if is_punct(ch)
        ]
        assert all(
            c.text[i] == ch for i, ch in enumerate(upper) if is_punct(ch) and ch not in "，、；：？！—…"
        )
        assert all(getattr(c.report, rule) for rule in ("length", "punctuation", "repeats", "no_reuse")), (
            c.text
        )


def test_locks_over_a_left_out_mark(decoder: Decoder, bundle: Bundle) -> None:
    view = ModelView.of("风弦未拨心先乱。", bundle.vocab)
    assert view.line == "风弦未拨心先乱" and view.locks("______闲。", bundle.vocab) == "______闲"
    top = decoder.generate("风弦未拨心先乱。", DecodeOptions(n_best=3, locks="______闲_")).candidates[0].text
    assert top[6:] == "闲。"
    with pytest.raises(ConstraintError) as err:
        decoder.generate("风弦未拨心先乱。", DecodeOptions(locks="_______好"))
    assert err.value.constraint == "locks" and "punctuation" in err.value.en
    with pytest.raises(ConstraintError):
        decoder.generate("风弦未拨心先乱。", DecodeOptions(locks="___"))
