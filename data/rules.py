"""The couplet rules of docs/COUPLET_RULES.md as checks on a finished pair of strings.

The decoder enforces the same rules during search (model/decoding/score_rules.py); these checks are
what evaluation, the API's per-candidate report and the tests use to verify the result. Each hard
rule's verdict is "no fault": the ``*_faults`` functions say where a rule is broken, so the check of
a couplet (duilian/check.py) and the data stage's filters read one implementation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from data.text import clauses, is_han, is_punct, repeat_pattern
from data.tones import Tone, line_tones, opposed, wanted_end

HARD_RULES = ("length", "punctuation", "repeats", "no_reuse")
# 马蹄韵 counts clauses (分句) between pause marks: quotes, brackets and the middle dot sit
# inside a clause (《论语》 is no clause of its own), unlike data.text.clauses' stretches
NOT_CLAUSE_ENDS = frozenset("“”‘’《》（）「」『』〈〉【】·")


def punctuation_faults(upper: str, lower: str) -> list[int]:
    """Positions (up to the shorter line's end) where a mark of either line is not mirrored."""
    return [
        i
        for i, (u, w) in enumerate(zip(upper, lower, strict=False))
        if u != w and (is_punct(u) or is_punct(w))
    ]


def punctuation_mirrored(upper: str, lower: str) -> bool:
    """The same mark at every punctuation position of the upper line, and none elsewhere."""
    return len(upper) == len(lower) and not punctuation_faults(upper, lower)


def repeat_faults(upper: str, lower: str) -> list[int]:
    """Positions where the lines' repeat patterns (``data.text.repeat_pattern``) differ; past
    the shorter line's end, every position."""
    pu, pl = repeat_pattern(upper), repeat_pattern(lower)
    if pu == pl:
        return []
    return [i for i in range(max(len(pu), len(pl))) if i >= min(len(pu), len(pl)) or pu[i] != pl[i]]


def repeats_mirrored(upper: str, lower: str) -> bool:
    """Whether ``repeat_faults`` finds none: the lines are of one length and each character of
    one always faces the same character of the other (as many distinct facing pairs as distinct
    characters on either side), counted with sets, as the data stage asks a million pairs."""
    return len(upper) == len(lower) and len(set(upper)) == len(set(lower)) == len(
        set(zip(upper, lower, strict=True))
    )


def reused_positions(upper: str, lower: str) -> list[int]:
    """Positions of the lower line that hold a Han character of the upper line."""
    han = {ch for ch in upper if is_han(ch)}
    return [i for i, ch in enumerate(lower) if ch in han]


def no_reuse(upper: str, lower: str) -> bool:
    """Whether the lower line holds no Han character of the upper line."""
    return not any(is_han(ch) for ch in set(upper).intersection(lower))


def last_tone(tones: list[Tone], line: str) -> Tone:
    """Tone of the last Han character (a line may end on a punctuation mark)."""
    for ch, tone in zip(reversed(line), reversed(tones), strict=True):
        if not is_punct(ch):
            return tone
    return Tone.NONE


def tone_end_ok(upper_tones: list[Tone], lower_tones: list[Tone], upper: str, lower: str) -> bool | None:
    """Lower line ends level after an oblique end, oblique after a level one; None if unknown."""
    want = wanted_end(last_tone(upper_tones, upper))
    got = last_tone(lower_tones, lower)
    if want == Tone.EITHER or got == Tone.NONE:
        return None
    return bool(got & want)


def rhythm_positions(line: str) -> list[int]:
    """2nd, 4th, 6th ... character of each clause, and each clause's last character."""
    positions: set[int] = set()
    for start, end in clauses(line):
        positions.update(range(start + 1, end, 2))
        positions.add(end - 1)
    return sorted(positions)


def rhythm_share(upper_tones: list[Tone], lower_tones: list[Tone], upper: str) -> float | None:
    """Share of rhythm positions with opposed tones, over those where both tones are known."""
    judged = [
        opposed(upper_tones[i], lower_tones[i])
        for i in rhythm_positions(upper)
        if i < len(lower_tones) and upper_tones[i] and lower_tones[i]
    ]
    return sum(judged) / len(judged) if judged else None


def no_three_level_tail(lower_tones: list[Tone]) -> bool:
    tail = lower_tones[-3:]
    return not (len(tail) == 3 and all(t == Tone.LEVEL for t in tail))


def clause_spans(line: str) -> list[tuple[int, int]]:
    """(start, end) of each clause (分句), from its first character to after its last: clauses
    end at pause marks (，、；：。？！…— and the like), not at ``NOT_CLAUSE_ENDS``."""
    spans: list[tuple[int, int]] = []
    start = last = -1
    for i, ch in enumerate(line):
        if not is_punct(ch):
            start, last = (i if start < 0 else start), i
        elif ch not in NOT_CLAUSE_ENDS and last >= 0:
            spans.append((start, last + 1))
            start = last = -1
    return [*spans, (start, last + 1)] if last >= 0 else spans


def clause_ends(line: str) -> list[int]:
    """The position of each clause's last character (``clause_spans``)."""
    return [end - 1 for _, end in clause_spans(line)]


def hoof_pattern(n: int, lower: bool = False) -> list[Tone]:
    """马蹄韵's clause-end tones for a line of ``n`` clauses: counted back from the last clause,
    仄, 平平, 仄仄, 平平 ... in the upper line (仄顶仄，平顶平), each one opposed in the lower."""
    upper = [Tone.OBLIQUE if ((n - k) // 2) % 2 == 0 else Tone.LEVEL for k in range(n)]
    return [Tone.LEVEL if t == Tone.OBLIQUE else Tone.OBLIQUE for t in upper] if lower else upper


def hoof_ends(tones: Sequence[Tone], line: str, lower: bool = False) -> list[tuple[int, Tone, bool | None]]:
    """(position, wanted tone, kept) of each clause end of a line of two or more clauses (none
    for one clause); kept is None where the tone is unknown (an either-tone reading keeps it)."""
    ends = clause_ends(line)
    if len(ends) < 2:
        return []
    wanted = hoof_pattern(len(ends), lower)
    return [(p, w, bool(tones[p] & w) if tones[p] else None) for p, w in zip(ends, wanted, strict=True)]


def verdict(kept: Iterable[bool | None]) -> bool | None:
    """False if one is broken, else None if one is unknown (or there are none), else True."""
    seen = list(kept)
    if any(k is False for k in seen):
        return False
    return None if not seen or any(k is None for k in seen) else True


def horse_hoof(
    upper_tones: Sequence[Tone], lower_tones: Sequence[Tone], upper: str, lower: str
) -> bool | None:
    """马蹄韵 (docs/COUPLET_RULES.md): both lines' clause ends keep the pattern; None for one
    clause, clause counts that differ, or an unknown tone at a clause end."""
    up, low = hoof_ends(upper_tones, upper), hoof_ends(lower_tones, lower, lower=True)
    if not up or len(up) != len(low):
        return None
    return verdict(kept for _, _, kept in up + low)


@dataclass(frozen=True)
class RuleReport:
    length: bool
    punctuation: bool
    repeats: bool
    no_reuse: bool
    tone_end: bool | None
    rhythm: float | None
    no_three_level_tail: bool
    horse_hoof: bool | None  # 马蹄韵: None for one clause (or an unknown tone)

    @property
    def hard_ok(self) -> bool:
        return all(getattr(self, name) for name in HARD_RULES)

    def as_dict(self) -> dict[str, bool | float | None]:
        return dict(vars(self))  # (flat fields: dataclasses.asdict's deep copy is 10x slower)


def check(
    upper: str, lower: str, mode: str = "modern", upper_tones: Sequence[Tone] | None = None
) -> RuleReport:
    """Every rule of docs/COUPLET_RULES.md for one pair. ``upper_tones``: ``line_tones(upper,
    mode)`` when the caller has read it already (the decoder reads it once per request and
    reports every candidate with it)."""
    if len(upper) != len(lower):
        return RuleReport(False, False, False, no_reuse(upper, lower), None, None, True, None)
    ut = line_tones(upper, mode) if upper_tones is None else list(upper_tones)
    lt = line_tones(lower, mode)
    return RuleReport(
        length=True,
        punctuation=punctuation_mirrored(upper, lower),
        repeats=repeats_mirrored(upper, lower),
        no_reuse=no_reuse(upper, lower),
        tone_end=tone_end_ok(ut, lt, upper, lower),
        rhythm=rhythm_share(ut, lt, upper),
        no_three_level_tail=no_three_level_tail(lt),
        horse_hoof=horse_hoof(ut, lt, upper, lower),
    )


def check_answer(
    given: str,
    written: str,
    mode: str = "modern",
    given_tones: Sequence[Tone] | None = None,
    reverse: bool = False,
) -> RuleReport:
    """``check`` of a line the decoder wrote for the line it was given: ``written`` is the
    lower line of ``given``, or with ``reverse`` (下联求上联) its upper line, so the pair is
    checked as (written, given)."""
    return check(written, given, mode) if reverse else check(given, written, mode, given_tones)


def rule_faults(
    upper: str, lower: str, report: RuleReport, ut: Sequence[Tone], lt: Sequence[Tone]
) -> dict[str, list[int]]:
    """Where each rule of ``report`` (``check(upper, lower)``; ``ut``, ``lt``: the lines' tones) is
    broken: character positions from 0, each hard rule's from its ``*_faults`` function; the
    check of a couplet (duilian/check.py) and its suggestions (duilian/suggest.py) read them."""
    n = min(len(upper), len(lower))
    where = {
        "length": [] if report.length else [n],
        "punctuation": punctuation_faults(upper, lower),
        "repeats": repeat_faults(upper, lower),
        "no_reuse": reused_positions(upper, lower),
        "tone_end": [],
        "horse_hoof": [],
        "rhythm": [],
        "no_three_level_tail": [] if report.no_three_level_tail else list(range(len(lower) - 3, len(lower))),
    }
    if report.tone_end is False:
        where["tone_end"] = [max(i for i, ch in enumerate(lower) if not is_punct(ch))]
    if report.horse_hoof is False:
        ends = hoof_ends(ut, upper) + hoof_ends(lt, lower, lower=True)
        where["horse_hoof"] = sorted({p for p, _, kept in ends if kept is False})
    if report.rhythm is not None:
        where["rhythm"] = [
            i for i in rhythm_positions(upper) if ut[i] and lt[i] and not opposed(ut[i], lt[i])
        ]
    return where


def reads_reversed(given_end: Tone, reverse: bool = False) -> bool:
    """Whether the given line probably stands on the other side of its couplet: an upper line
    that ends level (平) reads like a lower line; with ``reverse``, a lower line that ends
    oblique (仄) reads like an upper line."""
    return given_end == (Tone.OBLIQUE if reverse else Tone.LEVEL)
