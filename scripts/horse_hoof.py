"""How often couplets of two or more clauses keep 马蹄韵 (data.rules.horse_hoof), in the wb14123
test pairs and the formal couplets (docs/COUPLET_RULES.md gives the figures):

    python scripts/horse_hoof.py [corpus dir, default ../shared/data]

Per file and tone mode: the pairs whose upper line has two or more clauses (data.rules.clause_ends)
and the same count in the lower line; of those, the share whose couplet keeps it (both lines), whose
upper line keeps it, whose lower line keeps it, among those judged (no clause end of unknown tone),
and where the upper line keeps it (where the search holds the lower line to it,
model.decoding.plan.hoof_wants), the share whose lower line keeps it too.
"""

import sys
from pathlib import Path

from data.paths import corpus_dir
from data.rules import clause_ends, hoof_ends, horse_hoof, verdict
from data.tones import line_tones

FILES = ("wb14123_test.tsv", "yinglian_classic.tsv")


def share(values: list[bool | None]) -> str:
    judged = [v for v in values if v is not None]
    kept = sum(judged)
    return f"{kept}/{len(judged)} = {kept / len(judged):.1%}" if judged else "-"


def measure(path: Path, mode: str) -> None:
    pairs = [line.split("\t")[:2] for line in path.read_text(encoding="utf-8").splitlines() if "\t" in line]
    multi = [
        (u, w) for u, w in pairs if len(clause_ends(u)) >= 2 and len(clause_ends(u)) == len(clause_ends(w))
    ]
    couplet, upper, lower = [], [], []
    for u, w in multi:
        ut, lt = line_tones(u, mode), line_tones(w, mode)
        couplet.append(horse_hoof(ut, lt, u, w))
        upper.append(verdict(k for _, _, k in hoof_ends(ut, u)))
        lower.append(verdict(k for _, _, k in hoof_ends(lt, w, lower=True)))
    counts = {n: sum(len(clause_ends(u)) == n for u, _ in multi) for n in (2, 3, 4)}
    more = len(multi) - sum(counts.values())
    print(f"{path.name} [{mode}]: {len(pairs)} pairs, {len(multi)} of two or more clauses")
    print(f"  by clauses: 2: {counts[2]}, 3: {counts[3]}, 4: {counts[4]}, more: {more}")
    print(f"  couplet keeps it: {share(couplet)}; upper line: {share(upper)}; lower line: {share(lower)}")
    by_n = {n: [v for (u, _), v in zip(multi, couplet, strict=True) if min(len(clause_ends(u)), 5) == n]
            for n in (2, 3, 4, 5)}  # fmt: skip
    print(
        "  couplet keeps it, by clauses (5: five or more): "
        + "; ".join(f"{n}: {share(v)}" for n, v in by_n.items())
    )
    mirrored = [w for u, w in zip(upper, lower, strict=True) if u is True]
    print(f"  lower line keeps it where the upper line does (what the search holds to): {share(mirrored)}")
    print(f"  not judged (a clause end of unknown tone): {sum(v is None for v in couplet)}")


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else corpus_dir()
    for name in FILES:
        for mode in ("modern", "classical"):
            measure(folder / name, mode)
