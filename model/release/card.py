"""The model card: what a shipped bundle is, how it was made, and how it measures.

Rendered from the figures the project writes itself (the bundle's ``eval.json`` and
model configuration, the data stage's ``report.json``, the training log and the decode
benchmark), so the card never restates a number by hand. The goals are those of
docs/MEASUREMENTS.md, each reported as reached or not reached with the gap.

The card opens with YAML front matter in the Hugging Face model-card metadata style
(``license``, ``language``, ``tags``, ``metrics`` and a ``model-index`` with the test-set
figures of ``eval.json``), and a "How to use" section (the command line, the REST call,
Python). ``--header-only`` rewrites just those two and keeps the rest of a card as it is
(a card with hand-written notes appended, like the shipped one's).

    python -m model.card models/default [--train-dir work/train/cpu] [--bench work/bench/x.json]
    python -m model.card models/default --header-only
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data.paths import data_dir, default_model_dir
from model.decoding.options import DecodeOptions
from model.release.bundle import (
    CONFIG_FILE,
    DATA_REPORT,
    PROPOSER_CONFIG,
    PROPOSER_WEIGHTS,
    REVERSE_CONFIG,
    REVERSE_WEIGHTS,
    VOCAB_FILE,
    WEIGHTS_FILE,
    has_model,
    known_file,
    missing_model,
    model_meta,
)
from model.release.eval_tables import with_ci
from model.release.metrics import BLEU_ORDERS
from model.training.hardware import hardware_description


@dataclass(frozen=True)
class Goal:
    name: str
    value: float | None
    target: float
    higher_is_better: bool
    unit: str = ""
    ci95: float | None = None  # half-width of the value's 95% confidence interval, when known

    def verdict(self) -> str:
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return "not measured"
        ok = self.value >= self.target if self.higher_is_better else self.value <= self.target
        if ok:
            return "reached"
        gap = abs(self.value - self.target)
        within = (
            f"; within the 95% interval ± {self.ci95:g}" if self.ci95 is not None and gap <= self.ci95 else ""
        )
        return f"not reached (gap {gap:.4g}{self.unit}{within})"

    def row(self) -> str:
        sign = "≥" if self.higher_is_better else "≤"
        shown = "–" if self.value is None else f"{self.value:.4g}{self.unit}"
        if self.value is not None and self.ci95 is not None:
            shown += f" ± {self.ci95:g}"
        return f"| {self.name} | {shown} | {sign} {self.target:g}{self.unit} | {self.verdict()} |"


def known_note(known: Path | None) -> list[str]:
    """The card's lines on the training pairs' lower lines in the file ``known`` (none without)."""
    if known is None:
        return []
    return [
        f"The bundle also carries the lower lines of its training pairs (`{known.name}`, lzma,",
        "found by the upper line's fingerprint), so the site shows a known couplet's lower lines",
        "without the corpus: they are the corpus's text, AGPL-3.0 (wb14123) and MIT (verse, primers).",
    ]


def _read_json(path: Path | None) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a JSON file ({e})") from e
    return data if isinstance(data, dict) else {}


def _dig(d: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def bundle_size_mb(bundle: Path) -> float:
    return sum(p.stat().st_size for p in bundle.iterdir() if p.is_file()) / 1e6


def training_summary(train_dir: Path | None) -> dict[str, Any]:
    """Minutes, steps, pairs seen and the validation curve from the training logs."""
    if train_dir is None:
        return {}
    out: dict[str, Any] = {}
    log = train_dir / "train_log.csv"
    if log.is_file():
        rows = list(csv.DictReader(log.open(encoding="utf-8")))
        if rows:
            last = rows[-1]
            out.update(
                steps=int(last["step"]),
                minutes=float(last["minutes"]),
                pairs_seen=int(float(last.get("pairs_seen", 0) or 0)),
            )
    valid = train_dir / "valid_log.csv"
    if valid.is_file():
        out["valid_curve"] = list(csv.DictReader(valid.open(encoding="utf-8")))
    return out


def latency_variants(served_int8: bool, runtime: str = "torch") -> list[tuple[str, str]]:
    """The decode benchmark's key prefixes (bench/decode.py) and what each decoder is; ""
    is what `make serve` runs."""
    served = ("int8" if served_int8 else "fp32") + ("" if runtime == "torch" else f", {runtime} runtime")
    return [
        ("", f"normal search: the encoder-decoder with the bundled tagger and its shortlist, {served}"),
        ("full_vocab_", f"the same, every token scored (no shortlist), {served}"),
        ("fp32_", "the same as served, in fp32"),
        ("int8_", "the same as served, in int8"),
        ("torch_", "the same as served, in eager PyTorch"),
        ("diverse_", f"diverse candidates (the page's default), {served}"),
        ("fast_", f"fast mode (tagger proposals rescored), {served}"),
        ("model_only_", "the encoder-decoder alone, every token scored, fp32, eager PyTorch"),
    ]


def goals(ev: dict[str, Any], size_mb: float, bench: dict[str, Any]) -> list[Goal]:
    full = ev.get("full", {})
    rules = full.get("rules_model", {})
    latency = bench.get("decode", {})
    return [
        Goal("test perplexity (full test set)", full.get("perplexity"), 60, False),
        Goal("BLEU-4, full test set", full.get("bleu4"), 3, True, ci95=full.get("bleu4_ci95")),
        Goal("BLEU-2, full test set", full.get("bleu2"), 10, True, ci95=full.get("bleu2_ci95")),
        Goal("hard-rule compliance of outputs", rules.get("hard_ok"), 100, True, "%"),
        Goal("lower line ends 平 after 仄", rules.get("tone_end"), 99, True, "%"),
        Goal("bundle size on disk", size_mb, 40, False, " MB"),
        Goal("decoding latency p50 (10 candidates)", latency.get("latency_p50_ms"), 15, False, " ms"),
        Goal("decoding latency p99 (10 candidates)", latency.get("latency_p99_ms"), 50, False, " ms"),
    ]


def eval_table(ev: dict[str, Any]) -> list[str]:
    splits = [s for s in ("full", "leakfree") if s in ev]
    if not splits:
        return ["No evaluation figures are in this bundle (trained with `--no-eval`)."]
    head = "| figure | " + " | ".join(f"{s} ({ev[s]['pairs']} pairs)" for s in splits) + " |"
    lines = [head, "|---|" + "---|" * len(splits)]
    for key, label in (
        ("bleu1", "BLEU-1"),
        ("bleu2", "BLEU-2"),
        ("bleu4", "BLEU-4"),
        ("perplexity", "perplexity of the reference lines"),
        ("distinct1", "distinct-1"),
        ("distinct2", "distinct-2"),
        ("verbatim_train_lower", "outputs that are a training lower line verbatim, %"),
    ):
        lines.append(f"| {label} | " + " | ".join(with_ci(ev[s], key) for s in splits) + " |")
    for rule in ev[splits[0]].get("rules_model", {}):
        cells = [f"{ev[s]['rules_model'][rule]} (human {ev[s]['rules_human'][rule]})" for s in splits]
        lines.append(f"| rule `{rule}`, % of top candidates | " + " | ".join(cells) + " |")
    if any(f"bleu{n}_ci95" in ev[s] for s in splits for n in BLEU_ORDERS):
        lines += [
            "",
            "± is half the width of BLEU's 95% confidence interval: sacrebleu's bootstrap, 1,000 "
            "resamples of the test lines (`python -m model.evaluate --bootstrap N`): how far another "
            "sample of test lines could move the figure.",
        ]
    return lines


def fast_mode_lines(ev: dict[str, Any]) -> list[str]:
    fast = ev.get("fast_mode")
    if not fast:
        return []
    keys = ("bleu1", "bleu2", "bleu4", "distinct1", "distinct2")
    shown = ", ".join(
        f"{k} {fast.get(f'full_{k}', '–')} (leak-free {fast.get(f'leakfree_{k}', '–')})" for k in keys
    )
    return [
        "",
        f"Fast mode (the proposer's candidates rescored, `fast: true` in a request): {shown}; "
        f"hard rules {fast.get('full_hard_ok_model', '–')}%.",
    ]


def latency_section(bench: dict[str, Any]) -> list[str]:
    d = bench.get("decode", {})
    if not d:
        return ["No decode benchmark was given (`python -m model.card ... --bench work/bench/<run>.json`)."]
    lines = [
        f"One request for 10 candidates, every rule on, one thread, {d.get('requests', '–')} test lines "
        f"(`make bench`, load average {d.get('load_average_1min', '–')} on a shared machine):",
        "",
        "| decoder | p50 ms | p99 ms | batch lines/s |",
        "|---|---|---|---|",
    ]
    for key, label in latency_variants(
        bool(d.get("served_int8", False)), str(d.get("served_runtime", "torch"))
    ):
        if f"{key}latency_p50_ms" in d:
            mark = " (served)" if key == "" else ""
            lines.append(
                f"| {label}{mark} | {d[f'{key}latency_p50_ms']} | {d.get(f'{key}latency_p99_ms', '–')} "
                f"| {d.get(f'{key}batch_lines_per_s', '–')} |"
            )
    return lines


def _count(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else "–"


def proposer_section(bundle: Path, run_dir: Path | None) -> list[str]:
    """The bundle's proposer; ``run_dir``: its training run's folder, for time and pairs seen."""
    meta = model_meta(bundle, proposer=True)
    if not meta:
        return []
    tr = training_summary(run_dir)
    options = DecodeOptions()
    trained = (
        f"- trained {tr['steps']:,} steps, {tr['minutes']:.1f} min, {tr.get('pairs_seen', 0):,} pairs "
        f"seen; the bundled checkpoint: step {_count(meta.get('step'))}"
        if tr.get("steps")
        else f"- the bundled checkpoint: step {_count(meta.get('step'))} (no training log given)"
    )
    return [
        "## Proposer",
        "",
        "An encoder-only tagger (model/net/tagger.py) that predicts every lower character in one pass. In",
        "the normal search its log-probabilities are added to every step's scores (a second opinion,",
        f"weight {options.ensemble_weight}); in the fast mode the search runs over its per-position",
        "distributions and the encoder-decoder rescores the best proposals. In both, only its top",
        f"{options.shortlist} characters per position (the shortlist) are scored by the encoder-decoder's",
        "output layer. The scores shown are the encoder-decoder's, normalised over that shortlist.",
        "",
        f"- parameters: {meta.get('n_params', 0):,}",
        f"- configuration: `{json.dumps(meta.get('model_config', {}), ensure_ascii=False)}`",
        trained,
        f"- best validation NLL per character: {meta.get('best_valid', '–')}",
        "",
    ]


def reverse_section(bundle: Path, run_dir: Path | None) -> list[str]:
    """The bundle's lower_to_upper model (下联求上联); ``run_dir``: its training run's folder."""
    meta = model_meta(bundle, reverse=True)
    if not meta:
        return []
    tr = training_summary(run_dir)
    trained = (
        f"- trained {tr['steps']:,} steps, {tr['minutes']:.1f} min, {tr.get('pairs_seen', 0):,} pairs "
        f"seen; the bundled checkpoint: step {_count(meta.get('step'))}"
        if tr.get("steps")
        else f"- the bundled checkpoint: step {_count(meta.get('step'))} (no training log given)"
    )
    best = meta.get("best_valid")
    ppl = f" (perplexity {math.exp(float(best)):.1f})" if isinstance(best, (int, float)) else ""
    shown = "–" if best is None else best
    return [
        "## Reverse model (下联求上联)",
        "",
        "An encoder-decoder of the same shape that writes upper lines for a lower line: trained by the",
        "same `make train` on the same pairs with the direction swapped (each line's characters in their",
        "own order), starting from the model above with its character embeddings frozen, so the bundle",
        "stores that table once (`reverse_config.json`'s `shared_weights`). The search keeps the same rules",
        "mirrored: the upper line ends 仄 where the lower ends 平.",
        "",
        f"- parameters: {meta.get('n_params', 0):,} (the embedding table shared with the model)",
        trained,
        f"- best validation NLL per character (the validation pairs, swapped): {shown}{ppl}",
        "",
    ]


def data_section(report: dict[str, Any]) -> list[str]:
    if not report:
        return ["The data stage's report was not available when this card was written."]
    lines = ["| source | pairs read |", "|---|---|"]
    for name, src in report.get("sources", {}).items():
        if src.get("present"):
            lines.append(f"| {name} | {src.get('pairs_read', '–'):,} |")
    split = report.get("split", {})
    vocab = report.get("vocab", {})
    lines += [
        "",
        f"After normalisation, filters and deduplication (`make data`): {split.get('train', 0):,} training "
        f"pairs, {split.get('valid', 0):,} validation pairs (carved by upper line), and the standard "
        f"{split.get('test', 0):,}-pair wb14123 test set, of which {split.get('test_leakfree', 0):,} are "
        f"leak-free. Vocabulary: {vocab.get('size', '–')} characters (sentencepiece `char`), covering "
        f"{100 * vocab.get('test_char_coverage', 0):.2f}% of test characters.",
    ]
    return lines


CARD_TAGS = ("couplet", "duilian", "chinese-poetry", "text2text-generation", "safetensors")
SPLITS = {"full": "", "leakfree": ", its leak-free part"}
HOW_TO_USE = "## How to use"


def _yaml(value: str) -> str:
    """A YAML scalar: a JSON string is a YAML double-quoted one."""
    return json.dumps(value, ensure_ascii=False)


def front_matter(ev: dict[str, Any], name: str = "duilian-default") -> list[str]:
    """The card's YAML front matter, Hugging Face model-card metadata: license, language, tags,
    the metrics' names, and a ``model-index`` with a result per test split of ``eval.json``
    (BLEU-1/2/4 with their 95% intervals in the name, perplexity, hard-rule compliance)."""
    lines = [
        "---",
        "license: agpl-3.0",
        "language:",
        "- zh",
        "library_name: pytorch",
        "pipeline_tag: text2text-generation",
        "tags:",
        *(f"- {tag}" for tag in CARD_TAGS),
        "metrics:",
        "- bleu",
        "- perplexity",
    ]
    results: list[str] = []
    for split, described in SPLITS.items():
        figures = ev.get(split)
        if not isinstance(figures, dict):
            continue
        metrics: list[tuple[str, str, Any]] = []
        for n in BLEU_ORDERS:
            if f"bleu{n}" in figures:
                ci = figures.get(f"bleu{n}_ci95")
                label = f"BLEU-{n}" + (f" (95% interval ± {ci})" if ci is not None else "")
                metrics.append(("bleu", label, figures[f"bleu{n}"]))
        if "perplexity" in figures:
            metrics.append(("perplexity", "perplexity of the reference lines", figures["perplexity"]))
        hard = _dig(figures, "rules_model", "hard_ok")
        if hard is not None:
            metrics.append(("accuracy", "hard-rule compliance of the top candidate, %", hard))
        if not metrics:
            continue
        dataset = f"wb14123 couplet test set{described} ({figures.get('pairs', '?')} pairs)"
        results += [
            "  - task:",
            "      type: text2text-generation",
            f"      name: {_yaml('lower line of a couplet (对联下联)')}",
            "    dataset:",
            "      type: wb14123/couplet-dataset",
            f"      name: {_yaml(dataset)}",
            f"      config: {split}",
            "      split: test",
            "    metrics:",
        ]
        for kind, label, value in metrics:
            results += [f"    - type: {kind}", f"      name: {_yaml(label)}", f"      value: {value}"]
    if results:
        lines += ["model-index:", f"- name: {name}", "  results:", *results]
    return [*lines, "---", ""]


def how_to_use(bundle: Path, where: str = "models/default") -> list[str]:
    """The card's "How to use" section: the files, the command line, the REST call, Python;
    ``where``: the bundle's folder as the commands name it."""
    proposer = (bundle / PROPOSER_WEIGHTS).is_file()
    reverse = (bundle / REVERSE_WEIGHTS).is_file()
    model_arg = "" if where == "models/default" else f" --model {where}"
    return [
        HOW_TO_USE,
        "",
        "The bundle is this folder (SHA256SUMS lists the files the code reads):",
        "",
        f"- `{WEIGHTS_FILE}` and `{CONFIG_FILE}`: the encoder-decoder, fp16 weights in safetensors (the",
        "  tied embedding stored once) and its configuration in JSON;",
        *(
            [
                f"- `{PROPOSER_WEIGHTS}` and `{PROPOSER_CONFIG}`: the one-pass proposer (an encoder-only",
                "  tagger), likewise;",
            ]
            if proposer
            else []
        ),
        *(
            [
                f"- `{REVERSE_WEIGHTS}` and `{REVERSE_CONFIG}`: the reverse model (下联求上联: upper lines",
                "  for a lower line), its embedding shared with the encoder-decoder's file;",
            ]
            if reverse
            else []
        ),
        f"- `{VOCAB_FILE}`: the sentencepiece vocabulary (one piece a character) the models read;",
        "- the tables the search and the site read (training-set fingerprints, known lower lines,",
        "  pairing scores, 横批, blocked words).",
        "",
        "Install the project with its `serve` extra (`make setup`), then, from its folder:",
        "",
        "Command line:",
        "",
        "```console",
        f"$ duilian generate 春风得意马蹄疾 -n 3{model_arg}",
        f"$ duilian generate 春风得意马蹄疾 --locks __秋____ --json{model_arg}",
        *([f"$ duilian generate --reverse 家和万事兴 -n 3{model_arg}"] if reverse else []),
        "```",
        "",
        f"REST API (`make serve`, or `python -m serve --model {where}`):",
        "",
        "```bash",
        "curl -s localhost:8000/api/v1/generate -H 'content-type: application/json' \\",
        """     -d '{"upper": "春风得意马蹄疾", "n": 5}'""",
        "```",
        "",
        "Python (the service the site and the command line stand on; the engine decodes as the site",
        "does, int8 on ONNX Runtime, its exported graphs kept in `work/cache/onnx`):",
        "",
        "```python",
        "from pathlib import Path",
        "",
        "from data.paths import graph_cache_dir",
        "from duilian.inputs import make_query",
        "from duilian.service import Engine, LoadedModel",
        "from model.decoding.options import SERVE_INT8, SERVE_RUNTIME",
        "",
        "engine = Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir())",
        f'model = LoadedModel.load(Path("{where}"), engine=engine)',
        'answer = model.answer(make_query("春风得意马蹄疾", n=5))',
        "for c in answer.candidates:",
        "    print(c.text, c.rank_score, c.report.hard_ok)",
        "```",
        "",
        "or the decoder alone (`model.release.bundle.load_bundle`, `model.decoding.decoder.Decoder`):",
        "",
        "```python",
        "from model.decoding.decoder import Decoder",
        "from model.decoding.options import DecodeOptions",
        "from model.release.bundle import load_bundle",
        "",
        f'bundle = load_bundle("{where}")',
        "decoder = Decoder(bundle.model, bundle.vocab, proposer=bundle.proposer, pairing=bundle.pairing)",
        'for c in decoder.generate("春风得意马蹄疾", DecodeOptions(n_best=5)).candidates:',
        "    print(c.text, c.score)",
        "```",
        "",
    ]


