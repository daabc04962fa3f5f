"""Long couplets for a blind comparison: whole wb14123 test pairs joined with "，" (the
corpus has no couplet longer than 32 characters), 10 lines each of about 40, 60 and 100
characters, their human lower lines joined the same way, and the served model's top line.

    python scripts/long_blind_lines.py --out work/blind
    python -m model.blind sheet --lines work/blind/lines_long.tsv \\
        --system model=file:work/blind/model_long.tsv --system human=human \\
        --out work/blind/s19_long --seed 1903

Writes ``lines_long.tsv`` (upper, joined human lower, group ``long``) and ``model_long.tsv``
(upper, the model's line) into ``--out``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from data.paths import corpus_dir, default_model_dir, graph_cache_dir
from duilian.engine import Engine
from duilian.inputs import Query
from duilian.service import LoadedModel
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME

TARGETS = (40, 60, 100)


def joined(rows: list[tuple[str, str]], per_target: int) -> list[tuple[str, str]]:
    """Pairs joined in order until the next would pass each target length."""
    out, i = [], 0
    for target in TARGETS:
        for _ in range(per_target):
            up: list[str] = []
            low: list[str] = []
            while i < len(rows):
                u, w = rows[i]
                i += 1
                if len("，".join([*up, u])) > target:
                    break
                up.append(u)
                low.append(w)
            out.append(("，".join(up), "，".join(low)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--test", type=Path, default=corpus_dir() / "wb14123_test.tsv")
    p.add_argument("--model", type=Path, default=default_model_dir())
    p.add_argument("--per-length", type=int, default=10)
    p.add_argument("--seed", type=int, default=19)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    rows = [tuple(line.split("\t")[:2]) for line in args.test.read_text(encoding="utf-8").splitlines()]
    pairs = [(u, w) for u, w in rows if "，" not in u and "，" not in w and len(u) == len(w)]
    random.Random(args.seed).shuffle(pairs)
    lines = joined(pairs, args.per_length)
    model = LoadedModel.load(args.model, engine=Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir()))
    tops = [model.answer(Query(u, 5), banners=False).candidates[0].text for u, _ in lines]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "lines_long.tsv").write_text("".join(f"{u}\t{w}\tlong\n" for u, w in lines), "utf-8")
    (args.out / "model_long.tsv").write_text(
        "".join(f"{u}\t{t}\n" for (u, _), t in zip(lines, tops, strict=True)), "utf-8"
    )
    print(f"{len(lines)} lines of {min(len(u) for u, _ in lines)}-{max(len(u) for u, _ in lines)} characters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
