"""Blind pairwise comparison of two systems' lower lines: a sheet to judge, then the verdict.

    python -m model.blind sheet --lines FILE --system new=work/train/x/bundle --system old=models/default \\
        --out work/blind/new_vs_old
    python -m model.blind unblind --sheet work/blind/new_vs_old/sheet.tsv --key work/blind/new_vs_old.key.json

``--lines`` is a TSV of ``upper<TAB>reference[<TAB>group]`` (a validation file works as it
is: its second column is the human line; a third column, e.g. ``classical`` or
``wb14123``, splits the verdict by group; ``--group NAME`` labels a file that has none).
A system is ``NAME=SPEC``: a bundle folder or checkpoint (its top candidate under every
rule, decoded as ``make eval`` decodes; a model with registers writes a group named after one
of its registers, ``formal`` or ``classical``, in that register, the rest in ``general``),
``human`` (the reference column) or ``file:PATH`` (a TSV of ``upper<TAB>lower``, one line per
line of ``--lines``, in order).

``sheet`` writes ``sheet.tsv`` (id, 上联, A, B and three columns to fill: better = A, B
or tie; score_A, score_B = 0, 1 or 2) and ``RUBRIC.md`` into ``--out``, and the key (which
system is A on each row, the groups) to ``--key`` (default ``<out>.key.json``, beside the
folder, not in it): hand a judge the folder, never the key. Each row's order is drawn at
random (seeded), and so is the order of the rows.

With ``--reverse`` (下联求上联) the lines given are lower lines and the systems write upper lines:
``--lines`` is ``lower<TAB>reference upper[<TAB>group]``, a bundle decodes with its reverse
model, and the sheet and its rubric name the lines so (column 下联, candidates 上联).

``unblind`` reads the filled sheet and the key and reports, per group and overall: wins,
ties and losses, the first system's share of the decided pairs with a 95% Wilson interval
and a two-sided sign-test p-value, and for each system the share of lines scored good (2),
at least passable (>= 1) and the mean score, with 95% bootstrap intervals over the rows.
docs/TRAINING.md ("Blind comparisons") says how to judge with a spreadsheet.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from data.text import REGISTERS
from model.decoding.options import DecodeOptions
from model.release.eval_decode import bundle_reranker_at, load_keyed, make_decoder

HEADER = ("id", "上联", "A", "B", "better", "score_A", "score_B")
BETTER = {"a": "A", "b": "B", "tie": "tie", "=": "tie", "t": "tie", "平": "tie", "同": "tie"}
SCORES = ("0", "1", "2")
BOOTSTRAP = 2000

RUBRIC = """# How to judge (评分说明)

Each row of `sheet.tsv` gives an upper line (上联) and two candidate lower lines (下联), A and B,
in random order: neither is known to be a machine's or a person's. Read both as a careful
reader of couplets would and fill in three columns:

- `better`: `A`, `B` or `tie` — which lower line makes the better couplet with the upper line.
  Say `tie` only when neither is better.
- `score_A`, `score_B`: each lower line on its own merits with the upper line:
  - `0` = not acceptable (不可接受): broken, meaningless, or not a reply to the upper line;
  - `1` = passable (尚可): a correct reply, but flat, generic or loosely parallel;
  - `2` = good (佳): a couplet a couplet lover would keep: parallel word for word, coherent, apt.