def with_header(card: str, bundle: Path) -> str:
    """``card`` with its front matter and "How to use" section rendered again (added when it
    has none: the front matter first, the section before the first ``## `` heading)."""
    body = card
    if body.startswith("---\n"):
        end = body.find("\n---\n", 4)
        if end >= 0:
            body = body[end + len("\n---\n") :].lstrip("\n")
    lines = body.split("\n")
    if HOW_TO_USE in lines:  # drop the old section, up to the next heading of its level
        start = lines.index(HOW_TO_USE)
        stop = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines = lines[:start] + lines[stop:]
    at = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
    lines = lines[:at] + how_to_use(bundle) + lines[at:]
    ev = _read_json(bundle / "eval.json")
    return "\n".join([*front_matter(ev), *lines])


def rewrite_header(bundle: Path) -> int:
    """``--header-only``: the card's front matter and "How to use" rendered again in place."""
    path = bundle / "MODEL_CARD.md"
    try:
        card = path.read_text(encoding="utf-8") if path.is_file() else ""
        path.write_text(with_header(card, bundle), encoding="utf-8")
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote the front matter and '{HOW_TO_USE[3:]}' of {path}")
    return 0


def render(
    bundle: Path,
    train_dir: Path | None,
    report: dict[str, Any],
    bench: dict[str, Any],
    hardware: str = "not recorded",
    proposer_dir: Path | None = None,
    reverse_dir: Path | None = None,
) -> str:
    ev = _read_json(bundle / "eval.json")
    meta = model_meta(bundle)
    size = bundle_size_mb(bundle)
    known = known_file(bundle)
    tr = training_summary(train_dir)
    cfg = meta.get("model_config", {})
    lines = [
        *front_matter(ev),
        "# Model card: duilian default couplet model",
        "",
        "A character-level Transformer encoder-decoder that writes the lower line (下联) of a Chinese",
        "couplet, decoded by a beam search that enforces the couplet rules (model/decoding/).",
        "",
        "**License: AGPL-3.0.** The model is trained on the wb14123 corpus (AGPL-3.0), so it carries",
        "that license; the regulated-verse and primer pairs it also saw are MIT.",
        *known_note(known),
        "",
        *how_to_use(bundle),
        "## Architecture and size",
        "",
        f"- parameters: {meta.get('n_params', '–'):,}" if meta.get("n_params") else "- parameters: –",
        f"- configuration: `{json.dumps(cfg, ensure_ascii=False)}`",
        f"- bundle on disk: {size:.1f} MB (fp16 weights, vocabulary, fingerprints, "
        + ("the training pairs' lower lines, " if known is not None else "")
        + "cards)",
        "",
        "## Training",
        "",
        f"- preset: `{meta.get('preset', '–')}`; hardware: {hardware}",
        f"- steps: {tr['steps']:,}; wall time: {tr['minutes']:.1f} min; pairs seen: "
        f"{tr.get('pairs_seen', 0):,}; the bundled checkpoint: step {_count(meta.get('step'))}"
        if tr.get("steps")
        else f"- the bundled checkpoint: step {_count(meta.get('step'))}",
        f"- best validation NLL per character: {meta.get('best_valid', '–')}",
        "",
        *proposer_section(bundle, proposer_dir or (train_dir / "proposer" if train_dir else None)),
        *reverse_section(bundle, reverse_dir or (train_dir / "reverse" if train_dir else None)),
        "## Data",
        "",
        *data_section(report),
        "",
        "## Evaluation (`make eval`, wb14123 test set, top candidate of the rule-constrained beam search)",
        "",
        *eval_table(ev),
        *fast_mode_lines(ev),
        "",
        "## Decoding latency",
        "",
        *latency_section(bench),
        "",
        "## Goals (docs/MEASUREMENTS.md)",
        "",
        "| goal | measured | target | verdict |",
        "|---|---|---|---|",
        *(g.row() for g in goals(ev, size, bench)),
        "",
    ]
    return "\n".join(lines) + "\n"


