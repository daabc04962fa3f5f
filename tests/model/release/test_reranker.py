"""The reranker end to end on tiny models: the scorer (frozen shared table), its listwise
training and exact resume, its ONNX graph against PyTorch, the reranking of an answer, the
scorer in a bundle (added, refused, read back, decoded with), and the weight chosen on
validation lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from data.vocab import Vocab
from model.decoding.options import DecodeOptions
from model.decoding.reranking import DEFAULT_WEIGHT, Reranker
from model.export.engines import reranker_of, torch_decoder
from model.export.models import scorer_of
from model.export.scorer import add_scorer, load_scorer, model_embedding
from model.net.scorer import PairScorer
from model.net.transformer import CoupletTransformer, ModelConfig
from model.release.card import render
from model.release.export import export_bundle
from model.release.rerank import (
    chosen_weight,
    make_reranker,
    sample,
    served_decoder,
    weight_table,
    write_nbest,
)
from model.store.bundle import load_bundle, model_config, scorer_weight
from model.store.layout import SCORER_CONFIG, SCORER_WEIGHTS, BundleError, verify_bundle
from model.training.rerank import ScorerTraining, save_trained, scorer_config, train_scorer
from tests.model.decoding.fixtures import tiny_model

ROOT = Path(__file__).resolve().parents[3]


def small_model(vocab: Vocab, seed: int = 1) -> CoupletTransformer:
    return tiny_model(vocab, seed)


def small_scorer(model_cfg: ModelConfig, embed: torch.Tensor, seed: int = 3) -> PairScorer:
    torch.manual_seed(seed)
    scorer = PairScorer(scorer_config(model_cfg, heads=2).with_(dropout=0.0))
    scorer.share_embedding(embed)
    with torch.no_grad():  # a scorer with opinions: the output layer drawn large
        scorer.out.weight.normal_(0, 1.0)
    return scorer.eval()


def add_small_scorer(bundle: Path, folder: Path, seed: int = 3) -> PairScorer:
    """Put a small untrained scorer (seeded) into ``bundle``; the scorer."""
    scorer = small_scorer(model_config(bundle, "model"), model_embedding(bundle), seed)
    save_trained(folder / "scorer.pt", scorer, {"loss": 1.0}, {"steps": 0})
    add_scorer(bundle, folder / "scorer.pt")
    return scorer


def groups_of(pairs: list[tuple[str, str]], n: int) -> list[tuple[str, list[str]]]:
    """Groups where the human line is the pair's lower line and the machine's are other pairs'
    lower lines of the same length with their characters reversed: a pattern a scorer can learn."""
    out = []
    for upper, lower in pairs[:n]:
        others = [lo[::-1] for _, lo in pairs if len(lo) == len(lower) and lo != lower][:4] or [lower[::-1]]
        out.append((upper, [lower, *[o for o in others if o != lower]]))
    return [g for g in out if len(g[1]) > 1]


def test_the_scorer_reads_the_shared_table_but_never_trains_it(vocab: Vocab) -> None:
    model = small_model(vocab)
    scorer = small_scorer(model.cfg, model.embed.weight.detach())
    assert not scorer.embed.weight.requires_grad
    assert scorer.num_parameters() < scorer.num_parameters(trained_only=False)
    upper = torch.tensor([vocab.encode("春风得意马蹄疾")])
    lower = torch.tensor([vocab.encode("秋月扬辉桂影香")[:7]])
    scorer.train()
    scorer(upper, lower).sum().backward()
    assert scorer.embed.weight.grad is None and scorer.upper_map.weight.grad is not None
    scorer.eval()
    before = scorer(upper, lower)
    scorer.share_embedding(model.embed.weight.detach() * 2)  # another table: another opinion
    assert not torch.allclose(before, scorer(upper, lower))
    with pytest.raises(ValueError, match="shared table"):
        scorer.share_embedding(torch.zeros(3, 32))


@pytest.mark.slow
def test_training_learns_the_human_lines_and_a_stopped_run_resumes_exactly(
    tmp_path: Path, vocab: Vocab, pairs: list[tuple[str, str]]
) -> None:
    model = small_model(vocab)
    cfg = scorer_config(model.cfg, heads=2)
    embed = model.embed.weight.detach()
    groups = groups_of(pairs, 50)
    spec = ScorerTraining(steps=200, batch=8, lr=3e-3, warmup=5, eval_every=100)
    quiet = lambda line: None  # noqa: E731
    best = train_scorer(cfg, embed, vocab, groups, groups, tmp_path / "a.pt", spec, log=quiet)
    assert best["human_first"] >= 0.9  # reversed lines told apart from the human ones
    # the same run stopped after its first evaluation (its state kept) and started again
    half = spec
    train_scorer(cfg, embed, vocab, groups, groups, tmp_path / "b.pt", half, log=quiet, until=100)
    lines: list[str] = []
    train_scorer(cfg, embed, vocab, groups, groups, tmp_path / "b.pt", half, log=lines.append)
    assert lines[0].startswith("resumed at step 100")
    a = torch.load(tmp_path / "a.pt.state", weights_only=True)["model"]
    b = torch.load(tmp_path / "b.pt.state", weights_only=True)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    saved = torch.load(tmp_path / "a.pt", weights_only=True)
    assert "embed.weight" not in saved["state_dict"] and saved["valid"]["human_first"] == best["human_first"]


@pytest.mark.slow
def test_the_onnx_graph_scores_as_pytorch_does_and_is_read_from_the_cache(
    tmp_path: Path, vocab: Vocab
) -> None:
    model = small_model(vocab)
    scorer = small_scorer(model.cfg, model.embed.weight.detach())
    reranker = reranker_of(scorer, vocab, tmp_path, key="k1")
    lowers = ["秋月扬辉桂影香", "夏雨润物花自开", "冬雪飘飞梅更艳"]
    got = reranker.scores("春风得意马蹄疾", lowers)
    ids = [vocab.encode(x) for x in lowers]
    with torch.no_grad():
        want = scorer(torch.tensor([vocab.encode("春风得意马蹄疾")] * 3), torch.tensor(ids)).numpy()
    assert got.shape == (3,) and np.allclose(got, want, atol=1e-5)
    cached = Reranker.cached(scorer.cfg, "k1", tmp_path, vocab)
    assert cached is not None and np.array_equal(cached.scores("春风得意马蹄疾", lowers), got)
    assert Reranker.cached(scorer.cfg, "another", tmp_path, vocab) is None
    mixed = reranker.scores("春风得意马蹄疾", ["秋月扬辉桂影香", "夏雨"])  # lines of two lengths: two calls
    with torch.no_grad():
        short = scorer(torch.tensor([vocab.encode("春风")]), torch.tensor([vocab.encode("夏雨")])).numpy()
    assert np.allclose(mixed, [got[0], short[0]], atol=1e-5)
    assert reranker.scores("春风", []).shape == (0,)
    assert np.isneginf(reranker.scores("", ["春风"])).all()  # no place in common: unreadable


def test_an_answer_is_reordered_by_the_weighted_scores_and_left_alone_at_weight_zero(
    tmp_path: Path, vocab: Vocab
) -> None:
    model = small_model(vocab)
    scorer = small_scorer(model.cfg, model.embed.weight.detach())
    reranker = reranker_of(scorer, vocab, tmp_path)
    decoder = torch_decoder(model, vocab, reranker=reranker)
    plain = decoder.generate("春风得意马蹄疾", DecodeOptions(n_best=6, rerank_weight=0.0))
    assert all(c.rerank_score is None for c in plain.candidates)
    heavy = decoder.generate("春风得意马蹄疾", DecodeOptions(n_best=6, rerank_weight=100.0))
    assert {c.text for c in heavy.candidates} == {c.text for c in plain.candidates}
    scores = dict(
        zip(
            [c.text for c in plain.candidates],
            reranker.scores("春风得意马蹄疾", [c.text for c in plain.candidates]),
            strict=True,
        )
    )
    by_text = {c.text: c for c in plain.candidates}
    for c in heavy.candidates:
        assert c.rerank_score == pytest.approx(scores[c.text], abs=1e-6)
        assert c.rank_score == pytest.approx(by_text[c.text].rank_score + 100.0 * scores[c.text], rel=1e-6)
    ranks = [c.rank_score for c in heavy.candidates]
    assert ranks == sorted(ranks, reverse=True)
    assert [c.text for c in heavy.candidates] != [
        c.text for c in plain.candidates
    ]  # the seed's scorer disagrees
    assert reranker.rerank(plain, 0.0) is plain
    reverse = CoupletTransformer(model.cfg.with_(direction="lower_to_upper")).eval()
    with pytest.raises(ValueError, match="reranker"):
        torch_decoder(reverse, vocab, reranker=reranker)


@pytest.mark.slow
def test_a_bundle_carries_its_scorer_on_the_models_table_and_refuses_another(
    tmp_path: Path, vocab: Vocab, pairs: list[tuple[str, str]]
) -> None:
    model = small_model(vocab)
    bundle = export_bundle(tmp_path / "bundle", model, vocab, train_pairs=pairs)
    assert not load_bundle(bundle).has_scorer
    scorer = add_small_scorer(bundle, tmp_path)
    assert verify_bundle(bundle)
    config = json.loads((bundle / SCORER_CONFIG).read_text("utf-8"))
    assert config["kind"] == "scorer" and config["shared_weights"] == {"embed.weight": "model.safetensors"}
    loaded = load_bundle(bundle)
    assert loaded.has_scorer and scorer_of(loaded) is not None
    back = load_scorer(bundle, vocab)
    upper, lower = (
        torch.tensor([vocab.encode("春风得意马蹄疾")]),
        torch.tensor([vocab.encode("秋月扬辉桂影香")]),
    )
    with torch.no_grad():  # fp16 weights: close to the scorer given, not equal
        assert torch.allclose(back(upper, lower), scorer(upper, lower), atol=0.05)
    # a scorer trained on another model's table is refused, and the bundle left as it was
    other = small_model(vocab, seed=9)
    save_trained(
        tmp_path / "other.pt", small_scorer(other.cfg, other.embed.weight.detach()), {"loss": 1.0}, {}
    )
    before = (bundle / SCORER_WEIGHTS).read_bytes()
    with pytest.raises(BundleError, match="another character table"):
        add_scorer(bundle, tmp_path / "other.pt")
    assert (bundle / SCORER_WEIGHTS).read_bytes() == before and verify_bundle(bundle)
    torch.save({"state_dict": {}}, tmp_path / "x.pt")
    command = ["-m", "model.rerank", "add", "--bundle", str(bundle), "--trained", str(tmp_path / "x.pt")]
    run = subprocess.run([sys.executable, *command], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 2 and "not a trained scorer" in run.stderr
    assert scorer_weight(bundle) == DEFAULT_WEIGHT  # a scorer added without a weight table
    add_scorer(bundle, tmp_path / "scorer.pt", record={"weight": 0.3})
    assert scorer_weight(bundle) == 0.3
    card = render(bundle, None, {}, {})
    assert "## Reranker" in card and "trained 0 steps" in card and "rerank_weight" in card


def test_the_served_decoder_of_a_bundle_with_a_scorer_reranks(
    tmp_path: Path, vocab: Vocab, pairs: list[tuple[str, str]], graph_cache: Path
) -> None:
    from duilian.engine import Engine, build_decoder

    bundle = export_bundle(tmp_path / "bundle", small_model(vocab), vocab, train_pairs=pairs)
    add_small_scorer(bundle, tmp_path)
    for engine in (Engine(), Engine(True, "onnx", graph_cache)):
        decoder = build_decoder(load_bundle(bundle), engine, None)
        answer = decoder.generate("春风得意马蹄疾", DecodeOptions(n_best=4))
        assert decoder.reranker is not None and all(c.rerank_score is not None for c in answer.candidates)
        assert decoder.reranker.weight == DEFAULT_WEIGHT  # the bundle's: the request named none
    # the second decoder found the scorer's graph in the cache: built again, no export
    again = build_decoder(load_bundle(bundle), Engine(True, "onnx", graph_cache), None)
    assert again.reranker is not None


def test_the_weight_is_the_largest_that_keeps_agreement_with_the_human_lines(
    tmp_path: Path, vocab: Vocab
) -> None:
    model = small_model(vocab)
    reranker = reranker_of(small_scorer(model.cfg, model.embed.weight.detach()), vocab, tmp_path)
    groups = [
        {"upper": "春风得意马蹄疾", "lower": "秋月扬辉桂影香", "register": "formal",
         "cands": [{"text": "秋月扬辉桂影香", "rank": -1.0}, {"text": "夏雨润物花自开", "rank": -1.001}]},
        {"upper": "春风得意马蹄疾", "lower": "夏雨润物花自开", "register": "general",
         "cands": [{"text": "夏雨润物花自开", "rank": -1.0}, {"text": "冬雪飘飞梅更艳", "rank": -3.0}]},
    ]  # fmt: skip
    table = weight_table(reranker, groups)
    assert table[0]["weight"] == 0.0 and table[0]["agreement"] == 1.0 and table[0]["changed"] == 0.0
    assert set(table[0]["by_register"]) == {"formal", "general"}
    w = chosen_weight(table)
    assert all(row["agreement"] >= 0.99 for row in table if row["weight"] <= w)
    assert chosen_weight([{"weight": 0.0, "agreement": 0.5}, {"weight": 0.1, "agreement": 0.496},
                          {"weight": 0.2, "agreement": 0.49}]) == 0.1  # fmt: skip


def test_a_sample_keeps_the_register_quota() -> None:
    rows = [
        (f"上{i}", f"下{i}", reg)
        for i, reg in enumerate(["formal"] * 50 + ["classical"] * 50 + ["general"] * 50)
    ]
    got = sample(rows, 20, seed=1)
    counts = {reg: sum(r[2] == reg for r in got) for reg in ("formal", "classical", "general")}
    assert counts == {"formal": 8, "classical": 4, "general": 8}
    assert sample(rows, 20, seed=1) == got and len(set(got)) == 20
    assert len(sample(rows[:3], 20, seed=1)) == 3  # fewer where there are fewer


def test_make_train_s_step_makes_the_reranker_of_an_exported_bundle(
    tmp_path: Path, vocab: Vocab, pairs: list[tuple[str, str]], data_folder: Path
) -> None:
    bundle = export_bundle(tmp_path / "bundle", small_model(vocab), vocab, train_pairs=pairs)
    settings = {"groups": 20, "valid_groups": 10, "steps": 6}
    lines: list[str] = []
    make_reranker(bundle, data_folder, tmp_path / "work", settings, log=lines.append)
    assert load_bundle(bundle).has_scorer and verify_bundle(bundle)
    nbest = [json.loads(x) for x in (tmp_path / "work" / "train_nbest.jsonl").read_text("utf-8").splitlines()]
    assert len(nbest) == 20 and all(len(g["cands"]) <= 10 for g in nbest)
    assert any(len(g["cands"]) > 1 for g in nbest)
    table = json.loads((tmp_path / "work" / "weights.json").read_text("utf-8"))
    assert table[0]["weight"] == 0.0 and any("the rule's weight" in x for x in lines)
    # a step run again goes on from its files: nothing decoded twice
    assert write_nbest(served_decoder(load_bundle(bundle)), [], tmp_path / "work" / "train_nbest.jsonl") == 0


def test_a_blind_sheets_bundle_system_gives_the_sites_reranked_top_line(
    tmp_path: Path, vocab: Vocab, pairs: list[tuple[str, str]], graph_cache: Path
) -> None:
    from duilian.engine import Engine, build_decoder
    from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
    from model.release.blind import Line, decoded

    bundle = export_bundle(tmp_path / "bundle", small_model(vocab), vocab, train_pairs=pairs)
    add_small_scorer(bundle, tmp_path)
    add_scorer(bundle, tmp_path / "scorer.pt", record={"weight": 100.0})  # a weight that reorders
    uppers = [u for u, _ in pairs[:6]]
    engine = Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache)
    site = build_decoder(load_bundle(bundle), engine, None)
    # in one batch, as the sheet decodes (int8's activation scales are the batch's)
    want = [a.candidates[0].text for a in site.generate_batch(uppers)]
    plain = site.generate_batch(uppers, DecodeOptions(rerank_weight=0.0))
    unranked = [a.candidates[0].text for a in plain]
    assert want != unranked  # the reranker changes some top lines, and the sheet has the site's
    assert decoded(bundle, [Line(u, "", "general") for u in uppers]) == want
