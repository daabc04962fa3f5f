"""``python -m model.rerank``: make a bundle's reranker (model/release/rerank.py says the steps).

python -m model.rerank nbest --bundle B --pairs work/data/train.tsv --out N.jsonl [--limit 15000]
python -m model.rerank train --bundle B --train N.jsonl --valid V.jsonl --out S.pt [--steps 4000]
python -m model.rerank weights --bundle B --trained S.pt --valid V.jsonl
python -m model.rerank add --bundle B --trained S.pt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from data.paths import default_model_dir, graph_cache_dir
from model.decoding.reranking import DEFAULT_WEIGHT, Reranker
from model.export.engines import reranker_of
from model.export.scorer import add_scorer, model_embedding, trained_scorer
from model.release.rerank import (
    chosen_weight,
    read_nbest,
    read_pairs,
    sample,
    served_decoder,
    weight_table,
    write_nbest,
)
from model.spec.config import ModelConfig
from model.store.bundle import load_bundle, model_config
from model.store.layout import BundleError
from model.training.rerank import ScorerTraining, read_groups, scorer_config, train_scorer


def _nbest(args: argparse.Namespace) -> int:
    rows = read_pairs(Path(args.pairs))
    if args.limit:
        rows = sample(rows, args.limit, args.seed)
    bundle = load_bundle(args.bundle)
    n = write_nbest(served_decoder(bundle), rows, Path(args.out))
    print(f"{args.out}: {n} groups written")
    return 0


def _train(args: argparse.Namespace) -> int:
    bundle = load_bundle(args.bundle)
    cfg: ModelConfig = scorer_config(model_config(bundle.path, "model"), layers=args.layers)
    spec = ScorerTraining(steps=args.steps, threads=args.threads)
    best = train_scorer(
        cfg,
        model_embedding(bundle.path),
        bundle.vocab,
        read_groups(Path(args.train)),
        read_groups(Path(args.valid)),
        Path(args.out),
        spec,
        log=lambda line: print(line, flush=True),
    )
    print(f"{args.out}: best validation {best}")
    return 0


def _scorer_of(args: argparse.Namespace) -> Reranker:
    bundle = load_bundle(args.bundle)
    return reranker_of(trained_scorer(bundle.path, Path(args.trained)), bundle.vocab, graph_cache_dir())


def _weights(args: argparse.Namespace) -> int:
    table = weight_table(_scorer_of(args), read_nbest(Path(args.valid)))
    for row in table:
        print(json.dumps(row, ensure_ascii=False))
    print(f"chosen weight (agreement within 1% of no reranking): {chosen_weight(table)}")
    return 0


def _add(args: argparse.Namespace) -> int:
    path = add_scorer(args.bundle, args.trained, args.dtype, record={"weight": args.weight})
    print(f"{path}: the reranker's scorer, added")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m model.rerank",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("nbest", help="the bundle's 10-best for upper lines of a pairs file")
    a.add_argument("--pairs", required=True, help="upper<TAB>lower[<TAB>register] lines")
    a.add_argument("--out", required=True)
    a.add_argument("--limit", type=int, default=0, help="a sample of this many by register (0: all)")
    a.add_argument("--seed", type=int, default=1)
    a = sub.add_parser("train", help="train a scorer on n-best files")
    a.add_argument("--train", required=True)
    a.add_argument("--valid", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--steps", type=int, default=4000)
    a.add_argument("--layers", type=int, default=1)
    a.add_argument("--threads", type=int, default=1)
    a = sub.add_parser("weights", help="the reranked top line's agreement with the human line, by weight")
    a.add_argument("--trained", required=True)
    a.add_argument("--valid", required=True)
    a = sub.add_parser("add", help="put a trained scorer into the bundle")
    a.add_argument("--trained", required=True)
    a.add_argument("--dtype", choices=("float16", "int8"), default="float16")
    a.add_argument(
        "--weight",
        type=float,
        default=DEFAULT_WEIGHT,
        help=f"its weight in a candidate's rank, as `weights` chose it (default {DEFAULT_WEIGHT})",
    )
    for a in sub.choices.values():
        a.add_argument(
            "--bundle", default=str(default_model_dir()), help="the bundle (default: models/default)"
        )
    args = p.parse_args(argv)
    run = {"nbest": _nbest, "train": _train, "weights": _weights, "add": _add}[args.cmd]
    try:
        return run(args)
    except (FileNotFoundError, ValueError, BundleError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
