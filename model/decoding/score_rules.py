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

Shapes: N requests, K beams per request, B = N*K rows, L line length, V vocabulary,
R required characters. Position ``L`` is the end of sequence.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import torch
from torch import Tensor

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
    prefix: Tensor
    row: Tensor


class StepRule(Protocol):
    """A rule that looks at the prefix each beam has chosen: ``rule(scores (B, V), step)``.
    ``on_columns(ids)`` is the same rule over a shortlist's columns. A rule with ``n_banks``
    above 0 also sorts the continuations into banks (``banks``) over which the search shares
    its beam out (search.BankedBeamSearch)."""

    @property
    def n_banks(self) -> int: ...

    def __call__(self, scores: Tensor, step: Step) -> Tensor: ...

    def on_columns(self, ids: Tensor) -> StepRule: ...

    def banks(self, step: Step, size: int) -> Tensor: ...


class StepRuleBase:
    """The defaults of :class:`StepRule`: no banks; over columns, the rule as it is."""

    @property
    def n_banks(self) -> int:
        return 0

    def on_columns(self, ids: Tensor) -> StepRule:
        return cast(StepRule, self)

    def banks(self, step: Step, size: int) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no banks")


class PositionRule:
    """A rule that depends only on the request and the position: one table per request."""

    def __init__(self, plans: Sequence[Plan], tables: VocabTables) -> None:
        self.plans, self.tables = list(plans), tables
        self.length = _same_length(plans)
        self._table: Tensor | None = None

    def add_to(self, table: Tensor) -> None:
        """Apply this rule to ``table`` (N, L+1, V) of additive scores, in place."""
        raise NotImplementedError

    def table(self) -> Tensor:
        if self._table is None:
            self._table = torch.zeros(len(self.plans), self.length + 1, self.tables.size)
            self.add_to(self._table)
        return self._table

    def __call__(self, scores: Tensor, step: Step) -> Tensor:
        return scores + self.table()[step.row, step.pos]  # (B, V)


def _same_length(plans: Sequence[Plan]) -> int:
    lengths = {p.length for p in plans}
    if len(lengths) != 1:
        raise ValueError(f"a batch of rules needs upper lines of one length, got {sorted(lengths)}")
    return lengths.pop()


def _force(row: Tensor, token: int) -> None:
    """Only ``token`` stays possible in this (V,) row of a table."""
    keep = row[token].clone()
    row.fill_(NEG_INF)
    row[token] = keep


class SpecialTokens(PositionRule):
    """pad, bos, unk (and whitespace pieces) are never generated; unk only stands in for
    an upper-line punctuation mark the vocabulary lacks, which the text then mirrors."""

    def add_to(self, table: Tensor) -> None:
        table[:, :, self.tables.ids("never")] = NEG_INF
        for n, plan in enumerate(self.plans):
            for pos, tok in enumerate(plan.punct):
                if tok == UNK_ID:
                    table[n, pos, UNK_ID] = 0.0


class ExactLength(PositionRule):
    """End of sequence only after the last position, and forced there."""

    def add_to(self, table: Tensor) -> None:
        table[:, : self.length, EOS_ID] = NEG_INF
        keep = table[:, self.length, EOS_ID].clone()
        table[:, self.length] = NEG_INF
        table[:, self.length, EOS_ID] = keep


class PunctuationMirrored(PositionRule):
    """The upper line's mark at its positions, and no punctuation anywhere else."""

    def add_to(self, table: Tensor) -> None:
        marks = [
            (n, pos, tok) for n, p in enumerate(self.plans) for pos, tok in enumerate(p.punct) if tok >= 0
        ]
        keep = [table[n, pos, tok].item() for n, pos, tok in marks]  # before the marks' columns go
        table[:, : self.length, self.tables.ids("punct")] = NEG_INF
        for (n, pos, tok), value in zip(marks, keep, strict=True):
            table[n, pos] = NEG_INF
            table[n, pos, tok] = value


class NoReuse(PositionRule):
    """None of the upper line's Han characters."""

    def add_to(self, table: Tensor) -> None:
        for n, plan in enumerate(self.plans):
            if plan.upper_ids:
                table[n, : self.length, sorted(plan.upper_ids)] = NEG_INF


class ToneEnd(PositionRule):
    """The lower line ends level after an oblique end and oblique after a level one; the
    rule sits at the first position of the last character's repeat group."""

    def add_to(self, table: Tensor) -> None:
        for n, plan in enumerate(self.plans):
            if plan.end_pos >= 0:
                table[n, plan.end_pos].masked_fill_(~self.tables.end_ok(plan.mode, plan.want_end), NEG_INF)


