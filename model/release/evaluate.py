"""`make eval`: BLEU-1/2/4, perplexity, rule compliance and diversity on the wb14123 test set.

    python -m model.evaluate [--model models/default] [--limit 500] [--no-rules] [--beam-size 10]

Reported on the full test set and on its leak-free part (test pairs whose upper line is
not a training upper line), beside the human reference lines' own rule rates. Writes
``eval.json`` and ``eval.md`` under ``--out`` (default ``work/eval/<model name>``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import torch
from sacrebleu.metrics import BLEU
from tqdm import tqdm

from data.pairing import PairingTable
from data.paths import data_dir, default_model_dir, graph_cache_dir, work_dir
from data.rules import HARD_RULES, check
from data.tones import MODES as TONE_MODES
from data.vocab import Vocab
from model.decoding.decoder import Decoder
from model.decoding.options import MAX_CANDIDATES, RUNTIMES, SERVE_INT8, SERVE_RUNTIME, DecodeOptions, Runtime
from model.net.checkpoint import CoupletModel, load_model
from model.net.checkpoint import load_proposer as checkpoint_proposer
from model.release.bundle import load_bundle, load_models, verify_bundle
from model.training.greedy import greedy
from model.training.pairs import PairData, read_tsv
from model.training.scoring import mean_nll

Decode = Callable[[list[str]], list[str]]


BLEU_ORDERS = (1, 2, 4)
# Resamples of the test lines for BLEU's 95% confidence interval (sacrebleu's own default
# for its bootstrap); a few seconds on the 4,000-pair test set.
BOOTSTRAP = 1000


def bleu_scores(hyps: list[str], refs: list[str], n_bootstrap: int = 0) -> dict[str, float]:
    """Corpus BLEU-1/2/4 (sacrebleu, ``tokenize="zh"``). With ``n_bootstrap`` > 1 also
    ``bleuN_ci95``: the half-width of the 95% confidence interval from sacrebleu's bootstrap
    resampling of the lines (its seed fixed, SACREBLEU_SEED, so the figure is reproducible):
    how far another sample of test lines could move the figure. Two decodes of the same
    lines are compared far more finely by ``paired_bleu``."""
    out: dict[str, float] = {}
    for n in BLEU_ORDERS:
        score = BLEU(tokenize="zh", max_ngram_order=n).corpus_score(
            hyps, [refs], n_bootstrap=max(n_bootstrap, 1)
        )
        out[f"bleu{n}"] = round(score.score, 2)
        if n_bootstrap > 1:  # estimate_ci's result: sacrebleu prints it as "score (μ ± ci)"
            out[f"bleu{n}_ci95"] = round(float(score._ci), 2)
    return out


def with_ci(split: dict[str, Any], key: str) -> str:
    """A figure of one split as text, with its confidence interval when there is one."""
    ci = split.get(f"{key}_ci95")
    return f"{split.get(key, '–')}" + (f" ± {ci}" if ci is not None else "")


def rule_rates(uppers: list[str], lowers: list[str], tone_mode: str) -> dict[str, float]:
    """Share of pairs passing each rule; tone_end and rhythm over the pairs where they apply."""
    reports = [check(u, lo, tone_mode) for u, lo in zip(uppers, lowers, strict=True)]
    n = max(len(reports), 1)
    rates = {name: sum(bool(getattr(r, name)) for r in reports) / n for name in HARD_RULES}
    rates["hard_ok"] = sum(r.hard_ok for r in reports) / n
    tone = [r.tone_end for r in reports if r.tone_end is not None]
    rates["tone_end"] = sum(tone) / len(tone) if tone else math.nan
    rhythm = [r.rhythm for r in reports if r.rhythm is not None]
    rates["rhythm"] = sum(rhythm) / len(rhythm) if rhythm else math.nan
    rates["no_three_level_tail"] = sum(r.no_three_level_tail for r in reports) / n
    return {k: round(100 * v, 2) for k, v in rates.items()}


def distinct(lines: list[str], n: int) -> float:
    grams = [line[i : i + n] for line in lines for i in range(len(line) - n + 1)]
    return round(len(set(grams)) / max(len(grams), 1), 4)


def perplexity(model: CoupletModel, vocab: Vocab, pairs: list[tuple[str, str]]) -> float:
    data = PairData(pairs, vocab, model.cfg.max_len, batch_tokens=4096)
    with torch.no_grad():
        return round(math.exp(mean_nll(model, data.fixed_batches(list(range(len(data)))))), 2)


def score_split(
    model: CoupletModel,
    vocab: Vocab,
    pairs: list[tuple[str, str]],
    hyps: list[str],
    train_lowers: set[str],
    tone_mode: str,
    n_bootstrap: int = BOOTSTRAP,
) -> dict[str, Any]:
    uppers, refs = [u for u, _ in pairs], [lo for _, lo in pairs]
    return {
        "pairs": len(pairs),
        **bleu_scores(hyps, refs, n_bootstrap),
        "perplexity": perplexity(model, vocab, pairs),
        "distinct1": distinct(hyps, 1),
        "distinct2": distinct(hyps, 2),
        "verbatim_train_lower": round(100 * sum(h in train_lowers for h in hyps) / max(len(hyps), 1), 2),
        "rules_model": rule_rates(uppers, hyps, tone_mode),
        "rules_human": rule_rates(uppers, refs, tone_mode),
    }


def make_decoder(
    model: CoupletModel,
    vocab: Vocab,
    options: Any,
    use_greedy: bool,
    proposer: Any = None,
    int8: bool = SERVE_INT8,
    runtime: Runtime = SERVE_RUNTIME,
    pairing: PairingTable | None = None,
    progress: bool | None = None,
    desc: str = "decoding the test set",
) -> Decode:
    """Top candidate of ``model.decoding.decoder.Decoder`` (or plain greedy decoding when asked),
    with a ``proposer`` (an encoder-only tagger) beside the model; ``int8``: quantised copies;
    ``runtime``: what runs them (model.decoding.options.RUNTIMES). ``progress``: a tqdm bar of
    the lines decoded on stderr (None: when stderr is a terminal), named ``desc``."""
    if use_greedy:

        def plain(uppers: list[str]) -> list[str]:
            with bar(len(uppers), progress, desc) as shown:
                out = greedy(model, vocab, uppers)
                shown.update(len(uppers))
            return out

        return plain
    decoder = Decoder(
        model,
        vocab,
        int8=int8,
        proposer=proposer,
        runtime=runtime,
        pairing=pairing,
        graph_cache=graph_cache_dir(),
    )

    def one(upper: str) -> str:
        try:
            result = decoder.generate(upper, options)
        except ValueError as e:  # e.g. a ConstraintError: counted as an empty, failing output
            print(f"note: no output for {upper!r}: {e}", file=sys.stderr)
            return ""
        return result.candidates[0].text if result.candidates else ""

    def top(uppers: list[str]) -> list[str]:
        out: list[str] = []
        with bar(len(uppers), progress, desc) as shown:
            for i in range(0, len(uppers), 64):
                chunk = uppers[i : i + 64]
                try:
                    results = decoder.generate_batch(chunk, options)
                except ValueError:  # one impossible line: decode this chunk line by line
                    out.extend(one(u) for u in chunk)
                else:
                    out.extend(r.candidates[0].text if r.candidates else "" for r in results)
                shown.update(len(chunk))
        return out

    return top


def bar(total: int, progress: bool | None, desc: str) -> tqdm:
    """tqdm's bar of ``total`` lines on stderr; ``progress`` None: only on a terminal."""
    hidden = None if progress is None else not progress  # tqdm's None: hidden unless a terminal
    return tqdm(total=total, desc=desc, unit="line", file=sys.stderr, disable=hidden)


