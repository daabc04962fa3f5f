"""A whole couplet from a name or a few characters (藏头联 and 嵌字联): ``compose``.

The models write a line for a given line, so a couplet from nothing is made in three steps,
each a decode of the service's own (``answer_batch``, in a decode worker on the site):

1. seeds: human lower lines of the asked shape (duilian/compose_seeds.py), those beginning
   with the lower line's head character first, that end 平 (and keep 马蹄韵's lower pattern
   when the shape has clauses) and hold no character the upper line must have;
2. drafts: the reverse model (下联求上联) writes upper lines for the seeds under the upper
   line's constraints (its head: a lock at its first character, or at each clause's; its
   嵌字), the rules mirrored, so each upper line ends 仄;
3. lower lines: the forward model writes lower lines for the drafts under the lower line's
   constraints and every rule of the search (tone end, 马蹄韵 where the upper keeps it).

A couplet is kept only when it keeps every hard rule, the upper line ends 仄 and the lower 平,
马蹄韵 holds where there are clauses, and no word filter refuses it; they are ranked by the sum
of the two models' scores (the search's ``rank_score`` per character of the draft and of the
lower line), one couplet per upper line before a second. Each comes with the 横批 the service
adds to every answer (``Library.banners_for``) and the check of a couplet
(``duilian.check.check_with``). Everything is a beam search or a fixed choice, so one request
(and ``seed``) always gets the same couplets.

The head: 2 characters head the upper and the lower line; 2k characters (k the number of
clauses, 4 for a couplet of two clauses) head each clause, the upper line's clauses the first
k, the lower line's the rest, so the heads read in order down the upper line, then the lower
(恭贺新禧 → 恭…，贺…；新…，禧…). 嵌字 (``keywords``): the first, third ... character in the upper
line, the second, fourth ... in the lower, each anywhere in its line.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from data.rules import hoof_ends
from data.tones import line_tones, mark
from duilian.check import CheckReport, check_with
from duilian.compose_seeds import MARK, SeedIndex, seed_index, shape_for
from duilian.inputs import FORWARD, REVERSE, TONE_MODES, InputError, Query, check_count, clean_chars
from model.decoding.answer import Answer, Banner
from model.decoding.plan import ConstraintError

if TYPE_CHECKING:
    from duilian.service import Library

MAX_CLAUSES = 4
CLAUSE_CHARS = (2, 16)  # the shortest and the longest clause
MAX_LINE = 32  # the longest line, marks included (a door's 春联, as the scroll draws)
SEEDS = 8  # seed lower lines drafted from
HEAD_SEEDS = 5  # of which at most this many begin with the lower line's head character
DRAFTS = 2  # upper lines drafted for each seed
DRAFTS_KEPT = 8  # drafts whose lower lines are written
LOWERS = 3  # lower lines written for each draft
SEPARATORS = ",，、 "  # between the clause lengths of a pattern: "4,7"
BANNERS = 5


class Composer(Protocol):
    """What composing needs of the service: a ``Library`` that decodes (``LoadedModel``, or a
    server's ``PooledModel`` whose decodes run in its workers)."""

    bundle: Any
    version: str

    def answer_batch(self, queries: list[Query], oversample: int) -> list[Answer | Exception]: ...

    def banners_for(self, upper: str, lower: str, tone_mode: str, n: int) -> list[Banner] | None: ...

    def is_clean(self, text: str, upper: str | None = None) -> bool: ...

    def known_lines(self, upper: str, found: list[str] | None = None) -> list[str]: ...


def doc(description: str) -> dict[str, str]:
    return {"description": description}


@dataclass(frozen=True)
class ComposeRequest:
    """A checked request (``make_compose_request``)."""

    head: str
    keywords: str
    clauses: tuple[int, ...]
    n: int = 3
    tone_mode: str = "modern"
    seed: int = 0

    @property
    def shape(self) -> str:
        return shape_for(self.clauses)

    @property
    def pattern(self) -> str:
        return ",".join(str(k) for k in self.clauses)

    def locks(self, lower: bool) -> str | None:
        """The lock pattern of one line: its head characters at its first or its clauses' first
        positions (None without a head)."""
        if not self.head:
            return None
        heads = self.head[len(self.head) // 2 :] if lower else self.head[: len(self.head) // 2]
        starts = [0] if len(heads) == 1 else clause_starts(self.clauses)
        out = ["_"] * len(self.shape)
        for start, ch in zip(starts, heads, strict=True):
            out[start] = ch
        return "".join(out)

    def chars(self, lower: bool) -> str:
        """Every character one line must hold: its heads and its 嵌字."""
        heads = self.head[len(self.head) // 2 :] if lower else self.head[: len(self.head) // 2]
        return heads + self.keywords[int(lower) :: 2]


def clause_starts(clauses: Sequence[int]) -> list[int]:
    starts, at = [], 0
    for k in clauses:
        starts.append(at)
        at += k + len(MARK)
    return starts


def parse_pattern(length: int | str) -> tuple[int, ...]:
    """Clause lengths from a length (7) or a pattern ("4,7"), or an ``InputError``."""
    text = str(length).strip()
    for sep in SEPARATORS[1:]:
        text = text.replace(sep, ",")
    parts = [p for p in text.split(",") if p]
    if len(text) > 40 or not parts or not all(p.isascii() and p.isdigit() for p in parts):
        raise InputError(
            f"字数格式不对：{length}（例如 7 或 4,7）",
            f"Unknown length or clause pattern {length!r} (e.g. 7 or 4,7).",
        )
    clauses = tuple(int(p) for p in parts)
    low, high = CLAUSE_CHARS
    if len(clauses) > MAX_CLAUSES or not all(low <= k <= high for k in clauses):
        raise InputError(
            f"每个分句 {low} 到 {high} 个字，最多 {MAX_CLAUSES} 个分句：{length}",
            f"Each clause has {low} to {high} characters, at most {MAX_CLAUSES} clauses: {length!r}.",
        )
    if len(shape_for(clauses)) > MAX_LINE:
        raise InputError(
            f"一联最多 {MAX_LINE} 个字（含标点）",
            f"A line has at most {MAX_LINE} characters, marks included.",
        )
    return clauses


def make_compose_request(
    head: str | None,
    keywords: str | None = None,
    length: int | str = 7,
    n: int = 3,
    tone_mode: str = "modern",
    seed: int = 0,
    max_asked: int = 10,
) -> ComposeRequest:
    """The request checked, or an ``InputError`` in Chinese and English."""
    check_count(n, max_asked)
    if tone_mode not in TONE_MODES:
        raise InputError(
            f"声调模式只能是 {'、'.join(TONE_MODES)}", f"The tone mode is one of {', '.join(TONE_MODES)}."
        )
    clauses = parse_pattern(length)
    heads = clean_chars(head, ("藏头", "The head")) or ""
    words = clean_chars(keywords, ("嵌字", "The keywords")) or ""
    if not heads and not words:
        raise InputError("请给出藏头（head）或嵌字（keywords）", "Give a head (head) or keywords (keywords).")
    if heads and len(heads) not in (2, 2 * len(clauses)):
        each = (
            (
                f"，或每个分句一个字（{2 * len(clauses)} 个）",
                f", or one for each of the {2 * len(clauses)} clauses",
            )
            if len(clauses) > 1
            else ("", "")
        )
        raise InputError(
            f"藏头须是 2 个字（上下联各一）{each[0]}：{heads}",
            f"The head is 2 characters (one for each line){each[1]}: {heads}.",
        )
    request = ComposeRequest(heads, words, clauses, n, tone_mode, seed)
    upper, lower = request.chars(False), request.chars(True)
    for chars, zh, en in ((upper, "上联", "upper"), (lower, "下联", "lower")):
        if len(set(chars)) != len(chars):
            raise InputError(
                f"{zh}要嵌的字重复了：{chars}", f"The {en} line would hold a character twice: {chars}."
            )
        if len(chars) > sum(clauses):
            raise InputError(f"{zh}放不下这么多字：{chars}", f"The {en} line is too short for {chars}.")
    shared = "".join(ch for ch in upper if ch in lower)
    if shared:
        raise InputError(
            f"上下联不能用同一个字（不重字）：{shared}",
            f"The upper and lower lines may not share a character (no reuse): {shared}.",
        )
    return request


@dataclass(frozen=True)
class ComposedCouplet:
    """One couplet written for the request."""

    upper: str = field(metadata=doc("上联, ending 仄"))
    lower: str = field(metadata=doc("下联, ending 平"))
    banner: str | None = field(metadata=doc("its best 横批 (null when the model has no 横批 table)"))
    banners: list[Banner] = field(metadata=doc("up to 5 横批, best fit to the couplet's theme first"))
    score: float = field(metadata=doc("upper_score + lower_score: the order of the couplets, higher first"))
    upper_score: float = field(
        metadata=doc("the reverse model's search score per character of the upper line (its rank_score)")
    )
    lower_score: float = field(
        metadata=doc("the forward model's search score per character of the lower line (its rank_score)")
    )
    check: CheckReport = field(
        metadata=doc("the couplet checked against every rule, as POST /api/v1/check answers")
    )


@dataclass(frozen=True)
class Composition:
    """The couplets composed for a head or keywords, best first."""

    head: str = field(metadata=doc("the head as normalised (empty without one)"))
    keywords: str = field(metadata=doc("the 嵌字 as normalised (empty without them)"))
    pattern: str = field(metadata=doc("the clause lengths, e.g. 7 or 4,7"))
    tone_mode: str = field(metadata=doc("modern, lenient or classical"))
    seed: int = field(metadata=doc("the seed asked for (another seed, other couplets)"))
    couplets: list[ComposedCouplet] = field(
        metadata=doc(
            "best first, each keeping every hard rule, the upper line ending 仄 and the lower 平, "
            "马蹄韵 where there are clauses"
        )
    )
    model_version: str = field(metadata=doc("the model's version"))

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        for c, raw in zip(self.couplets, out["couplets"], strict=True):
            raw["check"] = c.check.as_json()
        return out


def _mix(request: ComposeRequest) -> random.Random:
    """A generator fixed by the request (not Python's salted ``hash``)."""
    key = f"{request.head}|{request.keywords}|{request.pattern}|{request.tone_mode}|{request.seed}"
    return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


def seed_ok(line: str, request: ComposeRequest) -> bool:
    """A seed ends 平, keeps 马蹄韵's lower pattern where it has clauses, and holds no character
    the upper line must have (the reverse search keeps them out of the upper line)."""
    if any(ch in line for ch in request.chars(False)):
        return False
    tones = line_tones(line, request.tone_mode)
    if mark(tones[-1]) != "平":
        return False
    return all(kept for _, _, kept in hoof_ends(tones, line, lower=True))


def seeds(index: SeedIndex, request: ComposeRequest) -> list[str]:
    """``SEEDS`` seed lower lines: up to ``HEAD_SEEDS`` beginning with a character the lower
    line holds (its head first), the rest drawn from the shape's spread (by the request's
    generator)."""
    rng = _mix(request)
    first: list[str] = []
    for ch in request.chars(True):
        found = [s for s in index.heads.get(request.shape, {}).get(ch, []) if seed_ok(s, request)]
        if request.seed:
            rng.shuffle(found)
        first += [s for s in found if s not in first]
    chosen = first[:HEAD_SEEDS]
    spread = list(index.general.get(request.shape, []))
    rng.shuffle(spread)
    chosen += [s for s in spread if s not in chosen and seed_ok(s, request)][: SEEDS - len(chosen)]
    return chosen


def _decoded(composer: Composer, queries: list[Query]) -> tuple[list[Answer], ConstraintError | None]:
    if not queries:
        return [], None
    answers, refused = [], None
    for found in composer.answer_batch(queries, 0):
        if isinstance(found, Answer):
            answers.append(found)
        elif isinstance(found, ConstraintError):
            refused = found
        else:
            raise found
    return answers, refused


def ends_right(report: Any, upper_tones: Sequence[str], lower_tones: Sequence[str], clauses: int) -> bool:
    """Every hard rule, the upper line ending 仄 and the lower 平, 马蹄韵 where there are clauses."""
    return (
        report.hard_ok
        and report.tone_end is True
        and upper_tones[-1] == "仄"
        and lower_tones[-1] == "平"
        and (clauses < 2 or report.horse_hoof is True)
    )


def compose(composer: Composer, request: ComposeRequest) -> Composition:
    """The request's couplets, best first (at most ``request.n``; fewer when fewer keep every
    rule). ``ConstraintError`` when none can be written (no seed of that shape, or every
    decode refused), naming why in Chinese and English."""
    found = seeds(seed_index(composer.bundle), request)
    if not found:
        raise ConstraintError(
            "pattern",
            f"模型没有 {request.pattern} 字的对联可据以起草",
            f"The model knows no couplet of the pattern {request.pattern} to draft from.",
        )
    mode, clauses = request.tone_mode, len(request.clauses)
    drafts_asked = [
        Query(s, DRAFTS, mode, request.locks(False), None, request.keywords[0::2] or None, direction=REVERSE)
        for s in found
    ]
    answers, refused = _decoded(composer, drafts_asked)
    drafts: dict[str, float] = {}
    lower_chars = set(request.chars(True))
    for a in answers:
        for c in a.candidates:
            if c.tones[-1] == "仄" and not lower_chars & set(c.text) and composer.is_clean(c.text):
                drafts[c.text] = max(drafts.get(c.text, -1e9), c.rank_score)
    best = sorted(drafts, key=lambda u: (-drafts[u], u))[:DRAFTS_KEPT]
    lowers_asked = [
        Query(u, LOWERS, mode, request.locks(True), None, request.keywords[1::2] or None, direction=FORWARD)
        for u in best
    ]
    answers, refused_lower = _decoded(composer, lowers_asked)
    ranked: list[tuple[float, str, str, float, float]] = []
    for a in answers:
        upper = a.given
        for c in a.candidates:
            if ends_right(c.report, a.given_tones, c.tones, clauses) and composer.is_clean(c.text, upper):
                ranked.append((drafts[upper] + c.rank_score, upper, c.text, drafts[upper], c.rank_score))
    ranked.sort(key=lambda r: (-r[0], r[1], r[2]))
    if not ranked:
        why = refused_lower or refused
        if why is not None:
            raise why
        raise ConstraintError(
            "rules",
            "没有写出合乎全部规则的对联，请换个字数或种子（seed）再试",
            "No couplet keeping every rule was found; try another length or seed.",
        )
    couplets = [_couplet(composer, request, *r) for r in distinct(ranked)[: request.n]]
    return Composition(
        request.head, request.keywords, request.pattern, mode, request.seed, couplets, composer.version
    )


def _apart(a: str, b: str) -> bool:
    return sum(x != y for x, y in zip(a, b, strict=True)) >= 2


def distinct(
    ranked: list[tuple[float, str, str, float, float]],
) -> list[tuple[float, str, str, float, float]]:
    """The couplets in their order, those whose lines each differ from every one taken before in
    two characters or more first, then the rest: n couplets, not one with a character changed."""
    first: list[tuple[float, str, str, float, float]] = []
    for r in ranked:
        if all(_apart(r[1], f[1]) and _apart(r[2], f[2]) for f in first):
            first.append(r)
    return first + [r for r in ranked if r not in first]


def _couplet(
    composer: Composer, request: ComposeRequest, score: float, upper: str, lower: str, up: float, low: float
) -> ComposedCouplet:
    banners = composer.banners_for(upper, lower, request.tone_mode, BANNERS) or []
    return ComposedCouplet(
        upper=upper,
        lower=lower,
        banner=banners[0].text if banners else None,
        banners=banners,
        score=round(score, 4),
        upper_score=round(up, 4),
        lower_score=round(low, 4),
        # check_with reads only .bundle and .known_lines, which every Composer has
        check=check_with(cast("Library", composer), upper, lower, request.tone_mode),
    )