Judge parallelism (对仗: part of speech and meaning word for word), coherence (the line says
something), aptness (it answers the upper line's theme and register) and tone (平仄); both
lines already have the upper line's length and punctuation. Do not guess which line is whose.
Leave no row empty; save the sheet as TSV with the same columns.
"""


def rubric(reverse: bool = False) -> str:
    """The rubric; with ``reverse`` for a sheet of lower lines and candidate upper lines."""
    if not reverse:
        return RUBRIC
    text = RUBRIC
    for a, b in (("上联", "下联"), ("upper line", "lower line")):
        text = b.join(part.replace(b, a) for part in text.split(a))
    return text.replace("an lower line", "a lower line")


def header(reverse: bool = False) -> tuple[str, ...]:
    return (HEADER[0], "下联", *HEADER[2:]) if reverse else HEADER


class BlindError(ValueError):
    """Bad input to the kit: the message says what and where."""


@dataclass(frozen=True)
class Line:
    upper: str
    reference: str
    group: str


def read_lines(path: Path, group: str | None) -> list[Line]:
    """``upper<TAB>reference[<TAB>group]`` lines; ``group`` labels lines without one."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BlindError(f"--lines {path}: cannot be read ({e})") from e
    lines = []
    for n, row in enumerate(text.splitlines(), 1):
        if not row.strip():
            continue
        parts = row.split("\t")
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise BlindError(f"--lines {path}, line {n}: expected upper<TAB>reference[<TAB>group]")
        lines.append(Line(parts[0], parts[1], parts[2] if len(parts) > 2 and parts[2] else group or "all"))
    if not lines:
        raise BlindError(f"--lines {path}: no lines")
    return lines


Lowers = Callable[[list[Line]], list[str]]


def system(spec: str, reverse: bool = False) -> tuple[str, Lowers]:
    """``NAME=SPEC`` -> (name, a function from the lines to this system's lines: lower lines, or
    with ``reverse`` upper lines)."""
    name, _, what = spec.partition("=")
    if not name or not what:
        raise BlindError(f"--system {spec!r}: expected NAME=SPEC (a bundle or checkpoint, human, file:PATH)")
    if what == "human":
        return name, lambda lines: [line.reference for line in lines]
    if what.startswith("file:"):
        return name, lambda lines: from_file(Path(what.removeprefix("file:")), lines)
    path = Path(what)
    if not path.exists():
        raise BlindError(f"--system {spec!r}: no bundle or checkpoint at {path}")
    return name, lambda lines: decoded(path, lines, reverse)


def from_file(path: Path, lines: list[Line]) -> list[str]:
    try:
        rows = [r.split("\t") for r in path.read_text(encoding="utf-8").splitlines() if r.strip()]
    except (OSError, UnicodeDecodeError) as e:
        raise BlindError(f"{path}: cannot be read ({e})") from e
    if len(rows) != len(lines):
        raise BlindError(f"{path}: {len(rows)} lines for {len(lines)} upper lines")
    for n, (row, line) in enumerate(zip(rows, lines, strict=True), 1):
        if len(row) != 2 or row[0] != line.upper:
            raise BlindError(f"{path}, line {n}: expected {line.upper!r}<TAB>lower")
    return [row[1] for row in rows]


def decoded(path: Path, lines: list[Line], reverse: bool = False) -> list[str]:
    """The top candidate of the model at ``path`` for every upper line, every rule on; with
    ``reverse``, of its lower_to_upper model (a bundle's reverse model, or a checkpoint of one)
    for every lower line."""
    try:
        model, vocab, proposer, pairing, keys = load_keyed(path, reverse)
    except ValueError as e:
        raise BlindError(str(e)) from e
    if model.cfg.reverse != reverse:
        want = "a lower_to_upper" if reverse else "an upper_to_lower"
        raise BlindError(f"{path}: not {want} model (--reverse says which direction the sheet is)")
    reranker = None if reverse else bundle_reranker_at(path)  # a bundle's top line as the site gives it
    out = [""] * len(lines)
    for register, chosen in by_register(lines, model.cfg.n_registers).items():
        options = DecodeOptions(register=register)
        decode = make_decoder(
            model.eval(), vocab, options, False, proposer, pairing=pairing, graph_keys=keys, reranker=reranker
        )
        for i, text in zip(chosen, decode([lines[i].upper for i in chosen]), strict=True):
            out[i] = text
    return out


def by_register(lines: list[Line], n_registers: int) -> dict[str, list[int]]:
    """The lines' indices by the register a model with ``n_registers`` writes them in: a group
    named after a register it has (``formal``, ``classical``) in that one, every other line in
    ``general`` (a model without registers writes everything in ``general``)."""
    have = REGISTERS[: max(n_registers, 1)]
    groups: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        groups.setdefault(line.group if line.group in have else "general", []).append(i)
    return groups


def make_sheet(
    lines: list[Line], names: Sequence[str], lowers: Sequence[list[str]], seed: int
) -> tuple[list[list[str]], dict]:
    """(sheet rows, key): row order and each row's A/B order drawn from ``seed``."""
    rng = random.Random(seed)
    order = list(range(len(lines)))
    rng.shuffle(order)
    rows, key_rows = [], []
    for sheet_id, i in enumerate(order, 1):
        first_is_a = rng.random() < 0.5
        pair = (lowers[0][i], lowers[1][i]) if first_is_a else (lowers[1][i], lowers[0][i])
        rows.append([str(sheet_id), lines[i].upper, *pair, "", "", ""])
        key_rows.append(
            {"id": sheet_id, "line": i, "group": lines[i].group, "A": names[0 if first_is_a else 1]}
        )
    key = {"systems": list(names), "seed": seed, "rows": key_rows}
    return rows, key


def write_tsv(path: Path, rows: list[list[str]], reverse: bool = False) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(header(reverse))
        writer.writerows(rows)


@dataclass(frozen=True)
class Judged:
    group: str
    winner: str | None  # a system's name, None for a tie
    scores: dict[str, int]  # system -> 0/1/2


def read_judged(sheet: Path, key: dict) -> list[Judged]:
    """The filled sheet joined with the key; every row must be filled and valid."""
    try:
        with sheet.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(fh, delimiter="\t"))
    except (OSError, UnicodeDecodeError) as e:
        raise BlindError(f"--sheet {sheet}: cannot be read ({e})") from e
    want = header(key.get("direction") == "lower_to_upper")
    if not rows or [c.strip() for c in rows[0][: len(want)]] != list(want):
        raise BlindError(f"--sheet {sheet}: the first row must be the header {' '.join(want)}")
    by_id = {r["id"]: r for r in key["rows"]}
    names = key["systems"]
    judged, seen = [], set()
    for n, row in enumerate(rows[1:], 2):
        if not any(c.strip() for c in row):
            continue
        row = [c.strip() for c in row] + [""] * (len(HEADER) - len(row))
        where = f"--sheet {sheet}, row {n} (id {row[0]})"
        if not row[0].isdigit() or int(row[0]) not in by_id or int(row[0]) in seen:
            raise BlindError(f"{where}: not an id of this key, or a second row with it")
        seen.add(int(row[0]))
        better = BETTER.get(row[4].lower())
        if better is None or row[5] not in SCORES or row[6] not in SCORES:
            raise BlindError(f"{where}: better must be A, B or tie and each score 0, 1 or 2")
        k = by_id[int(row[0])]
        a, b = k["A"], names[1] if k["A"] == names[0] else names[0]
        winner = None if better == "tie" else (a if better == "A" else b)
        judged.append(Judged(k["group"], winner, {a: int(row[5]), b: int(row[6])}))
    missing = sorted(set(by_id) - seen)
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        raise BlindError(f"--sheet {sheet}: {len(missing)} rows of the key are not judged (ids {shown})")
    return judged


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval of a share k/n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def sign_test(k: int, n: int) -> float:
    """Two-sided exact sign test: P(a split at least this uneven) under a fair coin."""
    if n == 0:
        return 1.0
    low = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(low + 1)) / 2**n
    return min(1.0, 2 * tail)


