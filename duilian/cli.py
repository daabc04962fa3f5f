"""The ``duilian`` command: lower lines (下联) for upper lines (上联), on this machine.

    duilian generate 春风得意马蹄疾
    duilian generate 春风得意马蹄疾 -n 3 --locks _下作_ ...
    printf '春风得意\\n山高水长\\n' | duilian generate --json

It reads its input through duilian/inputs.py and answers through duilian/service.py, the
functions the site's POST /api/v1/generate calls, with the site's default engine (int8 on ONNX
Runtime, one thread), so one line gives the same candidates here as there. The exported ONNX
graphs are kept in ``work/cache/onnx`` (``--graph-cache``), so only the first run exports them.
With ``--server URL`` it asks a running server's POST /api/v1/generate instead (standard
library only), and prints its answers the same way: no model to load, so it answers at once.

No PyTorch: the decoder runs the bundle's ONNX graphs (exported on the first run only).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from data.text import REGISTERS
from duilian import check_cli, compose_cli
from duilian.inputs import FORWARD, MAX_ASKED, MAX_CHARS, REVERSE, TONE_MODES, InputError, Query, make_query
from duilian.loading import EXIT_FAILED, EXIT_INPUT, Problem, load
from duilian.service import LoadedModel
from model.decoding.answer import Answer
from model.decoding.plan import ConstraintError
from model.store.fingerprint import KnownLinesError

EXPORT_LOG = "model.export.graphs"  # the module that exports and says so (named: it needs PyTorch)

RULES = (  # the report's fields as the plain output shows them: (field, 中文)
    ("length", "字数"),
    ("punctuation", "标点"),
    ("repeats", "叠字"),
    ("no_reuse", "不重字"),
    ("tone_end", "尾字平仄"),
    ("no_three_level_tail", "无三平尾"),
)
TONE_MODE_HELP = {
    "modern": "普通话声调 / Mandarin tones (default)",
    "lenient": "宽松：多音字两可 / lenient: a character read both ways counts as either",
    "classical": "古声：入声字为仄 / classical: the 平水韵's 入声 characters are oblique",
}
LEGEND = """\
output / 输出:
  each candidate: its rank, the lower line, 得分 (the search's score per character, by which
  the candidates are ordered; the REST API's rank_score), and its best 横批; under it the
  平/仄 of every character (中: either, blank: unknown) and the couplet rules' verdicts
  (docs/COUPLET_RULES.md): ✓ kept, ✗ broken, – does not apply:
    字数 length         same number of characters
    标点 punctuation    punctuation at the same places
    叠字 repeats        repeated characters mirrored
    不重字 no reuse     no character of the upper line reused
    尾字平仄 tone end   upper line ends 仄, lower line ends 平
    无三平尾            no three 平 at the end of the lower line
    节奏 rhythm         share of the rhythm positions (2nd, 4th, 6th ...) with opposed tones
  The upper line's known lower lines are shown when it is a line of the training set.
  --json prints, one line per upper line, the object POST /api/v1/generate answers.

exit status / 退出码: 0 all answered; 2 a line, an option or the model refused (the message,
  in Chinese and English, on stderr; the other lines are still answered); 1 another error.
"""


def count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_ASKED:
        raise argparse.ArgumentTypeError(
            f"须为 1 到 {MAX_ASKED} 的整数 / must be a whole number from 1 to {MAX_ASKED}: {text!r}"
        )
    return int(text)


class Parser(argparse.ArgumentParser):
    """Its refusals in Chinese and English, with the usage, exit status 2."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"{self.prog}: 参数有误 / bad arguments: {message}\n")


def parser() -> argparse.ArgumentParser:
    top = Parser(
        prog="duilian",
        description="对联：为上联对出下联，守对联的规则 / Chinese couplets: lower lines (下联) for an "
        "upper line (上联) under the couplet rules, with the shipped model, on this machine.",
        epilog="例 / example:  duilian generate 春风得意马蹄疾\nmore / 更多:  duilian generate --help",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    gen = commands.add_parser(
        "generate",
        help="对下联 / lower lines for upper lines",
        description="对下联：每个上联给出候选下联，附平仄与规则检查 / Lower lines for each upper line, "
        "best first, with their tones (平/仄) and the couplet rules' verdicts. The same candidates "
        "as POST /api/v1/generate of the site.",
        epilog="examples / 例:\n"
        "  duilian generate 春风得意马蹄疾\n"
        "  duilian generate 春风得意马蹄疾 --locks __秋____\n"
        "  duilian generate 春风得意马蹄疾 --head 秋 --embed 月\n"
        "  printf '春风得意\\n山高水长\\n' | duilian generate --json\n"
        "  duilian generate --reverse 家和万事兴        (下联求上联 / upper lines for a lower line)\n\n"
        + LEGEND,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gen.add_argument(
        "upper",
        nargs="*",
        metavar="UPPER",
        help=f"上联，可多个 / upper lines (at most {MAX_CHARS} characters each); none or '-': one a "
        "line from stdin",
    )
    gen.add_argument(
        "-n",
        type=count,
        default=5,
        metavar="N",
        help=f"候选个数 / candidates per line, 1-{MAX_ASKED} (default 5)",
    )
    gen.add_argument(
        "--locks",
        metavar="PATTERN",
        help="锁字：与上联等长，_ 为不锁 / lock characters in place: a pattern as long as the upper "
        "line, _ (or ＿) free, a character fixed there, e.g. __秋____ (the REST API's locks)",
    )
    gen.add_argument(
        "--head",
        "--required-first",
        dest="required_first",
        metavar="CHAR",
        help="藏头：下联的第一个字 / acrostic: the lower line's first character (after an opening "
        "quote or bracket)",
    )
    gen.add_argument(
        "--embed",
        "--required-chars",
        dest="required_chars",
        metavar="CHARS",
        help="嵌字：下联须含这些字 / embedded characters the lower line must contain",
    )
    gen.add_argument(
        "-t",
        "--tone-mode",
        choices=TONE_MODES,
        default="modern",
        help="声调 / tones: " + "; ".join(f"{mode}: {text}" for mode, text in TONE_MODE_HELP.items()),
    )
    gen.add_argument(
        "--fast",
        action="store_true",
        help="快速模式 / the fast mode: the model's one-pass proposer suggests, the full model rescores",
    )
    gen.add_argument(
        "-r",
        "--reverse",
        action="store_true",
        help="下联求上联：给的是下联，对出上联 / the lines given are lower lines: write upper lines for "
        "them (the bundle's second model; the upper lines end 仄 where the lower end 平)",
    )
    gen.add_argument(
        "--register",
        choices=REGISTERS,
        default=REGISTERS[0],
        help="语体 / the register, for a model with registers: general (everyday), classical "
        "(regulated verse), formal (楹联 of halls, temples, birthdays, mourning)",
    )
    gen.add_argument(
        "--diverse",
        action="store_true",
        help="多样候选 / diverse candidates: lines that differ in more than a character or two",
    )
    gen.add_argument(
        "--model",
        type=Path,
        default=None,
        metavar="DIR",
        help="模型目录 / the model bundle folder (default: the shipped models/default)",
    )
    gen.add_argument("--json", action="store_true", help="JSON，每个上联一行 / one JSON object a line")
    gen.add_argument(
        "--server",
        default=os.environ.get("DUILIAN_SERVER") or None,
        metavar="URL",
        help="问正在运行的对联服务 / ask a running duilian server (its POST /api/v1/generate, e.g. "
        "http://127.0.0.1:8000; env DUILIAN_SERVER) instead of loading the model here: the same "
        "answers, printed the same way, without this process's seconds of start-up",
    )
    gen.add_argument(
        "--graph-cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the exported ONNX graphs are kept between runs (default work/cache/onnx)",
    )
    check_cli.add_parser(commands)  # duilian check 上联 下联
    compose_cli.add_parser(commands)  # duilian compose 张伟 --length 7
    return top


def upper_lines(args: argparse.Namespace, stdin: TextIO) -> Iterator[str]:
    """The command's lines, then stdin's ('-', or no line given), blank lines skipped."""
    given: list[str] = args.upper or ["-"]
    for line in given:
        if line == "-":
            for raw in stdin:
                if raw.strip():
                    yield raw.rstrip("\r\n")
        else:
            yield line


def query(args: argparse.Namespace, upper: str) -> Query:
    return make_query(
        upper,
        args.n,
        args.tone_mode,
        args.locks,
        args.required_first,
        args.required_chars,
        args.fast,
        args.diverse,
        REVERSE if args.reverse else FORWARD,
        args.register,
    )


def ask(server: str, q: Query, timeout: float = 300) -> dict[str, Any]:
    """The server's answer to ``q`` (POST /api/v1/generate), as its JSON object; its refusal
    (4xx, a bilingual detail) is a Problem with exit status 2, an unreachable or failing
    server one with status 1. Standard library only: no torch, no model, no HTTP package."""
    url = server.rstrip("/") + "/api/v1/generate"
    fields = dataclasses.asdict(q)
    if q.reverse:  # the request names the line it gives
        fields["lower"] = fields.pop("upper")
    body = json.dumps(fields, ensure_ascii=False).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            found: dict[str, Any] = json.loads(response.read())
            return found
    except urllib.error.HTTPError as exc:
        detail = _detail(exc.read())
        if 400 <= exc.code < 500:
            zh, _, en = detail.partition(" / ")
            raise Problem(zh, en or zh) from exc
        raise Problem(
            "服务器出错", f"the server at {server} answered {exc.code}: {detail}", EXIT_FAILED
        ) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise Problem("无法连接服务器", f"cannot reach the server at {server}: {exc}", EXIT_FAILED) from exc


def _detail(raw: bytes) -> str:
    try:
        detail = json.loads(raw).get("detail", "")
    except (ValueError, AttributeError):
        return raw.decode("utf-8", "replace")[:500]
    return detail if isinstance(detail, str) else json.dumps(detail, ensure_ascii=False)


def read_answer(found: dict[str, Any]) -> Answer:
    """A server's JSON answer as the ``Answer`` it was written from."""
    return Answer.from_json(found)


def answer(model: LoadedModel, q: Query) -> Answer:
    try:
        return model.answer(q)
    except ConstraintError as exc:  # its message names the constraint, in Chinese and English
        raise Problem(exc.zh, exc.en) from exc
    except KnownLinesError as exc:  # read on first use (``lazy``): the bundle, not the request
        raise Problem(
            "模型无法读取", f"the model bundle at {model.bundle.path} cannot be read: {exc}"
        ) from exc
    except ValueError as exc:  # e.g. classical tones without a 入声 table
        raise Problem("请求无法处理", f"Cannot do this request: {exc}") from exc


def _mark(value: Any) -> str:
    return "–" if value is None else ("✓" if value else "✗")


def _width(text: str) -> int:
    return sum(2 if ord(ch) > 0x2E7F else 1 for ch in text)


def plain(a: Answer) -> str:
    """The answer for a person: the given line and its tones, then each candidate."""
    tones = "".join(t or "　" for t in a.given_tones)
    reverse = a.direction == REVERSE
    out = [f"{'下联' if reverse else '上联'}  {a.given}", f"      {tones}"]
    if a.in_training_set:
        out.append("      （训练集中的上联 / an upper line of the training set）")
    if a.known_lower_lines:
        out.append(f"      已知下联 / known lower lines: {'，'.join(a.known_lower_lines)}")
    if a.unknown_chars:
        out.append(f"      模型不认识的字 / characters the model does not know: {''.join(a.unknown_chars)}")
    if a.reads_reversed and reverse:
        out.append("      下联以仄声收尾，可能是上联 / it ends 仄: probably an upper line (drop --reverse)")
    elif a.reads_reversed:
        out.append("      上联以平声收尾，可能是下联 / it ends 平: probably a lower line (try --reverse)")
    if not a.candidates:
        out.append("      没有候选 / no candidate")
    pad = max(_width(c.text) for c in a.candidates) if a.candidates else 0
    for i, c in enumerate(a.candidates, 1):
        banner = f"  横批 {c.banners[0].text}" if c.banners else ""
        space = " " * (pad - _width(c.text))
        out.append(f"{i:>3}.  {c.text}{space}  得分 {c.rank_score:.3f}{banner}")
        verdicts = " ".join(f"{_mark(getattr(c.report, name))}{zh}" for name, zh in RULES)
        rhythm = "–" if c.report.rhythm is None else f"{c.report.rhythm:.0%}"
        tones = "".join(t or "　" for t in c.tones)
        space = " " * (pad - _width(tones))
        out.append(f"      {tones}{space}  {verdicts} 节奏{rhythm}")
    if a.filtered:
        out.append(f"      （{a.filtered} 个候选被敏感词过滤 / {a.filtered} withheld by the word filter）")
    return "\n".join(out)


def generate(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    status, model = 0, None
    for n, line in enumerate(upper_lines(args, stdin)):
        try:
            q = query(args, line)
            if args.server:
                found = ask(args.server, q)
                text = json.dumps(found, ensure_ascii=False) if args.json else plain(read_answer(found))
            else:
                model = model or load(args)
                a = answer(model, q)
                text = json.dumps(a.as_json(), ensure_ascii=False) if args.json else plain(a)
        except (InputError, Problem) as exc:
            stderr.write(f"duilian: {line}: {exc}\n")
            stderr.flush()
            status = max(status, exc.status if isinstance(exc, Problem) else EXIT_INPUT)
            if isinstance(exc, Problem) and exc.status == EXIT_FAILED:  # no model or server: no other line
                return status
            if isinstance(exc, Problem) and model is None and not args.server:
                return status
            continue
        stdout.write(text + "\n" if args.json else ("\n" if n else "") + text + "\n")
        stdout.flush()
    return status


def show_progress() -> None:
    """The ONNX engine's two lines of a first run (exporting, and in how long) on stderr, as
    they are: the command's own lines, none of the libraries'."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("duilian: %(message)s"))
    progress = logging.getLogger(EXPORT_LOG)
    progress.addHandler(handler)
    progress.setLevel(logging.INFO)
    progress.propagate = False  # a library may have given the root logger a handler


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    show_progress()
    try:
        if args.command == "check":
            return check_cli.run(args, sys.stdout, sys.stderr)
        if args.command == "compose":
            return compose_cli.run(args, sys.stdout, sys.stderr)
        return generate(args, sys.stdin, sys.stdout, sys.stderr)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `duilian generate ... | head`: the reader has gone
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # never a trace: say what happened
        print(f"duilian: 出错了 / error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
