"""The couplet rules as small functions on log-probabilities, for the beam search.

A request is first compiled into a :class:`Plan` (model/decoding/plan.py). Plans of one
length are then turned into rules, each a callable
``rule(scores (B, V), step) -> scores (B, V)`` in the spirit of Hugging Face's
``LogitsProcessor``: forbidden tokens get ``-inf``, preferences add a bonus or penalty.

Two kinds of rule:
- :class:`PositionRule`: depends only on the request and the position, so it is
  precomputed once per request as a table ``(N, L+1, V)``; the decoder sums these
  tables into one and adds one row per step (no per-step work for them at all);
- step rules (:class:`RepeatsMirrored`, :class:`RequiredChars`, :class:`NoThreeLevelTail`)
  look at the prefix each beam has chosen; they are vectorised over beams and vocabulary.
  ``rule.on_columns(ids)`` gives the same rule over a shortlist: scores (B, M) whose
  column j of request n is the token ``ids[n, j]`` (the search's tokens are then columns).

Arrays are numpy's: scores float32, tokens and rows int64. A rule may change the scores it
is given in place (the search hands each step's rules an array of their own) and returns
the result.

Shapes: N requests, K beams per request, B = N*K rows, L line length, V vocabulary,
R required characters. Position ``L`` is the end of sequence.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import numpy as np

from data.rules import rhythm_positions
from data.text import is_punct
from data.tones import Tone
from data.vocab import EOS_ID, PAD_ID, UNK_ID
from model.decoding.plan import Plan
from model.decoding.vocab_tables import NEG_INF, VocabTables

# ---- the rules ------------------------------------------------------------------------


@dataclass
class Step:
    """Where the search is: ``pos`` being chosen, the ``prefix`` (B, pos) chosen so far,
    and ``row`` (B,) the request each row belongs to."""

    pos: int
    prefix: np.ndarray
    row: np.ndarray


class StepRule(Protocol):
    """A rule that looks at the prefix each beam has chosen: ``rule(scores (B, V), step)``.
    ``on_columns(ids)`` is the same rule over a shortlist's columns. A rule with ``n_banks``
    above 0 also sorts the continuations into banks (``banks``) over which the search shares
    its beam out (search.BankedBeamSearch)."""

    @property
    def n_banks(self) -> int: ...

    def __call__(self, scores: np.ndarray, step: Step) -> np.ndarray: ...

    def on_columns(self, ids: np.ndarray) -> StepRule: ...

    def banks(self, step: Step, size: int) -> np.ndarray: ...


class StepRuleBase:
    """The defaults of :class:`StepRule`: no banks; over columns, the rule as it is."""

    @property
    def n_banks(self) -> int:
        return 0

    def on_columns(self, ids: np.ndarray) -> StepRule:
        return cast(StepRule, self)

    def banks(self, step: Step, size: int) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} has no banks")


class PositionRule:
    """A rule that depends only on the request and the position: one table per request."""

    def __init__(self, plans: Sequence[Plan], tables: VocabTables) -> None:
        self.plans, self.tables = list(plans), tables
        self.length = _same_length(plans)
        self._table: np.ndarray | None = None

    def add_to(self, table: np.ndarray) -> None:
        """Apply this rule to ``table`` (N, L+1, V) of additive scores, in place."""
        raise NotImplementedError

    def table(self) -> np.ndarray:
        if self._table is None:
            self._table = np.zeros((len(self.plans), self.length + 1, self.tables.size), np.float32)
            self.add_to(self._table)
        return self._table

    def __call__(self, scores: np.ndarray, step: Step) -> np.ndarray:
        return scores + self.table()[step.row, step.pos]  # (B, V)


def _same_length(plans: Sequence[Plan]) -> int:
    lengths = {p.length for p in plans}
    if len(lengths) != 1:
        raise ValueError(f"a batch of rules needs upper lines of one length, got {sorted(lengths)}")
    return lengths.pop()


def _force(row: np.ndarray, token: int) -> None:
    """Only ``token`` stays possible in this (V,) row of a table (a view: changed in place)."""
    keep = row[token]
    row.fill(NEG_INF)
    row[token] = keep


class SpecialTokens(PositionRule):
    """pad, bos, unk (and whitespace pieces) are never generated; unk only stands in for
    an upper-line punctuation mark the vocabulary lacks, which the text then mirrors."""

    def add_to(self, table: np.ndarray) -> None:
        table[:, :, self.tables.ids("never")] = NEG_INF
        for n, plan in enumerate(self.plans):
            for pos, tok in enumerate(plan.punct):
                if tok == UNK_ID:
                    table[n, pos, UNK_ID] = 0.0


class ExactLength(PositionRule):
    """End of sequence only after the last position, and forced there."""

    def add_to(self, table: np.ndarray) -> None:
        table[:, : self.length, EOS_ID] = NEG_INF
        keep = table[:, self.length, EOS_ID].copy()
        table[:, self.length] = NEG_INF
        table[:, self.length, EOS_ID] = keep


class PunctuationMirrored(PositionRule):
    """The upper line's mark at its positions, and no punctuation anywhere else."""

    def add_to(self, table: np.ndarray) -> None:
        marks = [
            (n, pos, tok) for n, p in enumerate(self.plans) for pos, tok in enumerate(p.punct) if tok >= 0
        ]
        keep = [float(table[n, pos, tok]) for n, pos, tok in marks]  # before the marks' columns go
        table[:, : self.length, self.tables.ids("punct")] = NEG_INF
        for (n, pos, tok), value in zip(marks, keep, strict=True):
            table[n, pos] = NEG_INF
            table[n, pos, tok] = value


