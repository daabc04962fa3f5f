"""A blind-judging sheet for 藏头 composing: our top couplet against a person's, same heads, same shape.

    python -m bench.compose_eval            # → work/blind/compose/sheet/{sheet.tsv,RUBRIC.md}, .../key.json

For each of ``--per-source`` (25) couplets drawn (seeded) from each held-out file of the data stage
(``--formal``: test_formal.tsv, formal couplets; ``--leakfree``: test_leakfree.tsv, wb14123's
leak-free test part), the head is the first characters of its two lines and the pattern its
clause lengths; ``duilian.compose`` writes our top couplet for them (``n=1``, seed 0). A drawn
couplet whose head or shape cannot be asked (not Han, the same character twice, a clause
outside 2-16 characters, more than 4 clauses) or for which nothing is composed (no seed of that
shape) is replaced by the next draw; the key counts them.

The sheet is the project's blind format (model/release/blind.py: ``make_sheet``, the same
header, so ``python -m model.blind unblind --sheet .../sheet.tsv --key .../key.json`` reads it
once judged): the 上联 column holds the request (藏头 and 字数) and A and B are whole couplets
written ``上联｜下联``, ours with ``，`` between its clauses (composing uses that mark only), without
the 横批 (a person's couplet has none, so it would give ours away). The key, outside the sheet's
folder, says which is which and holds every row's request, both couplets and our 横批.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

from data.paths import default_model_dir, graph_cache_dir, work_dir
from data.text import clauses, is_han
from duilian.compose import compose, make_compose_request
from duilian.engine import Engine
from duilian.inputs import InputError
from duilian.service import LoadedModel
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from model.decoding.plan import ConstraintError
from model.release.blind import Line, make_sheet, write_tsv

SYSTEMS = ("compose", "human")
RUBRIC = """# How to judge (评分说明): 藏头 couplets

Each row of `sheet.tsv` gives a request in the 上联 column: two head characters (藏头) and the
length of each line (字数; "4,7" is a clause of 4 and one of 7). The upper line of each couplet
must begin with the first head character and the lower line with the second. A and B are two
whole couplets for it, written `上联｜下联`, in random order: neither is known to be a machine's or a
person's (the punctuation between clauses may differ; ignore it). Fill in three columns:

- `better`: `A`, `B` or `tie` — which is the better couplet. Say `tie` only when neither is.
- `score_A`, `score_B`: each couplet on its own merits:
  - `0` = not acceptable (不可接受): broken, meaningless, or the two lines do not answer each other;
  - `1` = passable (尚可): a correct couplet, but flat, generic or loosely parallel;
  - `2` = good (佳): a couplet a couplet lover would keep: parallel word for word, coherent, apt.

Judge parallelism (对仗), coherence, aptness and tone (平仄). Do not guess which is whose. Leave
no row empty; save the sheet as TSV with the same columns.
"""


@dataclass(frozen=True)
class Drawn:
    """A held-out couplet and the request made of it."""

    upper: str
    lower: str
    group: str
    head: str
    pattern: str


def request_of(upper: str, lower: str, group: str) -> Drawn | None:
    """The request a human couplet answers (its heads, its clause lengths), None when it cannot be asked."""
    if not upper or not lower or not is_han(upper[0]) or not is_han(lower[0]) or upper[0] == lower[0]:
        return None
    pattern = ",".join(str(end - start) for start, end in clauses(upper))
    if [e - s for s, e in clauses(lower)] != [int(k) for k in pattern.split(",")]:
        return None
    return Drawn(upper, lower, group, upper[0] + lower[0], pattern)


def read_pairs(path: Path) -> list[tuple[str, str]]:
    rows = [r.split("\t") for r in path.read_text(encoding="utf-8").splitlines() if r.strip()]
    return [(r[0], r[1]) for r in rows if len(r) >= 2]


def shown(upper: str, lower: str) -> str:
    return f"{upper}｜{lower}"


def build(
    model: LoadedModel, sources: list[tuple[str, Path]], per_source: int, seed: int
) -> tuple[list, dict]:
    """(the rows drawn with our couplets, what was skipped by group)."""
    rows, skipped = [], {}
    for group, path in sources:
        pairs = read_pairs(path)
        random.Random(f"{seed}:{group}").shuffle(pairs)
        taken = 0
        skipped[group] = {"cannot_ask": 0, "nothing_composed": 0}
        for upper, lower in pairs:
            if taken == per_source:
                break
            drawn = request_of(upper, lower, group)
            if drawn is None:
                skipped[group]["cannot_ask"] += 1
                continue
            try:
                found = compose(model, make_compose_request(drawn.head, length=drawn.pattern, n=1))
            except InputError:
                skipped[group]["cannot_ask"] += 1
                continue
            except ConstraintError:
                skipped[group]["nothing_composed"] += 1
                continue
            ours = found.couplets[0]
            rows.append((drawn, ours.upper, ours.lower, ours.banner))
            taken += 1
            print(f"compose_eval: {group} {taken}/{per_source} {drawn.head} {drawn.pattern}", file=sys.stderr)
        if taken < per_source:
            raise SystemExit(f"compose_eval: only {taken} of {per_source} couplets from {path}")
    return rows, skipped


def main(argv: list[str] | None = None) -> int:
    data = work_dir() / "data_reg"
    ap = argparse.ArgumentParser(prog="python -m bench.compose_eval", description=__doc__.split("\n\n")[0])
    ap.add_argument("--formal", type=Path, default=data / "test_formal.tsv", help="held-out formal couplets")
    ap.add_argument(
        "--leakfree", type=Path, default=data / "test_leakfree.tsv", help="wb14123 leak-free test"
    )
    ap.add_argument("--per-source", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", type=Path, default=default_model_dir())
    ap.add_argument("--out", type=Path, default=work_dir() / "blind" / "compose")
    args = ap.parse_args(argv)
    model = LoadedModel.load(
        args.model, None, Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir()), warm=False, lazy=True
    )
    sources = [("formal", args.formal), ("wb14123", args.leakfree)]
    rows, skipped = build(model, sources, args.per_source, args.seed)
    lines = [Line(f"藏头 {d.head}　字数 {d.pattern}", shown(d.upper, d.lower), d.group) for d, *_ in rows]
    ours = [shown(u, lo) for _, u, lo, _ in rows]
    humans = [line.reference for line in lines]
    sheet, key = make_sheet(lines, list(SYSTEMS), [ours, humans], args.seed)
    key["kind"] = "compose"
    key["model"] = str(args.model)
    key["model_version"] = model.version
    key["sources"] = {g: str(p) for g, p in sources}
    key["skipped"] = skipped
    key["requests"] = [
        {"line": i, "group": d.group, "head": d.head, "pattern": d.pattern, "human": shown(d.upper, d.lower),
         "compose": shown(u, lo), "banner": banner}
        for i, (d, u, lo, banner) in enumerate(rows)
    ]  # fmt: skip
    folder = args.out / "sheet"
    folder.mkdir(parents=True, exist_ok=True)
    write_tsv(folder / "sheet.tsv", sheet)
    (folder / "RUBRIC.md").write_text(RUBRIC, encoding="utf-8")
    (args.out / "key.json").write_text(json.dumps(key, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"compose_eval: {len(sheet)} rows → {folder / 'sheet.tsv'}", file=sys.stderr)
    print(f"compose_eval: the key (not for the judges) → {args.out / 'key.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
