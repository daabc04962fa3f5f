"""The couplet rules of docs/COUPLET_RULES.md as checks on a finished pair of strings.

The decoder enforces the same rules during search (model/decoding/score_rules.py); these checks are
what evaluation, the API's per-candidate report and the tests use to verify the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from data.text import clauses, is_han, is_punct, repeat_pattern
from data.tones import Tone, line_tones, opposed, wanted_end

HARD_RULES = ("length", "punctuation", "repeats", "no_reuse")


def same_length(upper: str, lower: str) -> bool:
    return len(upper) == len(lower)


def punctuation_mirrored(upper: str, lower: str) -> bool:
    """The same mark at every punctuation position of the upper line, and none elsewhere."""
    if len(upper) != len(lower):
        return False
    return all((is_punct(u) or is_punct(w)) <= (u == w) for u, w in zip(upper, lower, strict=True))


def repeats_mirrored(upper: str, lower: str) -> bool:
    return repeat_pattern(upper) == repeat_pattern(lower)


def no_reuse(upper: str, lower: str) -> bool:
    han = {ch for ch in upper if is_han(ch)}
    return not any(ch in han for ch in lower)


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


@dataclass(frozen=True)
class RuleReport:
    length: bool
    punctuation: bool
    repeats: bool
    no_reuse: bool
    tone_end: bool | None
    rhythm: float | None
    no_three_level_tail: bool

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
        return RuleReport(False, False, False, no_reuse(upper, lower), None, None, True)
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


def reads_reversed(given_end: Tone, reverse: bool = False) -> bool:
    """Whether the given line probably stands on the other side of its couplet: an upper line
    that ends level (平) reads like a lower line; with ``reverse``, a lower line that ends
    oblique (仄) reads like an upper line."""
    return given_end == (Tone.OBLIQUE if reverse else Tone.LEVEL)
