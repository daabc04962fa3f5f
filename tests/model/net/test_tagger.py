"""The encoder-only tagger, its lattice search, and the decoder's proposer path
(tagger proposals rescored by the encoder-decoder)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from data.rules import check
from data.text import is_han
from data.tones import Tone
from data.vocab import Vocab
from model.decoding.decoder import ModelView
from model.decoding.options import DecodeOptions
from model.decoding.search import rescore
from model.decoding.shortlist import Shortlist
from model.export.engines import torch_decoder
from model.export.models import models_of
from model.export.torch_engine import wrap
from model.net.batch import collate
from model.net.checkpoint import build_model, load_model
from model.net.tagger import CoupletTagger
from model.net.transformer import BOS_ID, EOS_ID, PAD_ID, CoupletTransformer, ModelConfig
from model.release.card import render
from model.release.card_sections import training_summary
from model.release.export import export_bundle
from model.store.bundle import load_bundle, model_meta
from model.store.layout import PROPOSER_WEIGHTS
from model.train import main
from model.training.greedy import greedy
from tests.model.decoding.fixtures import decode_vocab

SMALL: dict[str, Any] = {
    "d_model": 32,
    "n_heads": 2,
    "n_enc_layers": 2,
    "n_dec_layers": 1,
    "d_ff": 64,
    "dropout": 0.0,
}


@pytest.fixture(scope="module")
def dvocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    return decode_vocab(tmp_path_factory.mktemp("tagger_vocab"), pairs)


def random_models(vocab: Vocab, seed: int = 3) -> tuple[CoupletTransformer, CoupletTagger]:
    torch.manual_seed(seed)
    s2s = build_model(ModelConfig(vocab_size=len(vocab), **SMALL))
    tagger = build_model(ModelConfig(vocab_size=len(vocab), kind="tagger", **SMALL))
    assert isinstance(s2s, CoupletTransformer) and isinstance(tagger, CoupletTagger)
    return s2s.eval(), tagger.eval()


def test_build_model_picks_the_kind_and_refuses_unknown_ones() -> None:
    assert isinstance(build_model(ModelConfig(vocab_size=50, kind="tagger", **SMALL)), CoupletTagger)
    with pytest.raises(ValueError, match="unknown model kind"):
        build_model(ModelConfig(vocab_size=50, kind="diffusion", **SMALL))


def test_tagger_shapes_and_targets() -> None:
    tagger = build_model(ModelConfig(vocab_size=60, kind="tagger", **SMALL))
    batch = collate([([10, 11, 12], [20, 21, 22]), ([13], [23])])
    logits = tagger(batch.src, batch.tgt_in)
    assert logits.shape == (2, 3, 60)
    # one target per source position; EOS and the padding past a line's end are not targets
    assert tagger.targets(batch).tolist() == [[20, 21, 22], [23, PAD_ID, PAD_ID]]


def test_tagger_lattice_step_ignores_the_prefix_and_ends_lines() -> None:
    tagger = build_model(ModelConfig(vocab_size=60, kind="tagger", **SMALL)).eval()
    assert isinstance(tagger, CoupletTagger)
    steps = wrap(tagger)  # the lattice steps (model/decoding/lattice.py) on the tagger's one pass
    src = np.array([[10, 11, 12], [13, PAD_ID, PAD_ID]])
    lattice = steps.encode(src)
    with torch.inference_mode():  # the lattice is the tagger's logits, normalised once
        want = F.log_softmax(tagger.encode(torch.from_numpy(src)), -1).numpy()
    assert np.allclose(lattice, want, atol=1e-5)
    cache = steps.new_cache(lattice, src)
    a = steps.step(cache, np.array([BOS_ID, BOS_ID]), 1)
    b = steps.step(cache, np.array([40, 41]), 1)
    assert np.array_equal(a, b)
    assert np.allclose(np.exp(a[0]).sum(), 1.0, atol=1e-5)
    assert int(a[1].argmax()) == EOS_ID  # the second line has one character
    moved = steps.reorder_cache(cache, np.array([1, 1, 0]))
    at0, moved0 = steps.step(cache, src[:, 0], 0), steps.step(moved, np.zeros(3, dtype=np.int64), 0)
    assert np.array_equal(moved0[2], at0[0]) and np.array_equal(moved0[0], at0[1])


def test_greedy_on_a_tagger_takes_the_best_character_at_each_position(dvocab: Vocab) -> None:
    vocab = dvocab
    _, tagger = random_models(vocab)
    tagger.eval()
    uppers = ["海纳百川", "春风"]
    got = greedy(tagger, vocab, uppers)
    for upper, line in zip(uppers, got, strict=True):
        with torch.no_grad():
            logits = tagger.encode(torch.tensor([vocab.encode(upper)]))[0]
        logits[:, : EOS_ID + 1] = -torch.inf
        assert line == vocab.decode(logits.argmax(-1).tolist())
        assert len(line) == len(upper)


def test_rescore_equals_teacher_forced_log_probabilities(dvocab: Vocab) -> None:
    s2s, _ = random_models(dvocab)
    torch.manual_seed(0)
    src = torch.randint(5, len(dvocab), (2, 5))
    tokens = torch.randint(5, len(dvocab), (2, 3, 5))
    tokens[:, 1] = tokens[:, 0]  # shared prefixes are computed once: the figures must not change
    tokens[:, 2, :2] = tokens[:, 0, :2]
    for score_end in (False, True):
        got = rescore(wrap(s2s), src.numpy(), tokens.numpy(), score_end)
        for n in range(2):
            for k in range(3):
                target = tokens[n, k].tolist() + ([EOS_ID] if score_end else [])
                tgt_in = torch.tensor([[BOS_ID, *target[:-1]]])
                with torch.no_grad():
                    logp = F.log_softmax(s2s(src[n : n + 1], tgt_in)[0], -1)
                want = sum(float(logp[t, x]) for t, x in enumerate(target))
                assert float(got[n, k]) == pytest.approx(want, abs=1e-4)


UPPERS = ["春风得意", "天对地，雨对风。", "上海自来水来自海上", "山山水水", "海纳百川有容乃大"]


@pytest.mark.parametrize("int8", [False, True])
def test_proposer_candidates_keep_the_rules_and_carry_the_models_scores(dvocab: Vocab, int8: bool) -> None:
    s2s, tagger = random_models(dvocab)
    decoder = torch_decoder(s2s, dvocab, proposer=tagger, int8=int8)
    options = DecodeOptions(
        n_best=5, proposals=12, rhythm_weight=0.0, three_level_weight=0.0, fast=True, shortlist=0
    )
    for upper in UPPERS:
        result = decoder.generate(upper, options)
        assert 1 <= len(result.candidates) <= 5
        texts = [c.text for c in result.candidates]
        assert len(set(texts)) == len(texts)
        scores = [c.score for c in result.candidates]
        assert scores == sorted(scores, reverse=True)  # ranked by the encoder-decoder
        assert [c.rank_score for c in result.candidates] == pytest.approx(
            scores, abs=1e-4
        )  # proposer weight 0
        for c in result.candidates:
            assert check(upper, c.text).hard_ok, (upper, c.text)
            view = ModelView.of(upper, dvocab)  # the model reads the line without its final 。
            ids = dvocab.encode("".join(c.text[i] for i in view.kept))
            src = np.array([dvocab.encode(view.line)])
            exact = float(rescore(wrap(s2s), src, np.array([[ids]]))[0, 0]) / len(view.line)
            assert c.score == pytest.approx(exact, abs=0.05 if int8 else 1e-4)


def test_proposer_locks_and_required_characters(dvocab: Vocab) -> None:
    s2s, tagger = random_models(dvocab)
    decoder = torch_decoder(s2s, dvocab, proposer=tagger)
    result = decoder.generate(
        "海纳百川有容乃大", DecodeOptions(n_best=4, locks="__春_____", required_chars="月")
    )
    for c in result.candidates:
        assert c.text[2] == "春" and "月" in c.text and check("海纳百川有容乃大", c.text).hard_ok


def test_ensemble_weight_zero_without_shortlist_is_the_model_alone(dvocab: Vocab) -> None:
    s2s, tagger = random_models(dvocab)
    plain = torch_decoder(s2s, dvocab).generate("海纳百川有容乃大", DecodeOptions(n_best=5))
    options = DecodeOptions(n_best=5, ensemble_weight=0.0, shortlist=0)
    assert torch_decoder(s2s, dvocab, proposer=tagger).generate("海纳百川有容乃大", options) == plain


def sure_tagger(tagger: CoupletTagger, vocab: Vocab, word: str) -> CoupletTagger:
    """``tagger`` made sure of ``word``'s characters at every position, the first most."""
    with torch.no_grad():
        tagger.enc_norm.weight.zero_()
        tagger.enc_norm.bias.fill_(1.0)
        tagger.head.weight = torch.nn.Parameter(torch.zeros_like(tagger.head.weight))
        for rank, ch in enumerate(word):
            tagger.head.weight[vocab.encode(ch)[0]] = (30.0 - rank) / tagger.cfg.d_model
    return tagger