def bootstrap_ci(values: list[float], seed: int, n: int = BOOTSTRAP) -> tuple[float, float]:
    """95% percentile interval of the mean of ``values`` over ``n`` resamples."""
    if not values:
        return (0.0, 0.0)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(n))
    return (means[int(0.025 * n)], means[int(0.975 * n) - 1])


def verdict(judged: list[Judged], names: list[str], seed: int = 0) -> dict:
    """Wins, ties, losses and score shares for ``names[0]`` against ``names[1]``."""
    first, second = names
    wins = sum(j.winner == first for j in judged)
    losses = sum(j.winner == second for j in judged)
    decided = wins + losses
    low, high = wilson(wins, decided)
    out: dict = {
        "rows": len(judged),
        "wins": wins,
        "ties": len(judged) - decided,
        "losses": losses,
        "win_share_of_decided": round(wins / decided, 4) if decided else None,
        "win_share_ci95": [round(low, 4), round(high, 4)],
        "sign_test_p": round(sign_test(wins, decided), 5),
        "scores": {},
    }
    for name in names:
        scores = [j.scores[name] for j in judged]
        figures: dict[str, float | list[float]] = {}
        for label, values in (
            ("good", [float(s == 2) for s in scores]),
            ("passable_or_better", [float(s >= 1) for s in scores]),
            ("mean", [float(s) for s in scores]),
        ):
            mean = sum(values) / len(values) if values else 0.0
            figures[label] = round(mean, 4)
            figures[f"{label}_ci95"] = [round(x, 4) for x in bootstrap_ci(values, seed)]
        out["scores"][name] = figures
    return out


def unblind(judged: list[Judged], key: dict) -> dict:
    names = key["systems"]
    groups = sorted({j.group for j in judged})
    result = {"systems": names, "all": verdict(judged, names)}
    if len(groups) > 1:
        result["groups"] = {g: verdict([j for j in judged if j.group == g], names) for g in groups}
    return result


def p_value(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3g}"