class Locks(PositionRule):
    """The user's characters at the locked positions (a pattern such as ``__春___``, 藏头);
    with the rules on, a locked character appears nowhere else (repeats must mirror)."""

    def add_to(self, table: Tensor) -> None:
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

    def add_to(self, table: Tensor) -> None:
        for n, plan in enumerate(self.plans):
            for pos in rhythm_positions(plan.upper):
                tone = plan.upper_tones[pos]
                if tone in (Tone.LEVEL, Tone.OBLIQUE):
                    table[n, pos].sub_(self.tables.has_tone(plan.mode, tone), alpha=self.weight)


class RepeatsMirrored(StepRuleBase):
    """Where the upper line repeats a character, the lower repeats its own; where the upper
    has a new character, the lower may not repeat any earlier one."""

    def __init__(self, plans: Sequence[Plan]) -> None:
        self.copy_of = torch.tensor([p.copy_of for p in plans])  # (N, L)
        self.new = torch.tensor(
            [[c < 0 and t < 0 for c, t in zip(p.copy_of, p.punct, strict=True)] for p in plans]
        )
        self.all_new = self.new.all(0).tolist()  # per position: every request has a new character

    def __call__(self, scores: Tensor, step: Step) -> Tensor:
        if step.pos == 0 or step.pos >= self.copy_of.size(1):
            return scores
        if self.all_new[step.pos]:  # the common case, in one operation: no earlier character again
            return scores.scatter(1, step.prefix, NEG_INF)
        src = self.copy_of[step.row, step.pos]  # (B,)
        new = self.new[step.row, step.pos][:, None]  # (B, 1)
        # (B, pos) work only: overwrite the prefix's tokens, -inf on rows with a new character
        earlier = torch.where(new, NEG_INF, scores.gather(1, step.prefix))  # (B, pos)
        scores = scores.scatter(1, step.prefix, earlier)
        copy = (src >= 0)[:, None]  # (B, 1)
        if bool(copy.any()):
            tok = step.prefix.gather(1, src.clamp(min=0)[:, None])  # (B, 1)
            keep = scores.gather(1, tok)  # (B, 1)
            scores = scores.masked_fill(copy, NEG_INF).scatter_(
                1, tok, torch.where(copy, keep, scores.gather(1, tok))
            )
        return scores

    # on_columns: the rule as it is (it compares the chosen tokens with each other only)


