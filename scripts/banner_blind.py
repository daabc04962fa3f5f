"""A blind check of the 横批 ranking (issue 27, item 1).

``sheet``: for N couplets of a pairs file, the ranker's first 横批 and a control (the first
横批 of another couplet of the sheet, drawn at random), in random order, as X and Y; the key
(which is which) goes to a file outside the sheet's folder. The judge rates each: good, passable
or no (fits the couplet's theme). ``unblind``: the shares of each rating for the ranked and the
control 横批, with 95% Wilson intervals.

    python scripts/banner_blind.py sheet --pairs P.tsv --banners models/default/banners.npz --n 100 --out DIR
    python scripts/banner_blind.py unblind --sheet DIR/sheet.tsv --key DIR.key.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from data.banners import BannerTable
from model.release.blind import wilson

RUBRIC = """# How to judge (横批评分说明)

Each row of `sheet.tsv` gives a couplet (上联, 下联) and two four-character horizontal scrolls
(横批), X and Y. Rate each on its own: does it fit the couplet's theme, as a 横批 pasted above
this couplet would? Fill `X` and `Y` with one of:

- `good`: fits the theme well; a person would choose it for this couplet;
- `passable`: not wrong for the couplet, but generic or only loosely related;
- `no`: does not fit (another theme, or meaningless here).

Leave no cell empty; save the sheet as TSV with the same columns.
"""


def cmd_sheet(args: argparse.Namespace) -> int:
    rows = [r.split("\t")[:2] for r in Path(args.pairs).read_text(encoding="utf-8").splitlines() if "\t" in r]
    rng = random.Random(args.seed)
    rng.shuffle(rows)
    table = BannerTable.load(Path(args.banners))
    picked: list[tuple[str, str, str]] = []
    for upper, lower in rows:
        top = table.rank(upper, lower, n=1)
        if top:
            picked.append((upper, lower, top[0][0]))
        if len(picked) == args.n:
            break
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    key, lines = [], ["id\t上联\t下联\t横批X\t横批Y\tX\tY"]
    for i, (upper, lower, ranked) in enumerate(picked):
        others = [p[2] for j, p in enumerate(picked) if j != i and p[2] != ranked]
        control = rng.choice(others)
        x_is_ranked = rng.random() < 0.5
        x, y = (ranked, control) if x_is_ranked else (control, ranked)
        lines.append(f"{i + 1}\t{upper}\t{lower}\t{x}\t{y}\t\t")
        key.append({"id": i + 1, "X": "ranked" if x_is_ranked else "control"})
    (out / "sheet.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "RUBRIC.md").write_text(RUBRIC, encoding="utf-8")
    key_path = Path(str(out).rstrip("/") + ".key.json")
    key_path.write_text(json.dumps({"seed": args.seed, "rows": key}, indent=1), encoding="utf-8")
    print(f"{len(picked)} rows -> {out / 'sheet.tsv'}; key -> {key_path}")
    return 0


def cmd_unblind(args: argparse.Namespace) -> int:
    key = {r["id"]: r["X"] for r in json.loads(Path(args.key).read_text(encoding="utf-8"))["rows"]}
    ratings = ("good", "passable", "no")
    counts: dict[str, dict[str, int]] = {s: dict.fromkeys(ratings, 0) for s in ("ranked", "control")}
    for n, line in enumerate(Path(args.sheet).read_text(encoding="utf-8").splitlines()[1:], 2):
        cells = line.split("\t")
        if len(cells) < 7 or cells[5].strip() not in ratings or cells[6].strip() not in ratings:
            print(f"{args.sheet}, row {n}: X and Y must be good, passable or no", file=sys.stderr)
            return 1
        x_sys = key[int(cells[0])]
        y_sys = "control" if x_sys == "ranked" else "ranked"
        counts[x_sys][cells[5].strip()] += 1
        counts[y_sys][cells[6].strip()] += 1
    result: dict[str, dict[str, dict]] = {}
    for system, c in counts.items():
        total = sum(c.values())
        result[system] = {}
        for rating, k in c.items():
            low, high = wilson(k, total)
            share = round(k / total, 3)
            result[system][rating] = {"count": k, "share": share, "ci95": [round(low, 3), round(high, 3)]}
    print(json.dumps(result, ensure_ascii=False, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sheet")
    s.add_argument("--pairs", required=True)
    s.add_argument("--banners", required=True)
    s.add_argument("--n", type=int, default=100)
    s.add_argument("--seed", type=int, default=27)
    s.add_argument("--out", required=True)
    u = sub.add_parser("unblind")
    u.add_argument("--sheet", required=True)
    u.add_argument("--key", required=True)
    u.add_argument("--out")
    args = parser.parse_args(argv)
    return cmd_sheet(args) if args.cmd == "sheet" else cmd_unblind(args)


if __name__ == "__main__":
    raise SystemExit(main())
