"""`make data`: build the training, validation and test files and the vocabulary.

Reads the sources named in the configuration (by default the shared corpora in
DUILIAN_CORPUS_DIR, plus work/crawl/*.jsonl and work/feedback/*.tsv when present) and
writes into DUILIAN_DATA_DIR (default work/data). Skips the work when the outputs are
newer than every input and the configuration is unchanged, unless --force.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from data.config import DataConfig, default_sources
from data.freshness import is_fresh
from data.inputs import source_files
from data.pipeline import run
from data.sources import KINDS, Source


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    names = [s.name for s in default_sources()]
    p = argparse.ArgumentParser(
        prog="python -m data", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--corpus-dir", type=Path, help="where the corpora are (default: DUILIAN_CORPUS_DIR)")
    p.add_argument("--out-dir", type=Path, help="where outputs go (default: DUILIAN_DATA_DIR or work/data)")
    p.add_argument("--sources", help=f"comma-separated source names to read (default all: {','.join(names)})")
    p.add_argument("--exclude", default="", help="comma-separated source names to leave out")
    p.add_argument(
        "--add",
        action="append",
        default=[],
        metavar="NAME=KIND:PATH",
        help=f"another training source, KIND one of {', '.join(KINDS)}; PATH (relative to the "
        "corpus folder) may be a glob (wb14123: the release folder, its train half is read)",
    )
    p.add_argument("--valid-size", type=int, help="validation pairs, carved by upper line (default 5000)")
    p.add_argument(
        "--valid-from",
        help="comma-separated sources the validation split is drawn from (default wb14123_train)",
    )
    p.add_argument(
        "--classical-valid-size",
        type=int,
        help="classical validation pairs (valid_classical.tsv), carved by upper line (default 1000)",
    )
    p.add_argument(
        "--repeat",
        action="append",
        default=[],
        metavar="NAME=K",
        help="write the training pairs of source NAME K times into train.tsv (weights a register up)",
    )
    p.add_argument(
        "--register",
        action="append",
        default=[],
        metavar="NAME=REGISTER",
        help="the register of source NAME's training pairs (general, classical or formal), written as "
        "train.tsv's third column for a model with a register embedding",
    )
    p.add_argument(
        "--vocab-from",
        type=Path,
        help="use this sentencepiece model as the vocabulary (to train an existing model further)",
    )
    p.add_argument(
        "--no-formal",
        action="store_true",
        help="hold no formal pairs out (the data of a model trained before the formal yardstick)",
    )
    p.add_argument("--max-lowers", type=int, help="lower lines kept per upper line (default 10)")
    p.add_argument("--min-char-count", type=int, help="occurrences for a character to enter the vocabulary")
    p.add_argument("--no-near-dup", action="store_true", help="only remove exact duplicates")
    p.add_argument("--seed", type=int, help="seed of the validation draw and the training order")
    p.add_argument("--force", action="store_true", help="rebuild even when the outputs are fresh")
    return p.parse_args(argv)


def parse_added(spec: str) -> Source:
    """``NAME=KIND:PATH`` as a training source."""
    name, _, rest = spec.partition("=")
    kind, _, path = rest.partition(":")
    if not name or kind not in KINDS or not path:
        raise ValueError(f"--add {spec!r}: expected NAME=KIND:PATH with KIND one of {', '.join(KINDS)}")
    return Source(name, kind, path)


def parse_repeat(spec: str, known: set[str]) -> tuple[str, int]:
    """``NAME=K`` as (source name, how many times its training pairs are written)."""
    name, _, times = spec.partition("=")
    if name not in known:
        raise ValueError(f"--repeat {spec!r}: unknown source {name!r} (known: {', '.join(sorted(known))})")
    if not times.isdigit() or int(times) < 1:
        raise ValueError(f"--repeat {spec!r}: expected NAME=K with K a whole number ≥ 1")
    return name, int(times)


def make_config(args: argparse.Namespace) -> DataConfig:
    config = DataConfig()
    overrides = {
        "corpus_dir": args.corpus_dir,
        "out_dir": args.out_dir,
        "valid_size": args.valid_size,
        "classical_valid_size": args.classical_valid_size,
        "vocab_from": args.vocab_from,
        "max_lowers_per_upper": args.max_lowers,
        "min_char_count": args.min_char_count,
        "seed": args.seed,
    }
    config = dataclasses.replace(config, **{k: v for k, v in overrides.items() if v is not None})
    added = tuple(parse_added(spec) for spec in args.add)
    for spec, source in zip(args.add, added, strict=True):
        if config.corpus_dir.is_dir() and not source_files(config, source):
            raise ValueError(f"--add {spec!r}: no file matches {source.path!r} in {config.corpus_dir}")
    config.sources = config.sources + added
    known = {s.name for s in config.sources}
    wanted = set(args.sources.split(",")) if args.sources else known
    excluded = {n for n in args.exclude.split(",") if n}
    unknown = sorted((wanted | excluded) - known)
    if unknown:
        raise ValueError(f"unknown source(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    config.repeat = dict(parse_repeat(spec, known) for spec in args.repeat)
    for spec in args.register:
        name, _, register = spec.partition("=")
        if name not in known:
            raise ValueError(
                f"--register {spec!r}: unknown source {name!r} (known: {', '.join(sorted(known))})"
            )
        config.registers[name] = register
    if args.valid_from:
        valid_from = tuple(n for n in args.valid_from.split(",") if n)
        if not set(valid_from) <= known:
            raise ValueError(
                f"--valid-from {args.valid_from!r}: unknown source (known: {', '.join(sorted(known))})"
            )
        config.valid_sources = valid_from
    if config.vocab_from is not None and not config.vocab_from.is_file():
        raise ValueError(f"--vocab-from {config.vocab_from}: no such file")
    if args.no_formal:
        config.formal_file = ""
    if args.no_near_dup:
        config.near_dup = False
    config.sources = tuple(s for s in config.sources if s.name in wanted - excluded)
    config.validate()
    return config


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = make_config(args)
        if not config.corpus_dir.is_dir():
            raise ValueError(f"corpus folder {config.corpus_dir} does not exist (set DUILIAN_CORPUS_DIR)")
        if not args.force and is_fresh(config):
            print(f"data: {config.out_dir} is up to date (use --force to rebuild)")
            return 0
        report = run(config)
    except (ValueError, OSError, EOFError) as exc:  # EOFError: a truncated .gz
        print(f"data: error: {exc}", file=sys.stderr)
        return 2
    sp = report["split"]
    print(
        f"data: train {sp['train']}, valid {sp['valid']}, test {sp['test']} "
        f"(leak-free {sp['test_leakfree']}), vocabulary {report['vocab']['size']}, "
        f"{report['seconds']['total']:.1f} s → {config.out_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
