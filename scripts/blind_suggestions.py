"""The line files of the blind judgement of the check's suggestions (issue 42, docs/MEASUREMENTS.md):
the shipped model's own lower lines that have a weak place, against the same lines with the first
suggestion applied.

    python scripts/blind_suggestions.py --lines work/blind/lines_three.tsv --n 60 --out work/blind/suggest
    python -m model.blind sheet --lines work/blind/suggest/lines.tsv --seed 42 \\
        --system mended=file:work/blind/suggest/mended.tsv \\
        --system machine=file:work/blind/suggest/machine.tsv --out work/blind/suggest_sheet

Reads ``upper<TAB>reference<TAB>group`` lines (scripts/blind_lines.py's), in order, taking the
groups in turn; for each upper line the model's first candidate (as the site gives it) is checked
(``duilian.check.check_with``) with its suggestions (``LoadedModel.suggestions``). A line is kept
when a place has a replacement: the first place's first replacement is applied. Writes
``lines.tsv`` (the kept lines as read), ``machine.tsv`` and ``mended.tsv`` (``upper<TAB>lower``,
in the same order), and ``places.tsv`` (what was mended where, for after the verdict).
"""

from __future__ import annotations

import argparse
from itertools import zip_longest
from pathlib import Path

from data.paths import default_model_dir, graph_cache_dir
from duilian.check import check_with
from duilian.engine import Engine, set_decode_threads
from duilian.inputs import make_query
from duilian.service import LoadedModel
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from model.decoding.plan import ConstraintError


def read_lines(path: Path) -> list[list[str]]:
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_group: dict[str, list[list[str]]] = {}
    for row in rows:
        by_group.setdefault(row[2] if len(row) > 2 else "", []).append(row)
    return [row for turn in zip_longest(*by_group.values()) for row in turn if row is not None]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lines", type=Path, required=True)
    p.add_argument("--n", type=int, default=50)
    p.add_argument("--model", type=Path, default=None, help="a bundle (default: models/default)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    set_decode_threads(1)
    folder = args.model or default_model_dir()
    model = LoadedModel.load(folder, engine=Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir()))
    kept: list[tuple[list[str], str, str, str]] = []
    read = 0
    for row in read_lines(args.lines):
        read += 1
        upper = row[0]
        try:
            lower = model.answer(make_query(upper, n=1)).candidates[0].text
        except (ConstraintError, ValueError, IndexError):
            continue
        report = check_with(model, upper, lower, "modern")
        items = [i for i in model.suggestions(report).items if i.replacements]
        if not items:
            continue
        first = items[0].replacements[0]
        kept.append((row, lower, first.text, f"{items[0].position}\t{items[0].current}->{first.char}"))
        if len(kept) == args.n:
            break
    args.out.mkdir(parents=True, exist_ok=True)
    files: dict[str, list[str]] = {"lines.tsv": [], "machine.tsv": [], "mended.tsv": [], "places.tsv": []}
    for row, lower, mended, place in kept:
        files["lines.tsv"].append("\t".join(row))
        files["machine.tsv"].append(f"{row[0]}\t{lower}")
        files["mended.tsv"].append(f"{row[0]}\t{mended}")
        files["places.tsv"].append(f"{row[0]}\t{row[2] if len(row) > 2 else ''}\t{place}")
    for name, out in files.items():
        (args.out / name).write_text("".join(f"{x}\n" for x in out), encoding="utf-8")
    print(f"{len(kept)} lines with a suggestion of {read} read -> {args.out}")


if __name__ == "__main__":
    main()