class NoReuse(PositionRule):
    """None of the upper line's Han characters."""

    def add_to(self, table: np.ndarray) -> None:
        for n, plan in enumerate(self.plans):
            if plan.upper_ids:
                table[n, : self.length, sorted(plan.upper_ids)] = NEG_INF


class ToneEnd(PositionRule):
    """The lower line ends level after an oblique end and oblique after a level one; the
    rule sits at the first position of the last character's repeat group."""

    def add_to(self, table: np.ndarray) -> None:
        for n, plan in enumerate(self.plans):
            if plan.end_pos >= 0:
                table[n, plan.end_pos, ~self.tables.end_ok(plan.mode, plan.want_end)] = NEG_INF


class HorseHoof(PositionRule):
    """马蹄韵 (data.rules.horse_hoof), where the given line keeps it: each clause end of the line
    written (but the last, ``ToneEnd``'s) takes the tone the pattern gives it (``Plan.hoof``)."""

    def add_to(self, table: np.ndarray) -> None:
        for n, plan in enumerate(self.plans):
            for pos, want in plan.hoof:
                table[n, pos, ~self.tables.end_ok(plan.mode, want)] = NEG_INF


class Locks(PositionRule):
    """The user's characters at the locked positions (a pattern such as ``__春___``, 藏头);
    with the rules on, a locked character appears nowhere else (repeats must mirror)."""

    def add_to(self, table: np.ndarray) -> None:
        for n, plan in enumerate(self.plans):
            locked = {t for t in plan.lock if t >= 0}
            for pos, tok in enumerate(plan.lock):
                if tok >= 0:
                    _force(table[n, pos], tok)
                elif plan.rules and locked:
                    table[n, pos, sorted(locked)] = NEG_INF


class Rhythm(PositionRule):
    """Preference: at the rhythm positions (2nd, 4th ... of each clause and clause ends)
    a character whose tone equals the upper's costs ``weight``."""

    def __init__(self, plans: Sequence[Plan], tables: VocabTables, weight: float) -> None:
        super().__init__(plans, tables)
        self.weight = weight

    def add_to(self, table: np.ndarray) -> None:
        for n, plan in enumerate(self.plans):
            for pos in rhythm_positions(plan.upper):
                tone = plan.upper_tones[pos]
                if tone in (Tone.LEVEL, Tone.OBLIQUE):
                    table[n, pos] -= np.float32(self.weight) * self.tables.has_tone(plan.mode, tone)


