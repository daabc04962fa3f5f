"""The model card's body sections, each rendered from the figures the project writes itself:
the training logs, ``eval.json``, the decode benchmark, the data stage's report, the
bundle's proposer and reverse model.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from model.decoding.options import DecodeOptions
from model.decoding.reranking import DEFAULT_WEIGHT
from model.release.eval_tables import with_ci
from model.release.metrics import BLEU_ORDERS
from model.store.bundle import model_meta
from model.store.layout import SCORER_CONFIG
from model.store.weights import count_parameters


def known_note(known: Path | None) -> list[str]:
    """The card's lines on the training pairs' lower lines in the file ``known`` (none without)."""
    if known is None:
        return []
    return [
        f"The bundle also carries the lower lines of its training pairs (`{known.name}`, lzma,",
        "found by the upper line's fingerprint), so the site shows a known couplet's lower lines",
        "without the corpus: they are the corpus's text, AGPL-3.0 (wb14123) and MIT (verse, primers).",
    ]


def read_json(path: Path | None) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a JSON file ({e})") from e
    return data if isinstance(data, dict) else {}


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
        (
            "",
            f"normal search: the encoder-decoder with the bundled tagger and its shortlist, {served}"
            + ", reranked when the bundle has a reranker",
        ),
        ("no_rerank_", f"the same without the reranker, {served}"),
        ("full_vocab_", f"the same, every token scored (no shortlist), {served}"),
        ("fp32_", "the same as served, in fp32"),
        ("int8_", "the same as served, in int8"),
        ("torch_", "the same as served, in eager PyTorch"),
        ("diverse_", f"diverse candidates (the page's default), {served}"),
        ("fast_", f"fast mode (tagger proposals rescored), {served}"),
        ("model_only_", "the encoder-decoder alone, every token scored, fp32, eager PyTorch"),
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


def count(n: Any) -> str:
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
        f"seen; the bundled checkpoint: step {count(meta.get('step'))}"
        if tr.get("steps")
        else f"- the bundled checkpoint: step {count(meta.get('step'))} (no training log given)"
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
        f"seen; the bundled checkpoint: step {count(meta.get('step'))}"
        if tr.get("steps")
        else f"- the bundled checkpoint: step {count(meta.get('step'))} (no training log given)"
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


def reranker_section(bundle: Path) -> list[str]:
    """The bundle's reranker (model/decoding/reranking.py): its scorer, training and weight."""
    config = read_json(bundle / SCORER_CONFIG)
    if not config:
        return []
    record = config.get("training") or {}
    valid = record.get("valid") or {}
    own = count_parameters(config, bundle / SCORER_CONFIG, own=True)
    served = record.get("weight", DEFAULT_WEIGHT)
    lines = [
        "## Reranker",
        "",
        "A small encoder (model/net/scorer.py) reads the upper line and a candidate place by place, through",
        "the model's own character table (shared and frozen: `scorer_config.json`'s `shared_weights`), and",
        "scores how much the pair reads like a couplet people wrote. It was trained to pick the human lower",
        "line out of this model's own 10-best for the same upper line (a sample of the training pairs, two",
        "fifths formal and a fifth classical); each answer's candidates are ordered by their rank score plus",
        f"{served} times its score (the bundle's weight; a request may set another,",
        "`DecodeOptions.rerank_weight`; `rerank_score` in the API's answer).",
        "",
        f"- parameters: {own:,} of its own (the character table shared with the model); "
        f"{config.get('n_enc_layers', '–')} encoder layer(s), width {config.get('d_model', '–')}",
        f"- trained {count(record.get('steps'))} steps on {count(record.get('groups'))} groups of lines",
        f"- validation (groups of the validation pairs): the human line first in "
        f"{100 * float(valid.get('human_first', 0)):.1f}%, mean reciprocal rank {valid.get('mrr', '–')}, "
        f"listwise loss {valid.get('loss', '–')}",
    ]
    table = record.get("weights") or []
    if table:
        lines += [
            f"- the served weight is the largest that keeps the top line's agreement with the human lines"
            f" within 1% of no reranking: {served}",
            "",
            "| weight | agreement with the human line | top line changed |",
            "|---|---|---|",
            *(f"| {r['weight']} | {r['agreement']:.4f} | {100 * r['changed']:.0f}% |" for r in table),
        ]
    return [*lines, ""]


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
