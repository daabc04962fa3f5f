"""The line files of the blind comparisons (docs/blind/README.md, docs/TRAINING.md).

    python scripts/blind_lines.py --data-dir work/data --out work/blind [--seed 16] [--n 100] [--formal 120]

Writes ``lines_classical.tsv``: n upper lines of ``valid_classical.tsv`` (the first pair of
each) whose upper line is not an upper line of ``poetry_lvshi`` or ``classical_duiyun`` (which
the shipped model trained on), and ``lines_wb14123.tsv``: n leak-free wb14123 test lines
(normalised, the first pair of each upper line); both ``upper<TAB>reference<TAB>group``.
With ``--formal N`` (issue 39's three parts) also ``lines_formal.tsv``: N lines of the formal
test part ``test_formal.tsv`` of at most 32 characters (the first pair of each upper line),
and ``lines_three.tsv``, the three files in one, for one sheet judged by part.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from data.normalize import Normalizer
from data.paths import corpus_dir
from data.sources import read_tsv


def first_pairs(pairs: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for upper, lower in pairs:
        out.setdefault(upper, lower)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", type=Path, default=Path("work/data"))
    p.add_argument("--out", type=Path, default=Path("work/blind"))
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--formal", type=int, default=0, help="also N lines of the formal test part")
    args = p.parse_args()
    norm = Normalizer()
    seen: set[str] = set()
    for name in ("poetry_lvshi.tsv.gz", "classical_duiyun.tsv"):
        seen.update(norm.normalize_many([pair[0] for pair in read_tsv(corpus_dir() / name) if pair]))
    classical = first_pairs([p for p in read_tsv(args.data_dir / "valid_classical.tsv") if p])
    fresh = [(u, lo) for u, lo in classical.items() if u not in seen]
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    picked = rng.sample(fresh, args.n)
    text = "".join(f"{u}\t{lo}\tclassical\n" for u, lo in picked)
    (args.out / "lines_classical.tsv").write_text(text, encoding="utf-8")
    test = [p for p in read_tsv(args.data_dir / "test_leakfree.tsv") if p and p[0] and p[1]]
    wb: dict[str, str] = {}
    for upper, lower in test:
        wb.setdefault(norm.normalize_many([upper])[0], norm.normalize_many([lower])[0])
    picked = rng.sample(sorted(wb.items()), args.n)
    text = "".join(f"{u}\t{lo}\twb14123\n" for u, lo in picked)
    (args.out / "lines_wb14123.tsv").write_text(text, encoding="utf-8")
    print(f"{len(fresh)} classical candidates, {len(wb)} wb14123 candidates → {args.out}")
    if args.formal:
        formal = first_pairs([p for p in read_tsv(args.data_dir / "test_formal.tsv") if p])
        short = sorted((u, lo) for u, lo in formal.items() if len(u) <= 32)
        picked = random.Random(args.seed).sample(short, args.formal)
        text = "".join(f"{u}\t{lo}\tformal\n" for u, lo in picked)
        (args.out / "lines_formal.tsv").write_text(text, encoding="utf-8")
        parts = ("formal", "classical", "wb14123")
        whole = "".join((args.out / f"lines_{name}.tsv").read_text(encoding="utf-8") for name in parts)
        (args.out / "lines_three.tsv").write_text(whole, encoding="utf-8")
        print(f"{len(short)} formal candidates of at most 32 characters → {args.out / 'lines_three.tsv'}")


if __name__ == "__main__":
    main()