def markdown(result: dict) -> str:
    first, second = result["systems"]
    head = (
        f"| lines | rows | {first} wins / ties / {second} wins | {first}'s share of decided (95% CI) "
        f"| sign test p | {first} good (95% CI) | {second} good (95% CI) |"
    )
    rows = [head, "|---|---|---|---|---|---|---|"]
    parts = [*result.get("groups", {}).items(), ("all", result["all"])]
    for label, v in parts:
        share = v["win_share_of_decided"]
        lo, hi = v["win_share_ci95"]
        goods = []
        for name in (first, second):
            s = v["scores"][name]
            goods.append(f"{s['good']:.0%} ({s['good_ci95'][0]:.0%}-{s['good_ci95'][1]:.0%})")
        shown = "–" if share is None else f"{share:.0%} ({lo:.0%}-{hi:.0%})"
        rows.append(
            f"| {label} | {v['rows']} | {v['wins']} / {v['ties']} / {v['losses']} | {shown} "
            f"| {p_value(v['sign_test_p'])} | {goods[0]} | {goods[1]} |"
        )
    return "\n".join(rows) + "\n"


def cmd_sheet(args: argparse.Namespace) -> int:
    lines = read_lines(args.lines, args.group)
    if args.limit:
        lines = lines[: args.limit]
    if len(args.system) != 2:
        raise BlindError("give exactly two --system NAME=SPEC")
    systems = [system(spec, args.reverse) for spec in args.system]
    names = [name for name, _ in systems]
    if names[0] == names[1]:
        raise BlindError("the two systems need different names")
    key_path = args.key or args.out.with_name(args.out.name + ".key.json")
    if key_path.resolve().is_relative_to(args.out.resolve()):
        raise BlindError(f"--key {key_path}: the key must not be inside the sheet folder {args.out}")
    lowers = []
    for name, lowers_of in systems:
        print(f"blind: lower lines of {name} for {len(lines)} upper lines ...", file=sys.stderr)
        lowers.append(lowers_of(lines))
    rows, key = make_sheet(lines, names, lowers, args.seed)
    if args.reverse:
        key["direction"] = "lower_to_upper"
    args.out.mkdir(parents=True, exist_ok=True)
    write_tsv(args.out / "sheet.tsv", rows, args.reverse)
    (args.out / "RUBRIC.md").write_text(rubric(args.reverse), encoding="utf-8")
    key_path.parent.mkdir(parents=True, exist_ok=True)
    key_path.write_text(json.dumps(key, ensure_ascii=False, indent=1), encoding="utf-8")
    same = sum(a == b for a, b in zip(*lowers, strict=True))
    print(f"blind: {len(rows)} rows ({same} with the same line twice) → {args.out}/sheet.tsv")
    print(f"blind: the key (not for the judges) → {key_path}")
    return 0


def cmd_unblind(args: argparse.Namespace) -> int:
    try:
        key = json.loads(args.key.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BlindError(f"--key {args.key}: cannot be read ({e})") from e
    if not isinstance(key, dict) or not {"systems", "rows"} <= set(key) or len(key["systems"]) != 2:
        raise BlindError(f"--key {args.key}: not a key written by `python -m model.blind sheet`")
    result = unblind(read_judged(args.sheet, key), key)
    table = markdown(result)
    print(table, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
        args.out.with_suffix(".md").write_text(table, encoding="utf-8")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m model.blind",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sheet", help="write a blind sheet for two systems")
    s.add_argument("--lines", type=Path, required=True, help="upper<TAB>reference[<TAB>group] lines")
    s.add_argument("--system", action="append", default=[], metavar="NAME=SPEC", help="twice")
    s.add_argument("--out", type=Path, required=True, help="folder for sheet.tsv and RUBRIC.md")
    s.add_argument("--key", type=Path, default=None, help="where the key goes (default <out>.key.json)")
    s.add_argument("--group", default=None, help="group label of lines that have none")
    s.add_argument("--limit", type=int, default=0, help="only the first N lines")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument(
        "--reverse",
        action="store_true",
        help="下联求上联: --lines gives lower lines (and reference upper lines); bundles decode with their "
        "reverse model; the sheet's column is 下联 and its candidates upper lines",
    )
    u = sub.add_parser("unblind", help="the verdict of a filled-in sheet")
    u.add_argument("--sheet", type=Path, required=True)
    u.add_argument("--key", type=Path, required=True)
    u.add_argument("--out", type=Path, default=None, help="write the verdict as JSON (and .md beside it)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return cmd_sheet(args) if args.command == "sheet" else cmd_unblind(args)
    except BlindError as e:
        print(f"blind: error: {e}", file=sys.stderr)
        return 2
