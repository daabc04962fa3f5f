from __future__ import annotations

from pathlib import Path

import pytest
import torch

from data.vocab import Vocab
from model.net.checkpoint import build_model
from model.net.transformer import CoupletTransformer, ModelConfig
from model.release.eval_files import evaluate_files
from model.release.eval_tables import markdown
from model.release.evaluate import main
from model.release.metrics import bleu_scores, distinct, line_stats, paired_bleu, perplexity, rule_rates


def test_bleu_of_references_against_themselves_is_100(pairs) -> None:
    refs = [lo for _, lo in pairs]
    assert bleu_scores(refs, refs) == {"bleu1": 100.0, "bleu2": 100.0, "bleu4": 100.0}
    assert bleu_scores(refs[::-1], refs)["bleu4"] < 10


def test_bleu_confidence_intervals_come_from_resampling_the_lines(pairs) -> None:
    refs = [lo for _, lo in pairs]
    assert bleu_scores(refs, refs, n_bootstrap=200)["bleu2_ci95"] == 0.0  # every resample is perfect
    half = refs[: len(refs) // 2] + refs[len(refs) // 2 :][::-1]  # half the lines right, half wrong
    scores = bleu_scores(half, refs, n_bootstrap=200)
    assert set(scores) == {f"bleu{n}{s}" for n in (1, 2, 4) for s in ("", "_ci95")}
    assert 0 < scores["bleu2_ci95"] < scores["bleu2"]
    assert bleu_scores(half, refs, n_bootstrap=200) == scores  # a fixed seed: reproducible


def test_paired_bleu_of_two_decodes_of_the_same_lines(pairs) -> None:
    refs = [lo for _, lo in pairs]
    half = refs[: len(refs) // 2] + refs[len(refs) // 2 :][::-1]  # half the lines right
    worse = refs[: len(refs) // 4] + refs[len(refs) // 4 :][::-1]  # a quarter right
    a, b = line_stats(refs, half), line_stats(refs, worse)
    assert paired_bleu(a, a, 200) == {
        f"bleu{n}_{k}": 0.0 for n in (1, 2, 4) for k in ("diff", "diff_ci95", "wins")
    }
    down, up = paired_bleu(a, b, 200), paired_bleu(b, a, 200)
    for n in (1, 2, 4):  # the difference is the two corpus BLEUs' difference, its sign kept
        expected = bleu_scores(worse, refs)[f"bleu{n}"] - bleu_scores(half, refs)[f"bleu{n}"]
        assert abs(down[f"bleu{n}_diff"] - expected) <= 0.02
        assert down[f"bleu{n}_diff"] == -up[f"bleu{n}_diff"] < 0
        assert down[f"bleu{n}_diff_ci95"] > 0 and down[f"bleu{n}_wins"] < 0.05 < 0.95 < up[f"bleu{n}_wins"]
    assert paired_bleu(a, b, 200) == down  # a fixed seed: reproducible


def test_distinct_counts_unique_ngrams() -> None:
    assert distinct(["春春春"], 1) == round(1 / 3, 4)
    assert distinct(["春夏", "春夏"], 2) == 0.5


def test_rule_rates_of_human_lines(pairs) -> None:
    uppers, lowers = [u for u, _ in pairs], [lo for _, lo in pairs]
    rates = rule_rates(uppers, lowers, "modern")
    assert rates["length"] == 100.0 and rates["punctuation"] == 100.0
    bad = rule_rates(uppers, list(uppers), "modern")  # the upper line again reuses every character
    assert bad["no_reuse"] == 0.0 and bad["hard_ok"] == 0.0


def test_evaluate_files_with_greedy_decoding(data_folder: Path, vocab: Vocab, pairs) -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=4, n_enc_layers=1, n_dec_layers=1, d_ff=64)
    model = CoupletTransformer(cfg).eval()
    result = evaluate_files(model, vocab, data_folder, limit=10, train_lowers=[pairs[0][1]], use_greedy=True)
    assert result["full"]["pairs"] == 10 and result["leakfree"]["pairs"] == 5
    assert result["full"]["rules_model"]["length"] == 100.0  # greedy writes exactly len(upper) characters
    assert result["full"]["perplexity"] > 10  # an untrained model knows nothing
    assert "bleu4" in markdown(result) and "full_bleu4" in result["summary"]
    assert f"| bleu2 | {result['full']['bleu2']} ± {result['full']['bleu2_ci95']} |" in markdown(result)
    assert "full_bleu2_ci95" in result["summary"] and "leakfree_bleu4_ci95" in result["summary"]


def test_cli_bad_input(tmp_path: Path, capsys) -> None:
    assert main(["--model", str(tmp_path / "none")]) == 2
    assert "no model" in capsys.readouterr().err
    (tmp_path / "junk.pt").write_text("not a checkpoint\n")
    assert main(["--model", str(tmp_path / "junk.pt")]) == 2
    assert "not a checkpoint" in capsys.readouterr().err
    assert main(["--model", str(tmp_path), "--limit", "0"]) == 2


def test_an_empty_test_set_is_refused(tmp_path: Path, vocab: Vocab) -> None:
    (tmp_path / "test.tsv").write_text("")
    model = CoupletTransformer(ModelConfig(vocab_size=len(vocab), d_model=32, n_enc_layers=1, n_dec_layers=1))
    with pytest.raises(ValueError, match="no test pairs"):
        evaluate_files(model, vocab, tmp_path, use_greedy=True)


def test_make_eval_shows_a_progress_bar_of_the_lines_decoded(
    tmp_path: Path, data_folder: Path, vocab: Vocab, capsys
) -> None:
    """`make eval` on a bundle (safetensors) draws tqdm's bar of the lines decoded on stderr when
    asked (by default only on a terminal, so not here), and none with --no-progress."""
    from model.release.export import export_bundle

    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=4, n_enc_layers=1, n_dec_layers=1, d_ff=64)
    bundle = export_bundle(tmp_path / "bundle", CoupletTransformer(cfg), vocab, train_uppers=["春风"])
    args = ["--model", str(bundle), "--data-dir", str(data_folder), "--out", str(tmp_path / "e")]
    args += ["--limit", "10", "--bootstrap", "0", "--runtime", "torch"]
    assert main([*args, "--progress"]) == 0
    err = capsys.readouterr().err
    assert "decoding the test set" in err and "10/10" in err and "100%" in err
    for quiet in (["--no-progress"], []):
        assert main([*args, *quiet]) == 0
        assert "decoding the test set" not in capsys.readouterr().err


def test_perplexity_is_taken_in_the_register_asked_for(vocab: Vocab, pairs) -> None:
    """A model with registers is scored in the one asked for (``--register``): its vectors change
    the perplexity; with them all zero (a pretrained model just given registers) they do not."""
    torch.manual_seed(3)
    cfg = ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=4, n_enc_layers=1, d_ff=64, n_registers=3)
    model = build_model(cfg).eval()
    assert isinstance(model, CoupletTransformer) and model.register_embed is not None
    some = pairs[:40]
    assert perplexity(model, vocab, some, 2) == perplexity(model, vocab, some, 0)
    with torch.no_grad():
        model.register_embed.weight.normal_(0.0, 1.0)
    general, formal = perplexity(model, vocab, some, 0), perplexity(model, vocab, some, 2)
    assert general != formal and general == perplexity(model, vocab, some)


def test_a_register_the_model_lacks_is_refused_before_decoding(
    tmp_path: Path, vocab: Vocab, data_folder: Path, capsys
) -> None:
    """``--register formal`` on a model without registers: exit 2 naming the register, no
    eval.json of empty lines; ``--greedy`` decodes in the general register only."""
    from model.net.checkpoint import save

    model = CoupletTransformer(ModelConfig(vocab_size=len(vocab), d_model=32, n_enc_layers=1, n_dec_layers=1))
    path = save(tmp_path / "plain.pt", model, vocab)
    out = tmp_path / "eval"
    args = ["--model", str(path), "--data-dir", str(data_folder), "--out", str(out), "--limit", "2"]
    assert main([*args, "--register", "formal"]) == 2
    assert "formal" in capsys.readouterr().err and not (out / "eval.json").exists()
    registered = build_model(
        ModelConfig(vocab_size=len(vocab), d_model=32, n_enc_layers=1, n_dec_layers=1, n_registers=3)
    )
    path = save(tmp_path / "registers.pt", registered, vocab)
    args[1] = str(path)
    assert main([*args, "--register", "formal", "--greedy"]) == 2
    assert "--greedy" in capsys.readouterr().err and not (out / "eval.json").exists()