def read_flags(path: Path, n: int) -> list[bool] | None:
    if not path.exists():
        return None
    flags = [line.strip() == "1" for line in path.read_text().splitlines() if line.strip()]
    return flags if len(flags) >= n else None


def evaluate_files(
    model: CoupletModel,
    vocab: Vocab,
    folder: Path,
    limit: int | None = None,
    train_lowers: Iterable[str] = (),
    options: Any = None,
    use_greedy: bool = False,
    proposer: Any = None,
    int8: bool = SERVE_INT8,
    runtime: Runtime = SERVE_RUNTIME,
    n_bootstrap: int = BOOTSTRAP,
    lines_out: list[tuple[str, str]] | None = None,
    pairing: PairingTable | None = None,
    progress: bool | None = None,
    desc: str = "decoding the test set",
) -> dict[str, Any]:
    """Decode the test set once; score it whole and its leak-free part (perplexity is the
    model's; a ``proposer`` is the tagger the decoder uses, see ``DecodeOptions``;
    ``n_bootstrap``: resamples for BLEU's confidence intervals, 0 for none; ``lines_out``, a
    list, receives (reference, top candidate) for each line, for a paired comparison;
    ``progress``: a bar of the lines decoded on stderr, named ``desc``, None: on a terminal)."""
    tone_mode = getattr(options, "tone_mode", "modern")
    test_path = folder / "test.tsv"
    if not test_path.is_file():
        raise FileNotFoundError(f"missing {test_path}; run `make data` first")
    test = read_tsv(test_path)[: limit or None]
    if not test:
        raise ValueError(f"no test pairs (upper<TAB>lower lines) in {test_path}")
    decode = make_decoder(
        model.eval(), vocab, options, use_greedy, proposer, int8, runtime, pairing, progress, desc
    )
    hyps = decode([u for u, _ in test])
    if lines_out is not None:
        lines_out.extend(zip([lo for _, lo in test], hyps, strict=True))
    lowers = set(train_lowers)
    flags = read_flags(folder / "test_leak.txt", len(test))
    result: dict[str, Any] = {"full": score_split(model, vocab, test, hyps, lowers, tone_mode, n_bootstrap)}
    if flags is not None:
        keep = [i for i in range(len(test)) if not flags[i]]
        result["leakfree"] = score_split(
            model, vocab, [test[i] for i in keep], [hyps[i] for i in keep], lowers, tone_mode, n_bootstrap
        )
    result["options"] = (
        asdict(options) if options is not None and hasattr(options, "__dataclass_fields__") else {}
    )
    fast = proposer is not None and getattr(options, "fast", False)
    result["decoder"] = (
        "greedy"
        if use_greedy
        else "model.decode"  # the label eval.json has always recorded
        + (" fast (proposer)" if fast else "")
        + (" int8" if int8 else "")
        + f" ({runtime})"
    )
    # No example lines here: the result goes into the shipped bundle, and the test set is AGPL text.
    result["summary"] = summary(result)
    return result


