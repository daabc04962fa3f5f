"""``duilian check 上联 下联``: the check of a couplet a person wrote (duilian/check.py), printed
for a person, or with ``--json`` as the very object POST /api/v1/check answers.

It reads the lines as the site does (duilian/inputs.py) and the bundle with the site's default
engine (``SERVE_INT8`` on ``SERVE_RUNTIME``, the graphs cached as ``duilian generate`` caches them),
whose alternatives search suggests characters where the lower line is weak (duilian/suggest.py).
``--no-suggest`` reads the bundle without its models (the pairing table and the known lines: no
model, no PyTorch) and the report says why there are no suggestions. Bad input: a message in
Chinese and English on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from data.paths import default_model_dir, graph_cache_dir
from duilian.check import CheckReport, check_with
from duilian.engine import Engine, set_decode_threads
from duilian.inputs import TONE_MODES, InputError, clean_line
from duilian.loading import EXIT_INPUT
from duilian.service import Library, LoadedModel
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from model.store.bundle import load_bundle
from model.store.layout import has_model

LEGEND = """\
output / 输出:
  each line and the 平/仄 of its characters (中: either, blank: unknown); every rule (docs/COUPLET_RULES.md)
  ✓ kept, ✗ broken (at the characters named, counted from 1), – does not apply; clause by clause (分句)
  the clause ends' tones and 马蹄韵's (仄顶仄，平顶平: the upper line's clause ends run … 仄仄 平平 仄, the
  lower's mirror them); the word pairs (jieba's words of the upper line) with their pairing score (the
  bundle's table: 0 no better than chance, 3 the best) and parts of speech; whether it is a known couplet;
  改字建议 (suggestions): for the weakest places of the lower line (a broken rule first, then the weakest
  word pairs) the characters that mend them with the rest kept, and the line with each.
  --json prints the object POST /api/v1/check answers.

exit status / 退出码: 0 checked (whatever the verdicts); 2 a line, an option or the model refused.
"""


def add_parser(commands: Any) -> None:
    """The ``check`` subcommand, on ``duilian``'s subparsers."""
    sub = commands.add_parser(
        "check",
        help="检测对联 / check a couplet against the rules",
        description="检测对联：逐条规则、逐个分句、平仄、马蹄韵、词对 / Check a couplet: every rule kept or "
        "broken and where, clause by clause, the tones, 马蹄韵, the word pairs. The same report as POST "
        "/api/v1/check of the site.",
        epilog="examples / 例:\n  duilian check 书山有路勤为径 学海无涯苦作舟\n"
        "  duilian check 花好月圆，春满乾坤 风调雨顺，福临门第 --json\n\n" + LEGEND,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_argument("upper", metavar="UPPER", help="上联 / the upper line")
    sub.add_argument("lower", metavar="LOWER", help="下联 / the lower line")
    sub.add_argument("-t", "--tone-mode", choices=TONE_MODES, default="modern", help="声调 / tones")
    sub.add_argument(
        "--model",
        type=Path,
        default=None,
        metavar="DIR",
        help="模型目录 / the bundle whose pairing table and known lines are read (default models/default)",
    )
    sub.add_argument("--json", action="store_true", help="JSON: the object POST /api/v1/check answers")
    sub.add_argument(
        "--no-suggest",
        action="store_true",
        help="不给改字建议，不载入模型 / no suggestions: the check alone, without loading the model (faster)",
    )


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        upper = clean_line(args.upper)
        lower = clean_line(args.lower, name=("下联", "The lower line"))
        report = check(upper, lower, args.tone_mode, args.model, suggest=not args.no_suggest)
    except InputError as exc:
        stderr.write(f"duilian: {exc}\n")
        return EXIT_INPUT
    stdout.write((json.dumps(report.as_json(), ensure_ascii=False) if args.json else plain(report)) + "\n")
    return 0


def check(upper: str, lower: str, mode: str, model: Path | None, suggest: bool = True) -> CheckReport:
    """The report, with the bundle's pairing table and known lines, and with ``suggest`` its
    suggestions; InputError when the bundle cannot be read or the tone mode has no table."""
    folder = model or default_model_dir()
    if not has_model(folder):
        raise InputError(
            f"{folder} 不是模型目录", f"{folder} holds no model bundle; the shipped one is models/default"
        )
    try:
        if not suggest:
            return check_with(Library(load_bundle(folder, lazy=True)), upper, lower, mode)
        engine = Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir())
        loaded = LoadedModel.load(folder, None, engine, warm=False, lazy=True)
        set_decode_threads(1)  # as the site's decode workers
        report = check_with(loaded, upper, lower, mode)
        return replace(report, suggestions=loaded.suggestions(report))
    except (OSError, KeyError, RuntimeError) as exc:
        raise InputError("模型无法读取", f"the model bundle at {folder} cannot be read: {exc}") from exc
    except ValueError as exc:  # a damaged bundle, or classical tones without a 入声 table
        raise InputError("请求无法处理", f"cannot do this check: {exc}") from exc


def _mark(kept: bool | None) -> str:
    return "–" if kept is None else ("✓" if kept else "✗")


def _at(positions: list[int]) -> str:
    return f"（第{'、'.join(str(p + 1) for p in positions)}字）" if positions else ""


def plain(r: CheckReport) -> str:
    """The report for a person: the lines and their tones, the rules, the clauses, the words."""
    out = [
        f"上联  {r.upper}",
        f"      {''.join(t or '　' for t in r.upper_tones)}",
        f"下联  {r.lower}",
        f"      {''.join(t or '　' for t in r.lower_tones)}",
    ]
    verdicts = []
    for rule in r.rules:
        if rule.name == "rhythm":
            share = "–" if rule.share is None else f"{rule.share:.0%}"
            verdicts.append(f"{rule.label}{share}{_at(rule.positions)}")
        else:
            verdicts.append(f"{_mark(rule.kept)}{rule.label}{_at(rule.positions)}")
    ok = "合律 / every hard rule kept" if r.hard_ok else "不合律 / a hard rule broken"
    out += [f"规则  {ok}", f"      {' '.join(verdicts)}"]
    if len(r.clauses) > 1:
        out.append("分句  句脚平仄 / clause ends, 马蹄韵 wants:")
        for k, c in enumerate(r.clauses, 1):
            hoof = f"  马蹄韵 {'/'.join(c.hoof_wanted)} {_mark(c.hoof_kept)}" if c.hoof_wanted else ""
            rhythm = "–" if c.rhythm is None else f"{c.rhythm:.0%}"
            length = "" if c.length_ok else "  ✗字数"
            out.append(f"  {k}.  {c.upper} / {c.lower}  句脚 {'/'.join(t or '?' for t in c.end_tones)}{hoof}"
                       f"  节奏{rhythm}{length}")  # fmt: skip
    if r.words:
        pairs = []
        for w in r.words:
            score = "" if w.pairing is None else f" {w.pairing:.2f}"
            pos = (
                f" {w.upper_pos or '?'}/{w.lower_pos or '?'}{_mark(w.pos_match)}"
                if w.upper_pos or w.lower_pos
                else ""
            )
            pairs.append(f"{w.upper}/{w.lower}{score}{pos}")
        out.append(f"词对  {'  '.join(pairs)}")
    if r.known is not None and r.known.couplet_known:
        out.append("已知  训练集中的对联 / a couplet of the training set")
    elif r.known is not None and r.known.upper_known:
        out.append(f"已知  上联在训练集中，下联 / known lower lines: {'，'.join(r.known.known_lower_lines)}")
    return "\n".join(out + suggestion_lines(r))


def suggestion_lines(r: CheckReport) -> list[str]:
    """改字建议: each weak place (counted from 1), what is weak there, and its replacements with
    what each mends and the line with it; or why there are none."""
    s = r.suggestions
    if not s.items:
        return [f"建议  {s.reason}"]
    names = {rule.name: rule.label for rule in r.rules} | {"pair": "词对"}
    out = ["建议  改字 / suggestions (第几字：现字 → 换字，补救什么，换后的下联):"]
    for item in s.items:
        weak = "、".join(names.get(w, w) for w in item.weakness)
        head = f"  第{item.position + 1}字「{item.current}」（{weak}；{item.upper_word}/{item.lower_word}）"
        if not item.replacements:
            out.append(f"{head}  {item.note}")
            continue
        out.append(head)
        for rep in item.replacements:
            mends = "、".join(names.get(m, m) for m in rep.mends)
            out.append(f"      → {rep.char}  补{mends}  {rep.text}")
    return out