WORD = "金木水火土日月星辰云"


def test_ensemble_steers_the_search_but_scores_stay_the_models(dvocab: Vocab) -> None:
    """``score`` is the encoder-decoder's alone; ``rank``, which orders the candidates, adds
    the tagger's log-probability times the weight."""
    s2s, tagger = random_models(dvocab)
    upper = "春风得意"
    tagger = sure_tagger(tagger, dvocab, WORD)
    options = DecodeOptions(n_best=4, ensemble_weight=2.0, shortlist=0, rhythm_weight=0, three_level_weight=0)
    result = torch_decoder(s2s, dvocab, proposer=tagger).generate(upper, options)
    src = torch.tensor([dvocab.encode(upper)])
    with torch.inference_mode():
        lattice = F.log_softmax(tagger.encode(src)[0].float(), dim=-1)  # (L, V)
    for c in result.candidates:
        assert set(c.text) <= set(WORD) and check(upper, c.text).hard_ok
        ids = dvocab.encode(c.text)
        exact = float(rescore(wrap(s2s), src.numpy(), np.array([[ids]]))[0, 0]) / len(upper)
        assert c.score == pytest.approx(exact, abs=1e-4)
        opinion = sum(float(lattice[i, t]) for i, t in enumerate(ids)) / len(upper)
        assert c.rank_score == pytest.approx(c.score + 2.0 * opinion, abs=1e-3)
    ranks = [c.rank_score for c in result.candidates]
    assert len(ranks) == 4 and ranks == sorted(ranks, reverse=True)


