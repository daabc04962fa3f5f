"""`make eval`: BLEU-1/2/4, perplexity, rule compliance and diversity on the wb14123 test set.

    python -m model.evaluate [--model models/default] [--limit 500] [--no-rules] [--beam-size 10]

Reported on the full test set and on its leak-free part (test pairs whose upper line is
not a training upper line), beside the human reference lines' own rule rates. Writes
``eval.json`` and ``eval.md`` under ``--out`` (default ``work/eval/<model name>``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from data.pairing import PairingTable
from data.paths import data_dir, default_model_dir, work_dir
from data.text import REGISTERS
from data.tones import MODES as TONE_MODES
from model.decoding.options import MAX_CANDIDATES, RUNTIMES, SERVE_INT8, SERVE_RUNTIME, DecodeOptions
from model.decoding.registers import register_index
from model.release.eval_decode import bundle_reranker_at, load_any, load_proposer
from model.release.eval_files import evaluate_files
from model.release.eval_tables import comparison_table, markdown
from model.release.metrics import BOOTSTRAP, line_stats, paired_bleu
from model.training.pairs import read_tsv


def decode_options(args: argparse.Namespace) -> Any:
    opts = {
        "n_best": args.n_best,
        "beam_size": args.beam_size,
        "rules": args.rules,
        "tone_mode": args.tone_mode,
        "register": args.register,
    }
    if args.rhythm_weight is not None:
        opts["rhythm_weight"] = args.rhythm_weight
    if args.three_level_weight is not None:
        opts["three_level_weight"] = args.three_level_weight
    if args.fast:
        opts["fast"] = True
    if args.ensemble_weight is not None:
        opts["ensemble_weight"] = args.ensemble_weight
    if args.proposals is not None:
        opts["proposals"] = args.proposals
    if args.proposer_weight is not None:
        opts["proposer_weight"] = args.proposer_weight
    if args.shortlist is not None:
        opts["shortlist"] = args.shortlist
    if args.diversity is not None:
        opts["diversity"] = args.diversity
    return DecodeOptions(**opts)


# The decodes ``--compare-rules`` and ``--compare-weights`` add beside the one asked for:
# label -> the options changed (issue 5: BLEU and compliance with the rules on and off, and
# with each preference weight off).
COMPARISONS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "compare_rules": [("rules off", {"rules": False})],
    "compare_weights": [
        ("rhythm weight 0", {"rhythm_weight": 0.0}),
        ("三平尾 weight 0", {"three_level_weight": 0.0}),
    ],
}


def compare_with(options: Any, spec: str) -> tuple[str, dict[str, Any]]:
    """``--compare-with`` KEY=VALUE -> (label, the changed options), the value read as the
    DecodeOptions field's declared type (``none`` for a field that may be None)."""
    key, sep, text = spec.partition("=")
    types = {f.name: str(f.type) for f in fields(options)}
    if not sep or key not in types:
        known = ", ".join(sorted(types))
        raise ValueError(f"--compare-with takes KEY=VALUE with KEY one of {known}; got {spec!r}")
    kinds = {k.strip() for k in types[key].split("|")}  # e.g. {"int", "None"}
    value: Any
    try:
        if "None" in kinds and text.lower() == "none":
            value = None
        elif "bool" in kinds:
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError(text)
            value = text.lower() in ("true", "1")
        elif "int" in kinds:
            value = int(text)
        elif "float" in kinds:
            value = float(text)
        elif "str" in kinds:
            value = text
        else:
            raise ValueError(text)
    except ValueError:
        raise ValueError(f"--compare-with {spec!r}: {text!r} is not a value for {key}") from None
    problem = option_problem(key, value)
    if problem:
        raise ValueError(f"--compare-with {spec!r}: {problem}")
    return spec, {key: value}