class RepeatsMirrored(StepRuleBase):
    """Where the upper line repeats a character, the lower repeats its own; where the upper
    has a new character, the lower may not repeat any earlier one."""

    def __init__(self, plans: Sequence[Plan]) -> None:
        self.copy_of = np.array([p.copy_of for p in plans], dtype=np.int64)  # (N, L)
        self.new = np.array(
            [[c < 0 and t < 0 for c, t in zip(p.copy_of, p.punct, strict=True)] for p in plans], dtype=bool
        )
        self.all_new: list[bool] = np.asarray(
            self.new.all(0)
        ).tolist()  # per position: every request has a new character

    def __call__(self, scores: np.ndarray, step: Step) -> np.ndarray:
        if step.pos == 0 or step.pos >= self.copy_of.shape[1]:
            return scores
        if self.all_new[step.pos]:  # the common case, in one operation: no earlier character again
            np.put_along_axis(scores, step.prefix, NEG_INF, 1)
            return scores
        src = self.copy_of[step.row, step.pos]  # (B,)
        new = self.new[step.row, step.pos][:, None]  # (B, 1)
        # (B, pos) work only: overwrite the prefix's tokens, -inf on rows with a new character
        earlier = np.where(new, np.float32(NEG_INF), np.take_along_axis(scores, step.prefix, 1))  # (B, pos)
        np.put_along_axis(scores, step.prefix, earlier, 1)
        copy = src >= 0  # (B,)
        if copy.any():
            tok = np.take_along_axis(step.prefix, np.maximum(src, 0)[:, None], 1)  # (B, 1)
            keep = np.take_along_axis(scores, tok, 1)  # (B, 1)
            scores[copy] = NEG_INF
            np.put_along_axis(scores, tok, keep, 1)  # (rows without a copy: their own value again)
        return scores

    # on_columns: the rule as it is (it compares the chosen tokens with each other only)


class RequiredChars(StepRuleBase):
    """Each required character (嵌字) appears somewhere. At a free position a beam may
    skip the required ones only while those still missing fit in the free positions left
    (one of which may be the tone-restricted end), so no beam runs into a dead end."""

    def __init__(self, plans: Sequence[Plan], tables: VocabTables) -> None:
        r = max(len(p.required) for p in plans)
        length = _same_length(plans)
        self.ids = np.array(
            [list(p.required) + [PAD_ID] * (r - len(p.required)) for p in plans], dtype=np.int64
        ).reshape(len(plans), r)  # (N, R)
        self.valid = np.array([[i < len(p.required) for i in range(r)] for p in plans], dtype=bool).reshape(
            len(plans), r
        )  # (N, R)
        self.free = np.array([p.free for p in plans], dtype=bool)  # (N, L)
        left = [[sum(p.free[q] for q in range(pos + 1, length)) for pos in range(length)] for p in plans]
        self.left = np.array(left, dtype=np.int64)  # (N, L) free positions after this one
        self.end_after = np.array(
            [
                [p.end_pos >= 0 and pos < p.end_pos and p.free[p.end_pos] for pos in range(length)]
                for p in plans
            ],
            dtype=bool,
        )  # (N, L) the tone-restricted end is still to come, and free
        self.end_ok = np.stack(
            [tables.end_ok(p.mode, p.want_end)[self.ids[n]] for n, p in enumerate(plans)]
        )  # (N, R) the required character may end the line

    def __call__(self, scores: np.ndarray, step: Step) -> np.ndarray:
        if self.ids.shape[1] == 0 or step.pos >= self.free.shape[1]:
            return scores
        ids = self.ids[step.row]  # (B, R)
        placed = (step.prefix[:, :, None] == ids[:, None, :]).any(1)  # (B, R)
        missing = self.valid[step.row] & ~placed  # (B, R)
        left = self.left[step.row, step.pos][:, None]  # (B, 1)
        end_after = self.end_after[step.row, step.pos][:, None]  # (B, 1)
        end_ok = self.end_ok[step.row]  # (B, R)
        m = missing.sum(1, keepdims=True)  # (B, 1)
        e = (missing & end_ok).sum(1, keepdims=True)  # (B, 1) missing ones that could end the line

        def fits(count: np.ndarray, enders: np.ndarray) -> np.ndarray:
            return (count <= left) & (~end_after | (count < left) | (enders > 0))

        skip_ok = fits(m, e)[:, 0] | ~self.free[step.row, step.pos]  # (B,)
        place_ok = missing & fits(m - 1, e - end_ok)  # (B, R)
        given = np.take_along_axis(scores, ids, 1)  # (B, R) before the rows are blanked
        scores[~skip_ok] = NEG_INF
        placing = np.where(place_ok, given, np.float32(NEG_INF))  # (B, R)
        keep = np.where(missing, placing, np.take_along_axis(scores, ids, 1))
        np.put_along_axis(scores, ids, keep, 1)
        return scores

    def on_columns(self, ids: np.ndarray) -> RequiredChars:
        """Each required character's column in its request's list; the padding of requests
        with fewer goes to the end-of-sequence column (-inf before the end, as PAD's is)."""
        hit = self.ids[:, :, None] == ids[:, None, :]  # (N, R, M)
        eos = ids == EOS_ID  # (N, M)
        if not (hit.any(2) | ~self.valid).all() or not eos.any(1).all():
            raise ValueError("a shortlist must hold every required character and the end of sequence")
        out = copy.copy(self)
        out.ids = np.where(self.valid, hit.argmax(2), eos.argmax(1)[:, None])
        return out

    @property
    def n_banks(self) -> int:
        return self.ids.shape[1] + 1

    def banks(self, step: Step, size: int) -> np.ndarray:
        """(B, V) how many required characters a beam holds after taking each token: the
        search keeps beams of every count (dynamic beam allocation, Post & Vilar 2018), so
        that placing a costly required character early is not always outranked."""
        ids, valid = self.ids[step.row], self.valid[step.row]  # (B, R)
        placed = (step.prefix[:, :, None] == ids[:, None, :]).any(1) & valid  # (B, R)
        # (the padding of rows with fewer required characters gains nothing; its column, PAD or
        # the end of sequence, is never a required character's)
        gain = np.zeros((ids.shape[0], size), dtype=np.int64)
        np.put_along_axis(gain, ids, valid & ~placed, 1)
        return placed.sum(1, keepdims=True) + gain  # (B, V)