class RequiredChars(StepRuleBase):
    """Each required character (嵌字) appears somewhere. At a free position a beam may
    skip the required ones only while those still missing fit in the free positions left
    (one of which may be the tone-restricted end), so no beam runs into a dead end."""

    def __init__(self, plans: Sequence[Plan], tables: VocabTables) -> None:
        r = max(len(p.required) for p in plans)
        length = _same_length(plans)
        self.ids = torch.tensor(
            [list(p.required) + [PAD_ID] * (r - len(p.required)) for p in plans]
        )  # (N, R)
        self.valid = torch.tensor([[i < len(p.required) for i in range(r)] for p in plans])  # (N, R)
        self.free = torch.tensor([p.free for p in plans])  # (N, L)
        left = [[sum(p.free[q] for q in range(pos + 1, length)) for pos in range(length)] for p in plans]
        self.left = torch.tensor(left)  # (N, L) free positions after this one
        self.end_after = torch.tensor(
            [
                [p.end_pos >= 0 and pos < p.end_pos and p.free[p.end_pos] for pos in range(length)]
                for p in plans
            ]
        )  # (N, L) the tone-restricted end is still to come, and free
        self.end_ok = torch.stack(
            [tables.end_ok(p.mode, p.want_end)[self.ids[n]] for n, p in enumerate(plans)]
        )  # (N, R) the required character may end the line

    def __call__(self, scores: Tensor, step: Step) -> Tensor:
        if self.ids.size(1) == 0 or step.pos >= self.free.size(1):
            return scores
        ids = self.ids[step.row]  # (B, R)
        placed = (step.prefix[:, :, None] == ids[:, None, :]).any(1)  # (B, R)
        missing = self.valid[step.row] & ~placed  # (B, R)
        left = self.left[step.row, step.pos][:, None]  # (B, 1)
        end_after = self.end_after[step.row, step.pos][:, None]  # (B, 1)
        end_ok = self.end_ok[step.row]  # (B, R)
        m = missing.sum(1, keepdim=True)  # (B, 1)
        e = (missing & end_ok).sum(1, keepdim=True)  # (B, 1) missing ones that could end the line

        def fits(count: Tensor, enders: Tensor) -> Tensor:
            return (count <= left) & (~end_after | (count < left) | (enders > 0))

        skip_ok = fits(m, e)[:, 0] | ~self.free[step.row, step.pos]  # (B,)
        place_ok = missing & fits(m - 1, e - end_ok.long())  # (B, R)
        out = scores.masked_fill(~skip_ok[:, None], NEG_INF)
        placing = torch.where(place_ok, scores.gather(1, ids), NEG_INF)  # (B, R)
        keep = torch.where(missing, placing, out.gather(1, ids))
        return out.scatter(1, ids, keep)

    def on_columns(self, ids: Tensor) -> RequiredChars:
        """Each required character's column in its request's list; the padding of requests
        with fewer goes to the end-of-sequence column (-inf before the end, as PAD's is)."""
        hit = self.ids[:, :, None] == ids[:, None, :]  # (N, R, M)
        eos = ids == EOS_ID  # (N, M)
        if not bool((hit.any(2) | ~self.valid).all()) or not bool(eos.any(1).all()):
            raise ValueError("a shortlist must hold every required character and the end of sequence")
        out = copy.copy(self)
        out.ids = torch.where(self.valid, hit.int().argmax(2), eos.int().argmax(1, keepdim=True))
        return out

    @property
    def n_banks(self) -> int:
        return self.ids.size(1) + 1

    def banks(self, step: Step, size: int) -> Tensor:
        """(B, V) how many required characters a beam holds after taking each token: the
        search keeps beams of every count (dynamic beam allocation, Post & Vilar 2018), so
        that placing a costly required character early is not always outranked."""
        ids, valid = self.ids[step.row], self.valid[step.row]  # (B, R)
        placed = (step.prefix[:, :, None] == ids[:, None, :]).any(1) & valid  # (B, R)
        # (the padding of rows with fewer required characters gains nothing)
        gain = torch.zeros(ids.size(0), size, dtype=torch.long).scatter_(1, ids, (valid & ~placed).long())
        return placed.sum(1, keepdim=True) + gain  # (B, V)


class NoThreeLevelTail(StepRuleBase):
    """Preference against three level tones at the end (三平尾): a level character costs
    ``weight`` at the last position after two level ones, and at the second-to-last after
    a level one when the end is bound to be level."""

    def __init__(self, plans: Sequence[Plan], tables: VocabTables, weight: float) -> None:
        self.length = _same_length(plans)
        self.weight = weight
        self.level = torch.stack([tables.level(p.mode) for p in plans])  # (N, V)
        self.level_end = torch.tensor(
            [p.end_pos >= 0 and p.want_end == Tone.LEVEL and not is_punct(p.upper[-1]) for p in plans]
        )  # (N,) the last character is bound to be level (it carries the tone-end rule)

    def __call__(self, scores: Tensor, step: Step) -> Tensor:
        n, pos = self.length, step.pos
        if n < 3 or pos not in (n - 2, n - 1):
            return scores
        level = self.level[step.row]  # (B, V)
        before = level.gather(1, step.prefix[:, n - 3 : pos])  # (B, 1 or 2) the earlier tail tones
        hit = before.all(1) & (self.level_end[step.row] if pos == n - 2 else True)  # (B,)
        return scores - self.weight * (level & hit[:, None]).to(scores.dtype)

    def on_columns(self, ids: Tensor) -> NoThreeLevelTail:
        out = copy.copy(self)
        out.level = self.level.gather(1, ids)  # (N, M)
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
        if weights.rhythm:
            position.append(Rhythm(plans, tables, weights.rhythm))
        stepwise.append(RepeatsMirrored(plans))
        if weights.three_level_tail:
            stepwise.append(NoThreeLevelTail(plans, tables, weights.three_level_tail))
    position.append(Locks(plans, tables))
    if any(p.required for p in plans):
        stepwise.append(RequiredChars(plans, tables))
    return position, stepwise


def fuse(rules: Sequence[PositionRule], n: int, length: int, size: int) -> Tensor:
    """One (N, L+1, V) table: the sum of every position rule's."""
    table = torch.zeros(n, length + 1, size)
    for rule in rules:
        rule.add_to(table)
    return table
