"""The model card renders the bundle's own figures and judges each goal."""

import json

import pytest

from model.release.card import main
from model.release.card_goals import Goal, goals


def test_goal_verdicts():
    assert Goal("ppl", 55.0, 60, False).verdict() == "reached"
    assert Goal("ppl", 80.0, 60, False).verdict() == "not reached (gap 20)"
    assert Goal("bleu", 2.5, 3, True).verdict() == "not reached (gap 0.5)"
    assert Goal("bleu", None, 3, True).verdict() == "not measured"
    near = Goal("bleu", 9.8, 10, True, ci95=0.45)  # short of the target by less than the interval
    assert near.verdict() == "not reached (gap 0.2; within the 95% interval ± 0.45)"
    assert "| 9.8 ± 0.45 | ≥ 10 |" in near.row()
    assert Goal("bleu", 9.0, 10, True, ci95=0.45).verdict() == "not reached (gap 1)"


def test_goals_read_eval_figures():
    ev = {"full": {"perplexity": 70.0, "bleu4": 3.5, "bleu2": 9.0, "rules_model": {"hard_ok": 100.0}}}
    verdicts = {
        g.name: g.verdict()
        for g in goals(ev, 12.0, {"decode": {"latency_p50_ms": 10.0, "latency_p99_ms": 60.0}})
    }
    assert verdicts["BLEU-4, full test set"] == "reached"
    assert verdicts["test perplexity (full test set)"].startswith("not reached")
    assert verdicts["hard-rule compliance of outputs"] == "reached"
    assert verdicts["lower line ends 平 after 仄"] == "not measured"
    assert verdicts["decoding latency p99 (10 candidates)"].startswith("not reached")


def test_card_from_a_bundle(tmp_path):
    from data.vocab import Vocab
    from model.decoding.options import DecodeOptions
    from model.net.tagger import CoupletTagger
    from model.net.transformer import CoupletTransformer, ModelConfig
    from model.release.export import export_bundle

    vocab = Vocab.train(["春风得意马蹄疾", "秋雨无声雁影孤"] * 3, tmp_path / "spm")
    model = CoupletTransformer(ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=2, d_ff=64))
    ev = {
        "full": {
            "pairs": 2,
            "bleu1": 20.0,
            "bleu2": 11.0,
            "bleu4": 3.1,
            "bleu4_ci95": 0.4,
            "perplexity": 59.0,
        }
    }
    tagger = CoupletTagger(ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=2, d_ff=64, kind="tagger"))
    pairs = [("春风得意马蹄疾", "秋雨无声雁影孤")]
    bundle = export_bundle(
        tmp_path / "bundle",
        model,
        vocab,
        proposer=tagger,
        train_pairs=pairs,
        eval_result=ev,
        step=7,
        preset="tiny",
    )
    train = tmp_path / "train"
    train.mkdir()
    (train / "train_log.csv").write_text("step,epoch,minutes,pairs_seen\n7,0,1.5,700\n")
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"split": {"train": 123, "test": 2}, "vocab": {"size": 20}}))
    assert main([str(bundle), "--train-dir", str(train), "--report", str(report), "--hardware", "a CPU"]) == 0
    card = (bundle / "MODEL_CARD.md").read_text()
    assert "AGPL-3.0" in card and "a CPU" in card
    assert "| BLEU-4 | 3.1 ± 0.4 |" in card and "| BLEU-1 | 20.0 |" in card
    assert "95% confidence interval: sacrebleu's bootstrap" in card
    assert "| BLEU-2, full test set | 11 | ≥ 10 | reached |" in card
    assert "steps: 7; wall time: 1.5 min; pairs seen: 700; the bundled checkpoint: step 7" in card
    assert "123 training pairs" in card
    assert (
        "training pairs (`known_lowers.blocks`, lzma," in card and "the training pairs' lower lines, " in card
    )
    options = DecodeOptions()  # the proposer's part names the weight and shortlist the search uses
    assert f"weight {options.ensemble_weight});" in card
    assert f"{options.shortlist} characters per position" in card