def option_problem(key: str, value: Any) -> str:
    """What the search would refuse on every line for this DecodeOptions value ("" for
    nothing), so that it is refused before any decoding."""
    lowest = {"n_best": 1, "beam_size": 1, "proposals": 1, "shortlist": 0, "diversity": 0.0}
    if isinstance(value, int | float) and not isinstance(value, bool) and value < lowest.get(key, value):
        return f"{key} must be at least {lowest[key]}"
    if key == "n_best" and value > MAX_CANDIDATES:
        return f"n_best must be at most {MAX_CANDIDATES}"
    if key == "tone_mode" and value not in TONE_MODES:
        return f"tone_mode is one of {', '.join(TONE_MODES)}"
    return ""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m model.evaluate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument(
        "--model", type=Path, default=None, help="bundle folder or checkpoint (default models/default)"
    )
    p.add_argument(
        "--data-dir", type=Path, default=None, help="folder with test.tsv, test_leak.txt, train.tsv"
    )
    p.add_argument("--limit", type=int, default=None, help="only the first N test pairs")
    p.add_argument("--out", type=Path, default=None, help="where eval.json and eval.md go")
    p.add_argument("--n-best", type=int, default=1)
    p.add_argument("--beam-size", type=int, default=10)
    p.add_argument(
        "--rules", action=argparse.BooleanOptionalAction, default=True, help="couplet rules in decoding"
    )
    p.add_argument("--tone-mode", default="modern", choices=["modern", "lenient", "classical"])
    p.add_argument(
        "--register",
        default="general",
        choices=REGISTERS,
        help="the register a model with registers decodes and is scored in (e.g. formal for the formal "
        "test part); a --compare-model without it is decoded in general",
    )
    p.add_argument("--rhythm-weight", type=float, default=None)
    p.add_argument("--three-level-weight", type=float, default=None)
    p.add_argument("--greedy", action="store_true", help="plain greedy decoding instead of model.decoding")
    p.add_argument("--compare-rules", action="store_true", help="also decode with the rules off; report both")
    p.add_argument(
        "--compare-weights",
        action="store_true",
        help="also decode with each preference weight (rhythm, 三平尾) at 0; report them all",
    )
    p.add_argument(
        "--proposer",
        type=Path,
        default=None,
        help="an encoder-only tagger (checkpoint or bundle) beside the model (default: the bundle's)",
    )
    p.add_argument(
        "--pairing",
        type=Path,
        default=None,
        help="a pairing table (pairing.npz, data/pairing.py) for the search (default: the bundle's)",
    )
    p.add_argument(
        "--no-proposer", action="store_true", help="the model alone, without the bundle's proposer"
    )
    p.add_argument(
        "--fast", action="store_true", help="fast mode: the proposer's candidates, rescored by the model"
    )
    p.add_argument("--proposals", type=int, default=None, help="fast mode: candidates rescored")
    p.add_argument(
        "--ensemble-weight", type=float, default=None, help="the proposer's weight inside the normal search"
    )
    p.add_argument("--proposer-weight", type=float, default=None, help="fast mode: the proposer's weight")
    p.add_argument(
        "--shortlist",
        type=int,
        default=None,
        help="score only the proposer's top K tokens per position (0: all)",
    )
    p.add_argument(
        "--diversity",
        type=float,
        default=None,
        help="diverse beam search: n-best groups, this penalty per character another group chose",
    )
    p.add_argument(
        "--int8",
        action=argparse.BooleanOptionalAction,
        default=SERVE_INT8,
        help="decode with int8 copies of the models, as `make serve` does by default (perplexity stays fp32)",
    )
    p.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default=SERVE_RUNTIME,
        help="what runs the models while decoding (default: as `make serve`)",
    )
    p.add_argument(
        "--compare-with",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="also decode with this DecodeOptions field changed (e.g. ensemble_weight=1.0; repeatable); "
        "reported beside the asked decode with a paired bootstrap of the BLEU difference",
    )
    p.add_argument(
        "--compare-model",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help="also decode with this model (a bundle, with its proposer, or a checkpoint, beside the "
        "asked proposer), the same options; paired with the asked decode like --compare-with",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=BOOTSTRAP,
        help=f"resamples for BLEU's 95%% confidence intervals (default {BOOTSTRAP}; 0: none)",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar of the lines decoded, on stderr (default: when stderr is a terminal)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model_path = args.model or default_model_dir()
    folder = args.data_dir or data_dir()
    if not model_path.exists():
        print(f"error: no model at {model_path}; run `make train` or pass --model", file=sys.stderr)
        return 2
    if args.limit is not None and args.limit <= 0:
        print("error: --limit must be positive", file=sys.stderr)
        return 2
    if args.bootstrap < 0:
        print("error: --bootstrap must be 0 (none) or a number of resamples", file=sys.stderr)
        return 2
    out = args.out or work_dir() / "eval" / model_path.name
    try:
        model, vocab, proposer, pairing = load_any(model_path)
        if args.pairing is not None:
            pairing = PairingTable.load(args.pairing)
        if args.proposer is not None:
            proposer = load_proposer(args.proposer, vocab)
        if args.fast and proposer is None:
            raise ValueError("--fast needs a proposer: a bundle with one, or --proposer PATH")
        if args.no_proposer or args.greedy:
            proposer = None
        register_index(args.register, model.cfg.n_registers)  # a model without it: refused here
        if args.greedy and args.register != "general":
            raise ValueError("--greedy decodes in the general register only; leave out --register")
        train_path = folder / "train.tsv"
        lowers = [lo for _, lo in read_tsv(train_path)] if train_path.exists() else []
        options = decode_options(args)
        if options is not None:
            problems = [option_problem(f.name, getattr(options, f.name)) for f in fields(options)]
            if any(problems):
                raise ValueError("; ".join(p for p in problems if p))
        variants = [v for flag, vs in COMPARISONS.items() if getattr(args, flag) for v in vs]
        variants += [compare_with(options, spec) for spec in args.compare_with]  # checked before decoding
        if (variants or args.compare_model) and args.greedy:
            raise ValueError("--compare-* compare searches of model.decoding; --greedy has no options")
        others = [(label, model, proposer, pairing, replace(options, **change)) for label, change in variants]
        for path in args.compare_model:  # another model, the same search: a bundle with its proposer
            other, other_vocab, other_proposer, other_pairing = load_any(path)  # loaded (and checked) first
            if not other_vocab.same_as(vocab):
                raise ValueError(f"--compare-model {path}: its vocabulary differs from the model's")
            if not path.is_dir() or args.no_proposer:  # a checkpoint: beside the asked proposer
                other_proposer = None if args.no_proposer else proposer
            registers = REGISTERS[: max(other.cfg.n_registers, 1)]
            theirs = options if options.register in registers else replace(options, register="general")
            others.append((f"model {path}", other, other_proposer, other_pairing, theirs))

        def run(
            m: Any,
            prop: Any,
            table: PairingTable | None,
            opts: Any,
            lines: list[tuple[str, str]],
            desc: str = "decoding the test set",
            rerank: Any = None,
        ) -> dict[str, Any]:
            return evaluate_files(
                m, vocab, folder, args.limit, lowers, opts, args.greedy, prop, args.int8, args.runtime,
                args.bootstrap, lines, table, args.progress, desc, rerank,
            )  # fmt: skip

        try:  # made before the decode, so a folder that cannot be made fails at once, not after it
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"--out {out}: cannot make the folder for eval.json and eval.md ({e})") from e
        asked: list[tuple[str, str]] = []
        # the bundle's reranker, as the site decodes (the compared searches and models go without)
        reranker = None if args.greedy else bundle_reranker_at(model_path)
        result = run(model, proposer, pairing, options, asked, rerank=reranker)
        refs = [ref for ref, _ in asked]
        asked_stats = line_stats(refs, [hyp for _, hyp in asked]) if others and args.bootstrap > 1 else {}
        for label, other, other_proposer, other_pairing, other_options in others:
            lines: list[tuple[str, str]] = []
            summary_of = run(other, other_proposer, other_pairing, other_options, lines, label)["summary"]
            hyps = [hyp for _, hyp in lines]
            paired = paired_bleu(asked_stats, line_stats(refs, hyps), args.bootstrap) if asked_stats else {}
            summary_of.update({f"full_{k}": v for k, v in paired.items()})
            result.setdefault("compared", {})[label] = summary_of
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    (out / "eval.json").write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    text = markdown(result) + comparison_table(result)
    (out / "eval.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"written to {out}")
    return 0