class NoThreeLevelTail(StepRuleBase):
    """Preference against three level tones at the end (三平尾): a level character costs
    ``weight`` at the last position after two level ones, and at the second-to-last after
    a level one when the end is bound to be level."""

    def __init__(self, plans: Sequence[Plan], tables: VocabTables, weight: float) -> None:
        self.length = _same_length(plans)
        self.weight = weight
        self.level = np.stack([tables.level(p.mode) for p in plans])  # (N, V)
        self.level_end = np.array(
            [p.end_pos >= 0 and p.want_end == Tone.LEVEL and not is_punct(p.upper[-1]) for p in plans],
            dtype=bool,
        )  # (N,) the last character is bound to be level (it carries the tone-end rule)

    def __call__(self, scores: np.ndarray, step: Step) -> np.ndarray:
        n, pos = self.length, step.pos
        if n < 3 or pos not in (n - 2, n - 1):
            return scores
        level = self.level[step.row]  # (B, V)
        before = np.take_along_axis(level, step.prefix[:, n - 3 : pos], 1)  # (B, 1 or 2) earlier tail tones
        hit = np.asarray(before.all(1) & (self.level_end[step.row] if pos == n - 2 else True))  # (B,)
        return scores - np.float32(self.weight) * (level & hit[:, None]).astype(np.float32)

    def on_columns(self, ids: np.ndarray) -> NoThreeLevelTail:
        out = copy.copy(self)
        out.level = np.take_along_axis(self.level, ids, 1)  # (N, M)
        return out


# ---- assembling the list ---------------------------------------------------------------


@dataclass(frozen=True)
class Weights:
    rhythm: float = 1.0
    three_level_tail: float = 1.0


def build_rules(
    plans: Sequence[Plan], tables: VocabTables, weights: Weights
) -> tuple[list[PositionRule], list[StepRule]]:
    """The position rules and the step rules for plans of one length."""
    position: list[PositionRule] = [SpecialTokens(plans, tables), ExactLength(plans, tables)]
    stepwise: list[StepRule] = []
    if plans[0].rules:
        position += [PunctuationMirrored(plans, tables), NoReuse(plans, tables), ToneEnd(plans, tables)]
        if any(p.hoof for p in plans):
            position.append(HorseHoof(plans, tables))
        if weights.rhythm:
            position.append(Rhythm(plans, tables, weights.rhythm))
        stepwise.append(RepeatsMirrored(plans))
        if weights.three_level_tail:
            stepwise.append(NoThreeLevelTail(plans, tables, weights.three_level_tail))
    position.append(Locks(plans, tables))
    if any(p.required for p in plans):
        stepwise.append(RequiredChars(plans, tables))
    return position, stepwise


def fuse(rules: Sequence[PositionRule], n: int, length: int, size: int) -> np.ndarray:
    """One (N, L+1, V) float32 table: the sum of every position rule's."""
    table = np.zeros((n, length + 1, size), np.float32)
    for rule in rules:
        rule.add_to(table)
    return table