def test_card_without_bundle_is_an_error(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no model bundle" in capsys.readouterr().err


def test_card_refuses_what_is_not_there_or_not_readable(tmp_path, capsys):
    (tmp_path / "model.pt").write_text("a checkpoint of an earlier bundle format\n")
    assert main([str(tmp_path)]) == 2
    assert "earlier format (model.pt)" in capsys.readouterr().err
    (tmp_path / "model.safetensors").write_text("not safetensors\n")
    assert main([str(tmp_path)]) == 2
    assert "config.json: missing" in capsys.readouterr().err
    assert main([str(tmp_path), "--extra", str(tmp_path / "missing.md")]) == 2
    assert "--extra" in capsys.readouterr().err
    (tmp_path / "bench.json").write_text("{not json")
    assert main([str(tmp_path), "--bench", str(tmp_path / "bench.json")]) == 2
    assert "not a JSON file" in capsys.readouterr().err
    assert not (tmp_path / "MODEL_CARD.md").exists()


def test_a_bundle_keeps_the_counts_of_its_own_data(tmp_path, monkeypatch):
    """The card of a bundle describes the data it was trained on, from the bundle's
    data_report.json, even after `make data` has rebuilt work/data differently; the bundle
    keeps counts, not the report's example pairs."""
    from data.vocab import Vocab
    from model.net.transformer import CoupletTransformer, ModelConfig
    from model.release.export import export_bundle
    from model.store.layout import DATA_REPORT

    vocab = Vocab.train(["春风得意马蹄疾", "秋雨无声雁影孤"] * 3, tmp_path / "spm")
    model = CoupletTransformer(ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=2, d_ff=64))
    then = {
        "split": {"train": 123, "test": 2},
        "vocab": {"size": 20},
        "sensitive_examples": [["春", "秋", "x"]],
    }
    bundle = export_bundle(tmp_path / "bundle", model, vocab, data_report=then)
    kept = json.loads((bundle / DATA_REPORT).read_text(encoding="utf-8"))
    assert kept == {"split": {"train": 123, "test": 2}, "vocab": {"size": 20}}  # no corpus lines
    now = tmp_path / "data"  # make data since: other counts
    now.mkdir()
    (now / "report.json").write_text(json.dumps({"split": {"train": 999, "test": 2}, "vocab": {"size": 30}}))
    monkeypatch.setenv("DUILIAN_DATA_DIR", str(now))
    assert main([str(bundle)]) == 0
    card = (bundle / "MODEL_CARD.md").read_text()
    assert "123 training pairs" in card and "999" not in card
    assert main([str(bundle), "--report", str(now / "report.json")]) == 0  # asked for: used
    assert "999 training pairs" in (bundle / "MODEL_CARD.md").read_text()


def small_bundle(tmp_path, ev, proposer=True):
    from data.vocab import Vocab
    from model.net.tagger import CoupletTagger
    from model.net.transformer import CoupletTransformer, ModelConfig
    from model.release.export import export_bundle

    lines = ["春风得意马蹄疾", "秋雨无声雁影孤", "明月松间照", "清泉石上流"] * 3
    vocab = Vocab.train(lines, tmp_path / "spm")
    model = CoupletTransformer(ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=2, d_ff=64))
    tagger = CoupletTagger(ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=2, d_ff=64, kind="tagger"))
    return export_bundle(
        tmp_path / "bundle", model, vocab, proposer=tagger if proposer else None, eval_result=ev, step=7
    )


EVAL = {
    "full": {
        "pairs": 4000, "bleu1": 19.75, "bleu1_ci95": 0.42, "bleu2": 9.62, "bleu2_ci95": 0.41, "bleu4": 3.21,
        "bleu4_ci95": 0.32, "perplexity": 42.66, "rules_model": {"hard_ok": 100.0},
        "rules_human": {"hard_ok": 98.9},
    },
    "leakfree": {
        "pairs": 2658, "bleu1": 21.0, "bleu2": 10.37, "bleu4": 3.47, "perplexity": 40.81,
        "rules_model": {"hard_ok": 99.5}, "rules_human": {"hard_ok": 98.57},
    },
}  # fmt: skip


def front_matter(card: str) -> dict:
    import yaml

    assert card.startswith("---\n")
    head, _, body = card[4:].partition("\n---\n")
    assert body.lstrip().startswith("# Model card")
    return yaml.safe_load(head)