def write_card(
    bundle: Path, train_dir: Path | None, report: Path, bench: Path | None = None, hardware: str | None = None
) -> Path:
    """Render the card into ``bundle/MODEL_CARD.md`` (``make train`` calls this after export);
    ``hardware``: what the model trained on, in words (default: this machine)."""
    hardware = hardware or hardware_description()
    card = render(bundle, train_dir, _read_json(report), _read_json(bench), hardware)
    path = bundle / "MODEL_CARD.md"
    path.write_text(card, encoding="utf-8")
    return path


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m model.card", description=__doc__.split("\n\n")[0])
    p.add_argument("bundle", nargs="?", type=Path, default=default_model_dir())
    p.add_argument("--train-dir", type=Path, help="the training run's folder (train_log.csv, valid_log.csv)")
    p.add_argument(
        "--report",
        type=Path,
        help="the data stage's report (default: the bundle's data_report.json, the counts of the data "
        "it was trained on; else make data's report.json)",
    )
    p.add_argument("--bench", type=Path, help="a `make bench` JSON with a `decode` entry (latency)")
    p.add_argument("--hardware", default="not recorded", help="what the model was trained on, in words")
    p.add_argument(
        "--proposer-dir", type=Path, help="the proposer's training run (default: <train-dir>/proposer)"
    )
    p.add_argument(
        "--reverse-dir", type=Path, help="the reverse model's training run (default: <train-dir>/reverse)"
    )
    p.add_argument("--extra", type=Path, help="Markdown appended to the card (notes, limitations)")
    p.add_argument(
        "--header-only",
        action="store_true",
        help="rewrite only the card's YAML front matter (from eval.json) and its 'How to use' section, "
        "keeping the rest of MODEL_CARD.md as it is",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not has_model(args.bundle):
        print(f"error: {missing_model(args.bundle)}", file=sys.stderr)
        return 2
    if args.header_only:
        return rewrite_header(args.bundle)
    given = {"--train-dir": args.train_dir, "--report": args.report, "--bench": args.bench}
    given |= {"--proposer-dir": args.proposer_dir, "--extra": args.extra, "--reverse-dir": args.reverse_dir}
    missing = [f"{flag} {path}" for flag, path in given.items() if path is not None and not path.exists()]
    # the bundle's own record of its data first: `make data` may have moved on since it was trained
    kept = args.bundle / DATA_REPORT
    report = args.report or (kept if kept.is_file() else data_dir() / "report.json")  # may be absent
    try:
        if missing:
            raise FileNotFoundError(f"no such file or folder: {', '.join(missing)}")
        card = render(
            args.bundle,
            args.train_dir,
            _read_json(report),
            _read_json(args.bench),
            args.hardware,
            args.proposer_dir,
            args.reverse_dir,
        )
        if args.extra is not None:
            card += "\n" + args.extra.read_text(encoding="utf-8")
    except (OSError, ValueError) as e:  # ValueError: a file that is not a checkpoint, or not JSON
        print(f"error: {e}", file=sys.stderr)
        return 2
    (args.bundle / "MODEL_CARD.md").write_text(card, encoding="utf-8")
    print(f"wrote {args.bundle / 'MODEL_CARD.md'}")
    return 0
