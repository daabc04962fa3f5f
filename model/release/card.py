"""The model card: what a shipped bundle is, how it was made, and how it measures.

Rendered from the figures the project writes itself (the bundle's ``eval.json`` and
checkpoint metadata, the data stage's ``report.json``, the training log and the decode
benchmark), so the card never restates a number by hand. The goals are those of
docs/MEASUREMENTS.md, each reported as reached or not reached with the gap.

    python -m model.card models/default [--train-dir work/train/cpu] [--bench work/bench/x.json]
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
from model.net.checkpoint import load_checkpoint, model_from_checkpoint
from model.release.bundle import DATA_REPORT, KNOWN_FILE
from model.release.evaluate import BLEU_ORDERS, with_ci
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


KNOWN_NOTE = (
    "The bundle also carries the lower lines of its training pairs (`known_lowers.txt.xz`, lzma,",
    "found by the upper line's fingerprint), so the site shows a known couplet's lower lines",
    "without the corpus: they are the corpus's text, AGPL-3.0 (wb14123) and MIT (verse, primers).",
)


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
    meta = _read_checkpoint_meta(bundle, "proposer.pt")
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


def render(
    bundle: Path,
    train_dir: Path | None,
    report: dict[str, Any],
    bench: dict[str, Any],
    hardware: str = "not recorded",
    proposer_dir: Path | None = None,
) -> str:
    ev = _read_json(bundle / "eval.json")
    meta = _read_checkpoint_meta(bundle)
    size = bundle_size_mb(bundle)
    tr = training_summary(train_dir)
    cfg = meta.get("model_config", {})
    lines = [
        "# Model card: duilian default couplet model",
        "",
        "A character-level Transformer encoder-decoder that writes the lower line (下联) of a Chinese",
        "couplet, decoded by a beam search that enforces the couplet rules (model/decoding/).",
        "",
        "**License: AGPL-3.0.** The model is trained on the wb14123 corpus (AGPL-3.0), so it carries",
        "that license; the regulated-verse and primer pairs it also saw are MIT.",
        *KNOWN_NOTE * (bundle / KNOWN_FILE).is_file(),
        "",
        "## Architecture and size",
        "",
        f"- parameters: {meta.get('n_params', '–'):,}" if meta.get("n_params") else "- parameters: –",
        f"- configuration: `{json.dumps(cfg, ensure_ascii=False)}`",
        f"- bundle on disk: {size:.1f} MB (fp16 weights, vocabulary, fingerprints, "
        + ("the training pairs' lower lines, " if (bundle / KNOWN_FILE).is_file() else "")
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


def _read_checkpoint_meta(bundle: Path, name: str = "model.pt") -> dict[str, Any]:
    """Config, step and parameter count from a checkpoint of the bundle."""
    path = bundle / name
    if not path.is_file():
        return {}
    ckpt = load_checkpoint(path)
    meta = {k: v for k, v in ckpt.items() if k not in ("state_dict", "vocab", "optimizer")}
    # the state dict repeats tied weights: count the module's own
    meta["n_params"] = model_from_checkpoint(ckpt).num_parameters()
    return meta


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
    p.add_argument("--extra", type=Path, help="Markdown appended to the card (notes, limitations)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not (args.bundle / "model.pt").is_file():
        print(f"error: no model bundle at {args.bundle}", file=sys.stderr)
        return 2
    given = {"--train-dir": args.train_dir, "--report": args.report, "--bench": args.bench}
    given |= {"--proposer-dir": args.proposer_dir, "--extra": args.extra}
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
        )
        if args.extra is not None:
            card += "\n" + args.extra.read_text(encoding="utf-8")
    except (OSError, ValueError) as e:  # ValueError: a file that is not a checkpoint, or not JSON
        print(f"error: {e}", file=sys.stderr)
        return 2
    (args.bundle / "MODEL_CARD.md").write_text(card, encoding="utf-8")
    print(f"wrote {args.bundle / 'MODEL_CARD.md'}")
    return 0