def test_card_opens_with_model_card_metadata_from_eval_json(tmp_path):
    """The front matter is Hugging Face model-card metadata: license, language, tags, and a
    model-index whose figures are eval.json's, per test split, intervals in the names."""
    bundle = small_bundle(tmp_path, EVAL)
    assert main([str(bundle)]) == 0
    meta = front_matter((bundle / "MODEL_CARD.md").read_text(encoding="utf-8"))
    assert meta["license"] == "agpl-3.0" and meta["language"] == ["zh"]
    assert {"couplet", "safetensors"} <= set(meta["tags"]) and meta["metrics"] == ["bleu", "perplexity"]
    (index,) = meta["model-index"]
    full, leakfree = index["results"]
    assert full["dataset"]["config"] == "full" and "4000 pairs" in full["dataset"]["name"]
    assert leakfree["dataset"]["config"] == "leakfree" and "2658 pairs" in leakfree["dataset"]["name"]
    got = {(m["type"], m["name"]): m["value"] for m in full["metrics"]}
    assert got == {
        ("bleu", "BLEU-1 (95% interval ± 0.42)"): 19.75,
        ("bleu", "BLEU-2 (95% interval ± 0.41)"): 9.62,
        ("bleu", "BLEU-4 (95% interval ± 0.32)"): 3.21,
        ("perplexity", "perplexity of the reference lines"): 42.66,
        ("accuracy", "hard-rule compliance of the top candidate, %"): 100.0,
    }
    assert [m["value"] for m in leakfree["metrics"]] == [21.0, 10.37, 3.47, 40.81, 99.5]
    # without figures (trained with --no-eval) the metadata has no model-index
    (bundle / "eval.json").write_text("{}")
    assert main([str(bundle)]) == 0
    meta = front_matter((bundle / "MODEL_CARD.md").read_text(encoding="utf-8"))
    assert meta["license"] == "agpl-3.0" and "model-index" not in meta


@pytest.mark.slow
def test_how_to_use_runs_as_written(graph_cache):
    """The card's Python snippets and command line, run on the shipped bundle as its card gives
    them (the run's graph folder for all three: the shipped model's graphs, which other tests
    read too, are exported there once)."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    from data.paths import default_model_dir
    from model.release.card_header import how_to_use

    root = Path(__file__).resolve().parents[3]
    bundle = default_model_dir()
    text = "\n".join(how_to_use(bundle, where=str(bundle)))
    assert "proposer.safetensors" in text and "spm.model" in text and "curl -s localhost:8000" in text
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    snippets = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(snippets) == 2
    for code in snippets:
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        assert len(done.stdout.splitlines()) == 5 and all(" " in line for line in done.stdout.splitlines())
    (console,) = re.findall(r"```console\n(.*?)```", text, re.S)
    first = console.splitlines()[0].removeprefix("$ duilian ").split()
    cache = ["--graph-cache", str(graph_cache)]
    done = subprocess.run(
        [sys.executable, "-m", "duilian", *first, *cache],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and "春风得意马蹄疾" in done.stdout, done.stderr
    shipped = "\n".join(how_to_use(bundle))  # the shipped folder is the command line's default
    assert "$ duilian generate 春风得意马蹄疾 -n 3\n" in shipped and 'Path("models/default")' in shipped


def test_header_only_keeps_the_rest_of_the_card(tmp_path, capsys):
    bundle = small_bundle(tmp_path, EVAL, proposer=False)
    written = "# Model card: duilian default couplet model\n\nIntro.\n\n"
    written += "## Training\n\n- notes\n\n## Notes\n\nkept\n"
    (bundle / "MODEL_CARD.md").write_text(written, encoding="utf-8")
    assert main([str(bundle), "--header-only"]) == 0
    card = (bundle / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert front_matter(card)["model-index"][0]["results"][0]["metrics"][0]["value"] == 19.75
    body = card.partition("\n---\n")[2]
    assert body.index("Intro.") < body.index("## How to use") < body.index("## Training")
    assert body.endswith("## Training\n\n- notes\n\n## Notes\n\nkept\n")
    assert "proposer.safetensors" not in body  # a bundle without a proposer
    assert main([str(bundle), "--header-only"]) == 0  # again: the same card, not a second header
    assert (bundle / "MODEL_CARD.md").read_text(encoding="utf-8") == card
    assert "How to use" in capsys.readouterr().out
