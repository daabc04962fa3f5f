"""How well a 横批 table's ranking follows a couplet's theme, on the wb14123 test pairs (docs/DATA.md).

    python scripts/banner_eval.py [--table models/default/banners.npz] [--test PATH]

No couplet in the corpora comes with its 横批, so the measure is a stand-in: in every test
line with two or more clauses, a four-character clause that is in the phrase list is held
out, and the phrases are ranked for the rest of the couplet (the line's other clauses and
the other line). Reported per scoring: the held-out clause's recall in the top 5, its mean
reciprocal rank and its median rank among all phrases; and how often the clause fits its own
couplet better than a random other couplet of the set (0.5 = no theme signal). The test
pairs are not in the table's sources (python -m data.build_banners leaves out the test upper lines).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np

from data.banners import BANNERS_FILE, BannerTable, clauses
from data.normalize import Normalizer
from data.paths import corpus_dir, default_model_dir


def held_out(table: BannerTable, lines: list[str]) -> list[tuple[str, str]]:
    known = set(table.phrases)
    norm = Normalizer()
    cases = []
    for line in lines:
        upper, lower = norm.normalize_many(line.split("\t")[:2])
        for side, other in ((upper, lower), (lower, upper)):
            parts = clauses(side)
            for part in parts if len(parts) > 1 else []:
                if len(part) == 4 and part in known:
                    cases.append((part, "".join(p for p in parts if p != part) + other))
    return cases


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--table", type=Path, default=default_model_dir() / BANNERS_FILE)
    p.add_argument("--test", type=Path, default=corpus_dir() / "wb14123_test.tsv")
    args = p.parse_args()
    table = BannerTable.load(args.table)
    cases = held_out(table, args.test.read_text(encoding="utf-8").splitlines())
    index = {phrase: i for i, phrase in enumerate(table.phrases)}
    rng = np.random.default_rng(0)
    vectors, prior = table.phrase_vectors, table.phrase_prior
    assert vectors is not None
    scorings: dict[str, Callable[[str], np.ndarray]] = {
        "random": lambda _: rng.random(len(table.phrases)),
        "frequency only": lambda _: prior + 1e-9 * rng.random(len(table.phrases)),
        **{
            f"theme cosine + {w} x prior": (lambda rest, w=w: vectors @ table.theme(rest) + w * prior)
            for w in (0.0, 0.1, 0.2, 0.4)
        },
    }
    print(f"{len(cases)} held-out clauses, {len(table.phrases)} phrases")
    print("| scoring | recall@5 | MRR | median rank |\n|---|---|---|---|")
    for name, score in scorings.items():
        ranks = []
        for phrase, rest in cases:
            s = score(rest)
            ranks.append(int((s > s[index[phrase]]).sum()) + 1)
        r = np.array(ranks)
        print(f"| {name} | {np.mean(r <= 5):.3f} | {np.mean(1 / r):.4f} | {int(np.median(r))} |")
    others = rng.integers(len(cases), size=len(cases))
    wins = sum(
        float(vectors[index[c]] @ table.theme(rest)) > float(vectors[index[c]] @ table.theme(cases[o][1]))
        for (c, rest), o in zip(cases, others, strict=True)
    )
    print(f"own couplet fits better than a random one: {wins / len(cases):.3f}")


if __name__ == "__main__":
    main()
