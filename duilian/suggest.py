"""Suggestions in the check of a couplet (issue 42): for the lower line's weakest places, a broken
rule's first, then the word pairs the pairing table scores lowest, the characters the alternatives
search puts there with the rest of the line kept (``Decoder.alternatives``, ``LoadedModel.alternatives``).

The search proposes and ranks; ``data.rules`` judges. A replacement is kept only when the line with
it mends what is weak at that place (the rule no longer broken there, or the character pairs better
with the upper line's) and breaks nothing anywhere that the line kept (no new place in any rule's
``rule_faults``). When the rest of the line breaks a rule too, the search finds no line that keeps
every rule; the place is then asked again with the rules off and judged the same way.

``plan`` says which places to ask about (or why none: ``Unsuggestable``), ``queries`` what to ask,
``assemble`` builds the answer from what the search found; ``suggest`` does the three with a model
in this process (the command line), serve/routers/check.py with the site's decode workers; all
places of a line are asked in one ``alternatives_at`` (one walk of the line, one batch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice

from data import rules
from data.pairing import PairingTable
from data.text import is_punct
from data.tones import Tone, line_tones
from duilian.check import CheckReport
from duilian.inputs import MAX_ALTERNATIVES, AlternativesQuery
from duilian.suggestions import (
    NONE_AS_GOOD,
    NONE_MENDS,
    NOT_ALIGNED,
    NOTHING_WEAK,
    Replacement,
    Suggestion,
    Suggestions,
)
from model.decoding.answer import Alternative, Alternatives
from model.decoding.plan import ConstraintError

MAX_PLACES = 3  # places of the lower line suggested for
SHOWN = 3  # replacements shown for each place
# characters described (rule report, tones, filters) at first: most places show their three
# within them; the others are described again up to MAX_ALTERNATIVES from the same scores
FIRST = 5
# characters scored whole at each place (the alternatives route scores 64): 24 keep the first
# suggestion of 64 at 93% of places in about 60% of the time (docs/MEASUREMENTS.md)
POOL = 24
WEAK_PAIR = 1.0  # a character pair the pairing table scores below this is weak (天/地 about 3)
PAIR = "pair"
# the rules one character can mend, the worst broken first (length and punctuation cannot)
MENDABLE = ("no_reuse", "repeats", "tone_end", "horse_hoof", "no_three_level_tail", "rhythm")
# a place weak only by these is mended only by a line the search ranks near the line's own: blind
# readers preferred the line as it was 2:1 where the mend cost more (docs/MEASUREMENTS.md)
SOFT = ("horse_hoof", "no_three_level_tail", "rhythm", PAIR)
NEAR = 0.03  # per character, below the line's own rank_score


class Unsuggestable(Exception):
    """No place can be suggested for (``reason``: the ``Suggestions`` answer that says why)."""

    def __init__(self, answer: Suggestions) -> None:
        super().__init__(answer.reason)
        self.answer = answer


@dataclass(frozen=True)
class Place:
    position: int
    weakness: tuple[str, ...]


def plan(check: CheckReport, pairing: PairingTable | None) -> list[Place]:
    """The weakest places of the lower line, at most ``MAX_PLACES``: where a rule is broken (the
    worst rule first, then the most rules), then the weakest word pairs (the character each scores
    lowest, below ``WEAK_PAIR``); raises ``Unsuggestable`` when the lines are not aligned."""
    broken = {r.name: r.positions for r in check.rules if r.positions and r.kept is not True}
    if "length" in broken or "punctuation" in broken:
        raise Unsuggestable(Suggestions(searched=False, reason=NOT_ALIGNED))
    upper, lower = check.upper, check.lower
    lt = line_tones(lower, check.tone_mode)
    at: dict[int, list[str]] = {}
    for name in MENDABLE:
        for p in _places(name, broken.get(name, []), lower, lt):
            at.setdefault(p, []).append(name)
    ranked = sorted(at, key=lambda p: (MENDABLE.index(at[p][0]), -len(at[p]), p))
    places = [Place(p, tuple(at[p])) for p in ranked[:MAX_PLACES]]
    if pairing is not None and len(places) < MAX_PLACES:
        weak: list[tuple[float, int]] = []
        for w in check.words:
            scores = [(pairing.get(upper[i], lower[i]), i) for i in range(w.start, w.start + len(w.upper))]
            scores = [s for s in scores if s[1] not in at and not is_punct(upper[s[1]]) and s[0] < WEAK_PAIR]
            if scores:
                weak.append(min(scores))
        places += [Place(p, (PAIR,)) for _, p in sorted(weak)[: MAX_PLACES - len(places)]]
    return places


def _places(name: str, where: list[int], lower: str, lt: list[Tone]) -> list[int]:
    """The places of the lower line one character could mend ``name`` at."""
    if name == "horse_hoof":  # the lower line's own clause ends (the upper line's are not to change)
        return [p for p, _, kept in rules.hoof_ends(lt, lower, lower=True) if kept is False]
    if name == "no_three_level_tail":  # the level ones before the end (the tone end holds the last)
        return [p for p in where[:-1] if lt[p] == Tone.LEVEL]
    return [p for p in where if not is_punct(lower[p])]


def queries(
    check: CheckReport, places: Sequence[Place], rules_on: bool = True, n: int = MAX_ALTERNATIVES
) -> list[AlternativesQuery]:
    """What to ask the alternatives search for each place (``n`` characters besides the line's own)."""
    return [
        AlternativesQuery(check.upper, check.lower, p.position, n, check.tone_mode, rules=rules_on, pool=POOL)
        for p in places
    ]


def needs_retry(found: Alternatives | ConstraintError) -> bool:
    """The search found no line keeping every rule (the rest of the line breaks one): ask again
    with the rules off, the replacements judged here all the same."""
    return isinstance(found, ConstraintError) and found.constraint == "search"


def assemble(
    check: CheckReport,
    places: Sequence[Place],
    found: Sequence[Alternatives | ConstraintError],
    pairing: PairingTable | None,
) -> Suggestions:
    """The suggestions from the search's answer for each place (or its refusal)."""
    if not places:
        return Suggestions(searched=True, reason=NOTHING_WEAK)
    judge = _Judge(check, pairing)
    return Suggestions(
        searched=True, reason=None, items=[judge.item(p, a) for p, a in zip(places, found, strict=True)]
    )


class _Judge:
    """The suggestion for each place of one checked couplet from the search's answer there."""

    def __init__(self, check: CheckReport, pairing: PairingTable | None) -> None:
        upper, lower, mode = check.upper, check.lower, check.tone_mode
        self.check, self.pairing = check, pairing
        self.before = rules.rule_faults(
            upper, lower, check.report, line_tones(upper, mode), line_tones(lower, mode)
        )
        self.words = {i: w for w in check.words for i in range(w.start, w.start + len(w.upper))}

    def item(self, place: Place, answer: Alternatives | ConstraintError) -> Suggestion:
        check, pairing, p = self.check, self.pairing, place.position
        upper, lower = check.upper, check.lower
        own = pairing.get(upper[p], lower[p]) if pairing is not None else None
        failed = isinstance(answer, ConstraintError)
        listed = [] if isinstance(answer, ConstraintError) else answer.alternatives
        positions = [p] if isinstance(answer, ConstraintError) else list(answer.positions)
        floor = _floor(place, listed)
        ranked = [a for a in listed if a.rank_score >= floor]
        judged = (_judge(check, place, positions, a, self.before, pairing) for a in ranked if not a.original)
        shown = list(islice((r for r in judged if r is not None), SHOWN))  # (judged until enough)
        word = self.words.get(p)
        return Suggestion(
            position=p,
            positions=positions,
            current=lower[p],
            weakness=list(place.weakness),
            upper_word=word.upper if word else upper[p],
            lower_word=word.lower if word else lower[p],
            pairing=_round(own),
            replacements=shown,
            note=None if shown else (str(answer) if failed else _why_none(place, listed, floor)),
        )

    @staticmethod
    def settled(place: Place, answer: Alternatives | ConstraintError, item: Suggestion) -> bool:
        """Whether ``item``, from the first characters of the list, is what the whole list gives:
        its replacements are all shown, or the list reached characters below the floor (the rest,
        ranked lower, are cut too), or there is no list."""
        if isinstance(answer, ConstraintError) or len(item.replacements) == SHOWN:
            return True
        floor = _floor(place, answer.alternatives)
        return any(not a.original and a.rank_score < floor for a in answer.alternatives)


def _floor(place: Place, listed: Sequence[Alternative]) -> float:
    """The lowest rank_score a replacement may have: near the line's own where the place is weak
    only softly and the line's own is listed (it keeps every rule), else no bound."""
    own = [a.rank_score for a in listed if a.original]
    if own and all(w in SOFT for w in place.weakness):
        return own[0] - NEAR
    return -math.inf


def _why_none(place: Place, listed: Sequence[Alternative], floor: float) -> str:
    cut = any(not a.original and a.rank_score < floor for a in listed)
    return NONE_AS_GOOD if cut else NONE_MENDS


def _judge(
    check: CheckReport,
    place: Place,
    positions: list[int],
    a: Alternative,
    before: dict[str, list[int]],
    pairing: PairingTable | None,
) -> Replacement | None:
    """``a`` as a replacement at ``place``: None when its line breaks anything the line kept
    (a new place in any rule's faults) or mends nothing that is weak there."""
    upper, mode, p = check.upper, check.tone_mode, place.position
    # (a.report is the search's check of the line: data.rules.check in the check's tone mode)
    after = rules.rule_faults(upper, a.text, a.report, line_tones(upper, mode), line_tones(a.text, mode))
    if any(set(after[name]) - set(before[name]) for name in after):
        return None
    score = pairing.get(upper[p], a.char) if pairing is not None else None
    own = pairing.get(upper[p], check.lower[p]) if pairing is not None else None
    mended = [r for r in place.weakness if r != PAIR and not set(positions) & set(after[r])]
    pairs_better = score is not None and own is not None and score > own
    if not (pairs_better if PAIR in place.weakness else mended):
        return None
    return Replacement(a.char, a.text, mended + [PAIR] * pairs_better, _round(score), round(a.rank_score, 4))


Ask = Callable[[Sequence[AlternativesQuery]], Sequence[Alternatives | ConstraintError]]


def suggest(check: CheckReport, ask: Ask, pairing: PairingTable | None) -> Suggestions:
    """The suggestions, asking ``ask`` (``LoadedModel.alternatives_at``) for all places at once:
    first for ``FIRST`` characters a place, then, for the places those did not settle, for
    ``MAX_ALTERNATIVES`` (an ``ask`` that keeps the line's scores only describes more of them:
    ``LoadedModel.suggestions``). The answer is the one all ``MAX_ALTERNATIVES`` give at once."""
    try:
        places = plan(check, pairing)
    except Unsuggestable as exc:
        return exc.answer
    if not places:
        return assemble(check, places, [], pairing)
    found = list(ask(queries(check, places, n=FIRST)))
    rules_on = [True] * len(places)
    retry = [i for i, f in enumerate(found) if needs_retry(f)]
    if retry:
        again = ask(queries(check, [places[i] for i in retry], rules_on=False, n=FIRST))
        for i, f in zip(retry, again, strict=True):
            found[i], rules_on[i] = f, False
    judge = _Judge(check, pairing)
    items = [judge.item(p, f) for p, f in zip(places, found, strict=True)]
    for rules_flag in (True, False):
        more = [
            i
            for i in range(len(places))
            if rules_on[i] == rules_flag and not judge.settled(places[i], found[i], items[i])
        ]
        if more:
            whole = ask(queries(check, [places[i] for i in more], rules_on=rules_flag))
            for i, f in zip(more, whole, strict=True):
                items[i] = judge.item(places[i], f)
    return Suggestions(searched=True, reason=None, items=items)


def _round(score: float | None) -> float | None:
    return None if score is None else round(score, 3)