def test_shortlist_scores_only_the_taggers_top_tokens(dvocab: Vocab) -> None:
    """Without the tagger's second opinion, the shortlist alone keeps the search to the
    tokens the tagger ranks in its top five at some position (among those the rules allow
    there): here its first five, and at the end its first five level characters."""
    s2s, tagger = random_models(dvocab)
    decoder = torch_decoder(s2s, dvocab, proposer=tagger)
    upper = "春风得意"  # ends oblique: the lower line must end on a surely level character
    end_ok = decoder.tables.end_ok("modern", Tone.LEVEL)
    han = [p for p in dvocab.pieces if len(p) == 1 and is_han(p) and p not in upper]
    ends = [p for p in han if end_ok[dvocab.encode(p)[0]]][:6]
    others = [p for p in han if p not in ends][:6]
    sure_tagger(tagger, dvocab, "".join(others + ends))  # the others ranked first
    options = DecodeOptions(n_best=4, ensemble_weight=0.0, shortlist=5, rhythm_weight=0, three_level_weight=0)
    result = decoder.generate(upper, options)
    assert result.candidates
    for c in result.candidates:
        assert set(c.text) <= set(others[:5] + ends[:5]) and c.text[3] in ends[:5], c.text
        assert check(upper, c.text).hard_ok
    wide = decoder.generate(upper, replace(options, shortlist=0))
    assert not all(set(c.text) <= set(others[:5] + ends[:5]) for c in wide.candidates)