def summary(result: dict[str, Any]) -> dict[str, float]:
    flat: dict[str, float] = {}
    for split in ("full", "leakfree"):
        r = result.get(split)
        if not r:
            continue
        for key in (
            "bleu1",
            "bleu2",
            "bleu4",
            "perplexity",
            "distinct1",
            "distinct2",
            "verbatim_train_lower",
        ):
            flat[f"{split}_{key}"] = r[key]
        for n in BLEU_ORDERS:
            if f"bleu{n}_ci95" in r:
                flat[f"{split}_bleu{n}_ci95"] = r[f"bleu{n}_ci95"]
        for key in ("hard_ok", "tone_end"):
            flat[f"{split}_{key}_model"] = r["rules_model"][key]
            flat[f"{split}_{key}_human"] = r["rules_human"][key]
        for key in ("rhythm", "no_three_level_tail"):  # the preferences' own rates
            if key in r["rules_model"]:
                flat[f"{split}_{key}_model"] = r["rules_model"][key]
    return flat


def markdown(result: dict[str, Any]) -> str:
    splits = [s for s in ("full", "leakfree") if s in result]
    head = "| figure | " + " | ".join(f"{s} ({result[s]['pairs']} pairs)" for s in splits) + " |"
    lines = [head, "|---|" + "---|" * len(splits)]
    for key in ("bleu1", "bleu2", "bleu4", "perplexity", "distinct1", "distinct2", "verbatim_train_lower"):
        lines.append(f"| {key} | " + " | ".join(with_ci(result[s], key) for s in splits) + " |")
    for rule in result[splits[0]]["rules_model"]:
        cells = [f"{result[s]['rules_model'][rule]} (human {result[s]['rules_human'][rule]})" for s in splits]
        lines.append(f"| rule {rule} % | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def load_any(path: Path, reverse: bool = False) -> tuple[Any, Vocab, Any, PairingTable | None]:
    """A bundle folder or a checkpoint file -> (model, vocabulary, the bundle's proposer and
    pairing table, or None for each); ``reverse``: a bundle's lower_to_upper model instead, with
    no proposer and its pairing table read the other way (ValueError when it has none)."""
    if path.is_dir():
        b = load_bundle(path)
        if reverse:
            if b.reverse is None:
                raise ValueError(f"{path}: the bundle has no reverse model (reverse.safetensors)")
            return b.reverse, b.vocab, None, None if b.pairing is None else b.pairing.swapped()
        return b.model, b.vocab, b.proposer, b.pairing
    model, vocab, _ = load_model(path)
    return model, vocab, None, None


def load_proposer(path: Path, vocab: Vocab) -> Any:
    """An encoder-only tagger from a checkpoint (or a bundle's model), on the same vocabulary."""
    if not path.is_dir():
        return checkpoint_proposer(path, vocab)
    verify_bundle(path)
    model, its_vocab, _, _ = load_models(path)
    if model.cfg.kind != "tagger":
        raise ValueError(f"{path}: a proposer must be an encoder-only tagger, not a {model.cfg.kind} model")
    if its_vocab.to_bytes() != vocab.to_bytes():
        raise ValueError(f"{path}: the proposer's vocabulary differs from the model's")
    return model


def decode_options(args: argparse.Namespace) -> Any:
    opts = {
        "n_best": args.n_best,
        "beam_size": args.beam_size,
        "rules": args.rules,
        "tone_mode": args.tone_mode,
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


def line_stats(refs: list[str], hyps: list[str]) -> dict[int, Any]:
    """For each BLEU order, sacrebleu's sufficient statistics of every line (matches and totals
    per n-gram order, lengths), an int array (lines, statistics): a resample's BLEU is
    computed from their sums, as sacrebleu's own bootstrap does."""
    import numpy as np

    return {
        n: np.array(
            BLEU(tokenize="zh", max_ngram_order=n)._extract_corpus_statistics(hyps, [refs]), dtype=np.int64
        )
        for n in BLEU_ORDERS
    }


def paired_bleu(asked: dict[int, Any], other: dict[int, Any], n_bootstrap: int) -> dict[str, float]:
    """``other``'s BLEU against ``asked``'s on the same lines (both ``line_stats``), by a paired
    bootstrap (Koehn, EMNLP 2004): both decodes resampled together, line for line,
    ``n_bootstrap`` times. For each order: ``bleuN_diff`` (other - asked on the lines as they
    are), ``bleuN_diff_ci95`` (half the width of the difference's 95% interval over the
    resamples) and ``bleuN_wins`` (the share of resamples where ``other`` scores higher). Much
    finer than comparing the two decodes' own intervals, since what the lines share cancels
    out. The seed is fixed."""
    import numpy as np

    lines = len(asked[BLEU_ORDERS[0]])
    samples = np.random.default_rng(12345).integers(0, lines, size=(max(n_bootstrap, 1), lines))
    out: dict[str, float] = {}
    for n in BLEU_ORDERS:
        bleu = BLEU(tokenize="zh", max_ngram_order=n)._compute_score_from_stats
        a, b = asked[n], other[n]
        diffs = np.array([bleu(list(b[i].sum(0))).score - bleu(list(a[i].sum(0))).score for i in samples])
        lo, hi = np.percentile(diffs, [2.5, 97.5])
        out[f"bleu{n}_diff"] = round(bleu(list(b.sum(0))).score - bleu(list(a.sum(0))).score, 2)
        out[f"bleu{n}_diff_ci95"] = round(float(hi - lo) / 2, 2)
        out[f"bleu{n}_wins"] = round(float((diffs > 0).mean()), 3)
    return out


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


def comparison_table(result: dict[str, Any]) -> str:
    """The decode asked for beside each compared one (empty without any)."""
    compared: dict[str, dict[str, float]] = result.get("compared", {})
    if not compared:
        return ""
    asked = result["summary"]
    head = "| figure | as asked | " + " | ".join(compared) + " |"
    keys = [k for k in asked if not k.endswith("_human")]
    keys += [f"full_bleu{n}_{s}" for n in BLEU_ORDERS for s in ("diff", "diff_ci95", "wins")]  # paired
    rows = [
        f"| {k} | {asked.get(k, '–')} | " + " | ".join(str(c.get(k, "–")) for c in compared.values()) + " |"
        for k in keys
        if k in asked or any(k in c for c in compared.values())
    ]
    return "\n".join(["", head, "|---|---|" + "---|" * len(compared), *rows]) + "\n"


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
            if other_vocab.to_bytes() != vocab.to_bytes():
                raise ValueError(f"--compare-model {path}: its vocabulary differs from the model's")
            if not path.is_dir() or args.no_proposer:  # a checkpoint: beside the asked proposer
                other_proposer = None if args.no_proposer else proposer
            others.append((f"model {path}", other, other_proposer, other_pairing, options))

        def run(
            m: Any,
            prop: Any,
            table: PairingTable | None,
            opts: Any,
            lines: list[tuple[str, str]],
            desc: str = "decoding the test set",
        ) -> dict[str, Any]:
            return evaluate_files(
                m, vocab, folder, args.limit, lowers, opts, args.greedy, prop, args.int8, args.runtime,
                args.bootstrap, lines, table, args.progress, desc,
            )  # fmt: skip

        try:  # made before the decode, so a folder that cannot be made fails at once, not after it
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"--out {out}: cannot make the folder for eval.json and eval.md ({e})") from e
        asked: list[tuple[str, str]] = []
        result = run(model, proposer, pairing, options, asked)
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
