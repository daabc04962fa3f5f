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
import json
import sys
from pathlib import Path
from typing import Any

from data.paths import data_dir, default_model_dir
from model.release.card_goals import goals
from model.release.card_header import front_matter, how_to_use, rewrite_header
from model.release.card_sections import (
    bundle_size_mb,
    count,
    data_section,
    eval_table,
    fast_mode_lines,
    known_note,
    latency_section,
    proposer_section,
    read_json,
    reranker_section,
    reverse_section,
    training_summary,
)
from model.store.bundle import model_meta
from model.store.layout import DATA_REPORT, has_model, known_file, missing_model
from model.training.hardware import hardware_description


def render(
    bundle: Path,
    train_dir: Path | None,
    report: dict[str, Any],
    bench: dict[str, Any],
    hardware: str = "not recorded",
    proposer_dir: Path | None = None,
    reverse_dir: Path | None = None,
) -> str:
    ev = read_json(bundle / "eval.json")
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
        f"{tr.get('pairs_seen', 0):,}; the bundled checkpoint: step {count(meta.get('step'))}"
        if tr.get("steps")
        else f"- the bundled checkpoint: step {count(meta.get('step'))}",
        f"- best validation NLL per character: {meta.get('best_valid', '–')}",
        "",
        *proposer_section(bundle, proposer_dir or (train_dir / "proposer" if train_dir else None)),
        *reverse_section(bundle, reverse_dir or (train_dir / "reverse" if train_dir else None)),
        *reranker_section(bundle),
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
    card = render(bundle, train_dir, read_json(report), read_json(bench), hardware)
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
            read_json(report),
            read_json(args.bench),
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
