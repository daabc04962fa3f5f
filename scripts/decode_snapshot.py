"""Decode test lines with a bundle through the served path and write the candidates as JSON.

The server's settings (its int8 and runtime defaults, the bundle's proposer, every rule on,
the sensitive-word filter, its oversampling); lines of one length are answered in batches
of ``max_batch`` as the server's batcher groups them. Run it before and after a change to
the decoder and compare the two files: a refactor must give identical candidates.

    python scripts/decode_snapshot.py --limit 500 --out /tmp/before.json
    python scripts/decode_snapshot.py --limit 500 --out /tmp/after.json --compare /tmp/before.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from data.paths import corpus_dir, default_model_dir
from duilian.engine import Engine
from duilian.inputs import Query
from duilian.service import LoadedModel
from serve.settings import Settings

# (name, query fields): the plain request and the modes that take other search paths
MODES: list[tuple[str, dict[str, Any]]] = [
    ("plain", {}),
    ("fast", {"fast": True}),
    ("diverse", {"diverse": True}),
    ("required", {"required_chars": "春"}),
]


def answers(model: LoadedModel, uppers: list[str], fields: dict[str, Any], settings: Settings) -> list[Any]:
    by_length: dict[int, list[int]] = defaultdict(list)
    for i, upper in enumerate(uppers):
        by_length[len(upper)].append(i)
    out: list[Any] = [None] * len(uppers)
    for rows in by_length.values():
        for start in range(0, len(rows), settings.max_batch):
            chunk = rows[start : start + settings.max_batch]
            queries = [Query(uppers[i], 10, **fields) for i in chunk]
            for i, answer in zip(chunk, model.answer_batch(queries, settings.oversample), strict=True):
                if isinstance(answer, Exception):
                    out[i] = {"error": f"{type(answer).__name__}: {answer}"}
                else:
                    out[i] = [[c.text, c.score, c.rank_score, c.report.as_dict()] for c in answer.candidates]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=default_model_dir())
    p.add_argument("--test", type=Path, default=corpus_dir() / "wb14123_test.tsv")
    p.add_argument("--limit", type=int, default=500)
    p.add_argument("--modes", default=",".join(name for name, _ in MODES))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--compare", type=Path, help="an earlier output: exit 1 unless identical")
    args = p.parse_args(argv)
    settings = Settings()
    lines = args.test.read_text(encoding="utf-8").splitlines()[: args.limit]
    uppers = [line.split("\t")[0] for line in lines]
    model = LoadedModel.load(args.model, engine=Engine(settings.int8, settings.runtime, settings.graph_cache))
    wanted = args.modes.split(",")
    result = {name: answers(model, uppers, fields, settings) for name, fields in MODES if name in wanted}
    args.out.write_text(json.dumps({"uppers": uppers, **result}, ensure_ascii=False, indent=0), "utf-8")
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text(encoding="utf-8"))
    after = json.loads(args.out.read_text(encoding="utf-8"))
    differ = [(m, i) for m in result for i in range(len(uppers)) if before[m][i] != after[m][i]]
    for m, i in differ[:20]:
        print(f"{m} line {i} {uppers[i]}: {before[m][i]} != {after[m][i]}")
    print(f"{len(differ)} of {len(uppers) * len(result)} answers differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