@pytest.mark.parametrize("fast", [False, True])
def test_shortlist_scores_are_the_models_log_probs_over_the_list(
    dvocab: Vocab, monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    """In the normal search and in the fast mode's rescoring alike."""
    s2s, tagger = random_models(dvocab)
    decoder = torch_decoder(s2s, dvocab, proposer=tagger)
    built: list[list[np.ndarray]] = []
    original = Shortlist.from_rows

    def spy(rows: list[np.ndarray], head_t: np.ndarray) -> Shortlist:
        built.append(rows)
        return original(rows, head_t)

    monkeypatch.setattr(Shortlist, "from_rows", spy)
    for upper in UPPERS:
        result = decoder.generate(upper, DecodeOptions(n_best=5, shortlist=8, fast=fast, proposals=12))
        ids = built[-1][0]
        view = ModelView.of(upper, dvocab)  # the model reads the line without its final 。
        src = torch.tensor([dvocab.encode(view.line)])
        for c in result.candidates:
            tgt = dvocab.encode("".join(c.text[i] for i in view.kept))
            assert set(tgt) <= set(ids.tolist())
            with torch.inference_mode():
                logits = s2s(src, torch.tensor([[BOS_ID, *tgt[:-1]]]))[0]  # (L, V)
            logp = F.log_softmax(logits[:, ids], dim=-1)
            exact = sum(float(logp[i, ids.tolist().index(t)]) for i, t in enumerate(tgt)) / len(tgt)
            assert c.score == pytest.approx(exact, abs=1e-4)


def test_a_shortlist_too_small_for_the_rules_falls_back_to_every_token(dvocab: Vocab) -> None:
    """Three tokens cannot fill four positions that must differ: the search runs again over
    the whole vocabulary instead of failing."""
    s2s, tagger = random_models(dvocab)
    decoder = torch_decoder(s2s, dvocab, proposer=sure_tagger(tagger, dvocab, WORD))
    result = decoder.generate("春风得意", DecodeOptions(n_best=3, ensemble_weight=0.0, shortlist=3))
    assert result.candidates and all(check("春风得意", c.text).hard_ok for c in result.candidates)
    assert not all(set(c.text) <= set(WORD[:3]) for c in result.candidates)


def test_shortlist_log_probs_are_normalised_over_the_list() -> None:
    head = torch.randn(10, 4)
    shortlist = Shortlist.build([[3, 5, 7], [4, 6]], head.numpy())
    states = torch.randn(4, 4)  # two requests, two rows each
    out = shortlist.log_probs(states.numpy())
    assert out.shape == (4, 3)  # the listed tokens' columns
    for row, ids in zip(range(4), [[3, 5, 7], [3, 5, 7], [4, 6], [4, 6]], strict=True):
        expected = F.log_softmax(states[row] @ head[ids].T, dim=-1)
        np.testing.assert_allclose(out[row, : len(ids)], expected.numpy(), rtol=1e-5, atol=1e-6)
        assert np.isinf(out[row, len(ids) :]).all()  # the shorter list's padding


def test_a_proposer_needs_an_encoder_decoder_to_rescore(dvocab: Vocab) -> None:
    _, tagger = random_models(dvocab)
    with pytest.raises(ValueError, match="encoder-decoder"):
        torch_decoder(tagger, dvocab, proposer=tagger)


def test_tagger_alone_decodes_under_the_rules(dvocab: Vocab) -> None:
    _, tagger = random_models(dvocab)
    result = torch_decoder(tagger, dvocab).generate("上海自来水来自海上", DecodeOptions(n_best=5))
    assert result.candidates and all(check("上海自来水来自海上", c.text).hard_ok for c in result.candidates)


def test_bundle_carries_the_proposer(tmp_path: Path, dvocab: Vocab) -> None:
    s2s, tagger = random_models(dvocab)
    out = export_bundle(tmp_path / "b", s2s, dvocab, proposer=tagger, train_uppers=["春风得意"])
    assert (out / PROPOSER_WEIGHTS).is_file()
    proposer = models_of(load_bundle(out)).proposer
    assert isinstance(proposer, CoupletTagger)
    for a, b in zip(tagger.state_dict().values(), proposer.state_dict().values(), strict=True):
        assert torch.allclose(a, b, atol=1e-3)  # fp16 in the bundle
    assert not load_bundle(export_bundle(tmp_path / "plain", s2s, dvocab)).has_proposer


@pytest.mark.slow
def test_tiny_tagger_memorises_pairs_and_is_bundled_as_proposer(
    tmp_path: Path, data_folder: Path, pairs: list[tuple[str, str]]
) -> None:
    common = ["--data-dir", str(data_folder), "--set", "amp=off", "--set", "threads=1"]
    common += ["--set", "model.dropout=0", "--set", "label_smoothing=0"]
    tag_args = ["--preset", "tiny", "--out", str(tmp_path / "tagger"), "--max-steps", "250"]
    tag_args += ["--set", "model.kind=tagger", "--set", "model.n_enc_layers=3", "--no-eval", "--no-export"]
    assert main([*tag_args, *common]) == 0
    tagger, vocab, _ = load_model(tmp_path / "tagger" / "best.pt")
    assert isinstance(tagger, CoupletTagger)
    outputs = greedy(tagger, vocab, [u for u, _ in pairs])
    assert sum(o == lo for o, (_, lo) in zip(outputs, pairs, strict=True)) >= 45

    s2s_args = ["--preset", "tiny", "--out", str(tmp_path / "s2s"), "--max-steps", "30", "--no-eval"]
    assert main([*s2s_args, *common, "--proposer", str(tmp_path / "tagger")]) == 0
    bundle = load_bundle(tmp_path / "s2s" / "bundle")
    assert isinstance(models_of(bundle).proposer, CoupletTagger)
    # the bundled proposer keeps its run's step and best validation figure, which the card shows
    _, _, tagger_meta = load_model(tmp_path / "tagger" / "best.pt")
    bundled_meta = model_meta(tmp_path / "s2s" / "bundle", proposer=True)
    assert tagger_meta["best_valid"] is not None
    assert (bundled_meta["step"], bundled_meta["best_valid"]) == (
        tagger_meta["step"],
        tagger_meta["best_valid"],
    )
    card = render(tmp_path / "s2s" / "bundle", tmp_path / "s2s", {}, {}, proposer_dir=tmp_path / "tagger")
    section = card[card.index("## Proposer") :]
    assert f"best validation NLL per character: {tagger_meta['best_valid']}" in section
    assert f"trained {training_summary(tmp_path / 'tagger')['steps']} steps" in section
    assert main([*s2s_args, *common, "--proposer", str(tmp_path / "s2s" / "best.pt")]) == 2
