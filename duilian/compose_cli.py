"""``duilian compose 张伟 --length 7``: whole couplets from a head (藏头) or keywords (嵌字), with
duilian/compose.py, the function POST /api/v1/compose calls, on the site's default engine: the
same couplets as the site. ``--json`` prints the very object the API answers. Bad input: a
message in Chinese and English on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from duilian.compose import Composition, compose, make_compose_request
from duilian.inputs import MAX_ASKED, TONE_MODES, InputError
from duilian.loading import EXIT_INPUT, Problem, load
from model.decoding.plan import ConstraintError

LEGEND = """\
output / 输出:
  each couplet: its rank, the upper line, the lower line and the 横批, the score that orders them (the
  two models' scores per character added), the 平/仄 of every character, and the rules' verdicts
  (as duilian check prints them: ✓ kept, ✗ broken, – does not apply).
  --json prints the object POST /api/v1/compose answers.

the head / 藏头: 2 characters head the upper and the lower line; one a clause (4 for --length 4,7)
  head the upper line's clauses, then the lower line's (恭贺新禧 → 恭…，贺…；新…，禧…).

exit status / 退出码: 0 composed; 2 the input, an option or the model refused (the message, in
  Chinese and English, on stderr).
"""


def add_parser(commands: Any) -> None:
    """The ``compose`` subcommand, on ``duilian``'s subparsers."""
    sub = commands.add_parser(
        "compose",
        help="藏头联、嵌字联 / whole couplets from a name or a few characters",
        description="藏头联、嵌字联：由名字或几个字写出整副对联（上联、下联、横批），合乎全部规则 / "
        "Whole couplets "
        "(upper line, lower line, 横批) from a head or keywords, keeping every rule. The same couplets as "
        "POST /api/v1/compose of the site.",
        epilog="examples / 例:\n  duilian compose 张伟 --length 7\n  duilian compose 恭贺新禧 --length 4,7\n"
        "  duilian compose --keywords 山水 --length 5 --json\n\n" + LEGEND,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_argument(
        "head",
        metavar="HEAD",
        nargs="?",
        default=None,
        help="藏头 / the head (2 characters, or one a clause)",
    )
    sub.add_argument("-k", "--keywords", default=None, help="嵌字 / characters to place in the couplet")
    sub.add_argument(
        "-l", "--length", default="7", help="字数 / 5, 7, 9, 11 ... or clause lengths: 4,7 (default 7)"
    )
    sub.add_argument("-n", type=int, default=3, help=f"几副 / how many couplets, 1-{MAX_ASKED} (default 3)")
    sub.add_argument("--seed", type=int, default=0, help="换一批 / another seed, other couplets (default 0)")
    sub.add_argument("-t", "--tone-mode", choices=TONE_MODES, default="modern", help="声调 / tones")
    sub.add_argument(
        "--model",
        type=Path,
        default=None,
        metavar="DIR",
        help="模型目录 / the bundle (default models/default)",
    )
    sub.add_argument(
        "--graph-cache", type=Path, default=None, metavar="DIR", help="ONNX graphs kept between runs"
    )
    sub.add_argument("--json", action="store_true", help="JSON: the object POST /api/v1/compose answers")


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        if args.seed < 0:
            raise InputError("种子不能为负", "The seed must not be negative.")
        request = make_compose_request(
            args.head, args.keywords, args.length, args.n, args.tone_mode, args.seed
        )
        found = compose(load(args), request)
    except (InputError, ConstraintError, Problem) as exc:
        stderr.write(f"duilian: {exc}\n")
        return EXIT_INPUT
    stdout.write((json.dumps(found.as_json(), ensure_ascii=False) if args.json else plain(found)) + "\n")
    return 0


def _mark(kept: bool | None) -> str:
    return "–" if kept is None else ("✓" if kept else "✗")


def _tones(marks: list[str]) -> str:
    return "".join(t or "　" for t in marks)


def plain(found: Composition) -> str:
    """The couplets for a person: lines, 横批, score, tones and verdicts."""
    asked = "  ".join(
        x
        for x in (
            f"藏头 {found.head}" if found.head else "",
            f"嵌字 {found.keywords}" if found.keywords else "",
        )
        if x
    )
    out = [f"{asked}  字数 {found.pattern}"]
    for k, c in enumerate(found.couplets, 1):
        r = c.check
        verdicts = " ".join(
            f"{rule.label}{'–' if rule.share is None else f'{rule.share:.0%}'}"
            if rule.name == "rhythm"
            else f"{_mark(rule.kept)}{rule.label}"
            for rule in r.rules
        )
        out += [
            f"{k:>3}.  上联 {c.upper}   横批 {c.banner or '–'}   得分 {c.score:.3f}",
            f"      下联 {c.lower}",
            f"      平仄 {_tones(r.upper_tones)} / {_tones(r.lower_tones)}",
            f"      {verdicts}",
        ]
    return "\n".join(out)
