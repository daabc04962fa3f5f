"""The couplet rules as small functions on log-probabilities, for the beam search.

A request is first compiled into a :class:`Plan` (``plan_request``), which checks the
user's constraints up front and raises :class:`ConstraintError` naming the one that
cannot be met. Plans of one length are then turned into rules, each a callable
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
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from data.rules import rhythm_positions
from data.text import is_any_punct, is_han, is_punct
from data.tones import Tone, char_tone, line_tones, wanted_end
from data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab

NEG_INF = float("-inf")
FREE = frozenset("_＿")


class ConstraintError(ValueError):
    """No lower line can satisfy the constraints; ``constraint`` names the one at fault."""

    def __init__(self, constraint: str, zh: str, en: str) -> None:
        super().__init__(f"{zh} / {en}")
        self.constraint, self.zh, self.en = constraint, zh, en

    def __reduce__(self) -> tuple[type[ConstraintError], tuple[str, str, str]]:
        return ConstraintError, (self.constraint, self.zh, self.en)  # (it crosses process pools)


# ---- per-vocabulary tables, built once per decoder -----------------------------------


def _tone_tensor(pieces: Sequence[str], tone_of: Callable[[str], Tone]) -> Tensor:
    return torch.tensor([int(tone_of(p)) if len(p) == 1 else 0 for p in pieces], dtype=torch.int8)


@dataclass
class VocabTables:
    """What the rules need to know about each vocabulary entry, as (V,) tensors."""

    pieces: list[str]
    never: Tensor  # (V,) bool: special or whitespace pieces, never generated (EOS apart)
    punct: Tensor  # (V,) bool: punctuation marks
    _tones: dict[tuple[str, str], Tensor] = field(default_factory=dict)
    _masks: dict[tuple[object, ...], Tensor] = field(default_factory=dict)

    @classmethod
    def build(cls, vocab: Vocab, pieces: list[str] | None = None) -> VocabTables:
        """``pieces`` may extend the vocabulary's to the model's output size ("" = never)."""
        pieces = pieces if pieces is not None else vocab.pieces
        never = torch.tensor([len(p) != 1 or p.isspace() or p == "▁" for p in pieces])
        never[[PAD_ID, UNK_ID, BOS_ID]] = True
        never[EOS_ID] = False
        punct = torch.tensor([len(p) == 1 and is_any_punct(p) for p in pieces])
        return cls(pieces, never, punct)

    @property
    def size(self) -> int:
        return len(self.pieces)

    def tone(self, mode: str) -> Tensor:
        """(V,) int8 context-free tone class (the default reading; lenient: every reading)."""
        return self._cached("tone", mode)

    def fixed_tone(self, mode: str) -> Tensor:
        """(V,) int8 tone no phrase context can flip: the union of every reading's tone
        (a 入声 character is oblique in classical mode whatever its reading)."""
        return self._cached("fixed", mode)

    def _cached(self, kind: str, mode: str) -> Tensor:
        key = (kind, mode)
        if key not in self._tones:
            fn: Callable[[str], Tone]
            if kind == "tone":
                fn = functools.partial(char_tone, mode=mode)
            elif mode == "classical":
                fn = _classical_fixed
            else:
                fn = functools.partial(char_tone, mode="lenient")
            self._tones[key] = _tone_tensor(self.pieces, fn)
        return self._tones[key]

    def ids(self, kind: str) -> Tensor:
        """The vocabulary ids where ``never`` or ``punct`` holds: a rule that blanks a few
        columns indexes them instead of masking every entry of its table."""
        key = ("ids", kind)
        if key not in self._masks:
            self._masks[key] = getattr(self, kind).nonzero().flatten()
        return self._masks[key]

    def has_tone(self, mode: str, tone: Tone) -> Tensor:
        """(V,) float: 1 where the context-free tone class is exactly ``tone``."""
        key = ("has", mode, int(tone))
        if key not in self._masks:
            self._masks[key] = (self.tone(mode) == int(tone)).float()
        return self._masks[key]

    def level(self, mode: str) -> Tensor:
        """(V,) bool: level in the context-free reading."""
        key = ("level", mode)
        if key not in self._masks:
            self._masks[key] = self.tone(mode) == int(Tone.LEVEL)
        return self._masks[key]

    def end_ok(self, mode: str, want: Tone) -> Tensor:
        key = ("end", mode, int(want))
        if key not in self._masks:
            self._masks[key] = self._end_ok(mode, want)
        return self._masks[key]

    def _end_ok(self, mode: str, want: Tone) -> Tensor:
        """(V,) bool: characters the string check will accept as the lower line's end.

        Lenient mode accepts any reading; modern and classical modes read the line in
        phrase context, so only a character whose every reading has the wanted tone is
        safe (context may still give a neutral tone, which the check reports as unknown,
        never as wrong)."""
        if want == Tone.EITHER:
            return ~self.never
        if mode == "lenient":
            return (self.tone("lenient") & int(want)) != 0
        return self.fixed_tone(mode) == int(want)


def _classical_fixed(ch: str) -> Tone:
    if char_tone(ch, "classical") == Tone.OBLIQUE and char_tone(ch, "modern") != Tone.OBLIQUE:
        return Tone.OBLIQUE  # in the 入声 table: oblique whatever the context
    return char_tone(ch, "lenient")  # (a table character read oblique anyway lands here: safe)


# ---- the plan of one request ---------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """One upper line and its constraints, checked and resolved to positions and ids."""

    upper: str
    rules: bool  # the couplet rules on (False: exact length and user constraints only)
    mode: str
    punct: tuple[int, ...]  # (L,) id forced at a punctuation position, -1 elsewhere
    copy_of: tuple[int, ...]  # (L,) earlier position whose character is repeated here, or -1
    lock: tuple[int, ...]  # (L,) id forced by the user at this position, or -1
    upper_ids: frozenset[int]  # ids of the upper line's Han characters (no reuse)
    upper_tones: tuple[Tone, ...]
    end_pos: int  # position holding the tone-end rule (head of the last character's group), or -1
    want_end: Tone
    required: tuple[int, ...]  # ids still to place somewhere (嵌字)
    free: tuple[bool, ...]  # (L,) a position a required character may take

    @property
    def length(self) -> int:
        return len(self.upper)


def _groups(upper: str, rules: bool) -> list[int]:
    """Position of the first occurrence of each position's character (repeat groups)."""
    if not rules:
        return list(range(len(upper)))
    first: dict[str, int] = {}
    return [first.setdefault(ch, i) for i, ch in enumerate(upper)]


def _first_char(upper: str) -> int:
    """The position of the upper line's first character that is not punctuation (藏头's
    position in the lower line: an opening quote or bracket is mirrored before it)."""
    return next((i for i, ch in enumerate(upper) if not is_punct(ch)), 0)


def _parse_locks(upper: str, locks: str | None, required_first: str | None) -> dict[int, str]:
    out: dict[int, str] = {}
    if locks:
        if len(locks) != len(upper):
            raise ConstraintError(
                "locks",
                f"锁字模式长度为{len(locks)}，上联长度为{len(upper)}，二者须相等",
                f"the lock pattern has {len(locks)} characters but the upper line has {len(upper)}",
            )
        out = {i: ch for i, ch in enumerate(locks) if ch not in FREE}
    if required_first:
        if len(required_first) != 1:
            raise ConstraintError(
                "required_first", "藏头只能是一个字", "the required first character must be one character"
            )
        first = _first_char(upper)
        if out.get(first, required_first) != required_first:
            raise ConstraintError(
                "required_first",
                f"藏头字「{required_first}」与首字锁定「{out[first]}」冲突",
                f"the required first character {required_first!r} conflicts with the lock {out[first]!r}",
            )
        out[first] = required_first
    return out


def _check_lock(upper: str, pos: int, ch: str, vocab: Vocab, rules: bool, head_char: bool = False) -> None:
    """One locked character (``head_char``: 藏头's, named so in the messages)."""
    constraint = "required_first" if head_char else "locks"
    where = f"藏头字「{ch}」" if head_char else f"锁定的第{pos + 1}字「{ch}」"
    at = f"the required first character {ch!r}" if head_char else f"the lock {ch!r} at position {pos + 1}"
    if rules and is_punct(upper[pos]) and ch != upper[pos]:
        raise ConstraintError(
            constraint, f"{where}与上联该处的标点「{upper[pos]}」冲突", f"{at} conflicts with punctuation"
        )
    if rules and is_punct(upper[pos]):
        return
    if rules and is_any_punct(ch):
        raise ConstraintError(
            constraint,
            f"{where}是标点，但上联该处不是标点",
            f"{at} is punctuation where the upper has none",
        )
    if ch not in vocab:
        raise ConstraintError(constraint, f"{where}不在模型字表中", f"{at} is not in the model's vocabulary")
    if rules and is_han(ch) and ch in upper:
        raise ConstraintError(
            constraint, f"{where}在上联中出现，违反不重字", f"{at} is in the upper line (no reuse)"
        )


def _resolve_locks(upper: str, locks: dict[int, str], head: list[int], rules: bool) -> dict[int, str]:
    """Spread each lock over its repeat group; different locks in one group, or one
    character locked in two groups, break the mirrored repeats."""
    by_head: dict[int, str] = {}
    for pos, ch in sorted(locks.items()):
        h = head[pos]
        if by_head.get(h, ch) != ch:
            raise ConstraintError(
                "locks",
                f"上联第{h + 1}字与第{pos + 1}字相同，下联锁字「{by_head[h]}」「{ch}」却不同",
                f"positions {h + 1} and {pos + 1} repeat in the upper line but are locked differently",
            )
        by_head[h] = ch
    owners: dict[str, int] = {}
    for h, ch in by_head.items():
        if rules and not is_punct(upper[h]) and owners.setdefault(ch, h) != h:
            raise ConstraintError(
                "locks",
                f"锁字「{ch}」出现在上联不同字的位置上，违反叠字对应",
                f"{ch!r} is locked at positions whose upper characters differ (repeats must mirror)",
            )
    return {pos: by_head[h] for pos, h in enumerate(head) if h in by_head}


def _required_ids(
    upper: str, required: str | Sequence[str], locked: set[str], vocab: Vocab, rules: bool
) -> list[int]:
    ids: list[int] = []
    for ch in dict.fromkeys("".join(required)):
        if ch in locked or ch in FREE:
            continue
        if ch not in vocab:
            raise ConstraintError(
                "required_chars",
                f"嵌字「{ch}」不在模型字表中",
                f"the required {ch!r} is not in the vocabulary",
            )
        if is_any_punct(ch):
            raise ConstraintError(
                "required_chars", f"嵌字「{ch}」是标点", f"the required {ch!r} is punctuation"
            )
        if rules and ch in upper:
            raise ConstraintError(
                "required_chars",
                f"嵌字「{ch}」在上联中出现，违反不重字",
                f"the required {ch!r} is in the upper line (no reuse)",
            )
        ids.append(vocab.encode(ch)[0])
    return ids


def plan_request(
    upper: str,
    vocab: Vocab,
    tables: VocabTables,
    *,
    rules: bool = True,
    mode: str = "modern",
    tone_end: bool = True,
    locks: str | None = None,
    required_first: str | None = None,
    required_chars: str | Sequence[str] = (),
) -> Plan:
    """Check and resolve one request; raises ConstraintError when no line can satisfy it."""
    if not upper:
        raise ConstraintError("length", "上联为空", "the upper line is empty")
    head = _groups(upper, rules)
    raw = _parse_locks(upper, locks, required_first)
    first = _first_char(upper) if required_first else -1
    for pos, ch in raw.items():
        _check_lock(upper, pos, ch, vocab, rules, head_char=pos == first)
    lock_ch = _resolve_locks(upper, raw, head, rules)
    ids = vocab.encode(upper)
    punct = [ids[i] if rules and is_punct(ch) else -1 for i, ch in enumerate(upper)]
    lock = [vocab.encode(lock_ch[i])[0] if i in lock_ch and punct[i] < 0 else -1 for i in range(len(upper))]
    copy_of = [head[i] if rules and head[i] != i and punct[i] < 0 else -1 for i in range(len(upper))]
    tones = _upper_tones(upper, mode)
    last = max((i for i, ch in enumerate(upper) if not is_punct(ch)), default=-1)
    want = wanted_end(tones[last]) if last >= 0 else Tone.EITHER
    end_pos = head[last] if rules and tone_end and last >= 0 and want != Tone.EITHER else -1
    end_ok = tables.end_ok(mode, want)
    if end_pos >= 0:
        _check_end(end_pos, lock[end_pos], end_ok, upper, want, tables)
    free = [punct[i] < 0 and copy_of[i] < 0 and lock[i] < 0 for i in range(len(upper))]
    required = _required_ids(upper, required_chars, set(lock_ch.values()), vocab, rules)
    _check_capacity(required, free, end_pos, end_ok, tables)
    upper_ids = frozenset(i for i, ch in zip(ids, upper, strict=True) if rules and is_han(ch) and i != UNK_ID)
    _check_pool(free, upper_ids, tables)
    return Plan(
        upper, rules, mode, tuple(punct), tuple(copy_of), tuple(lock), upper_ids, tones, end_pos, want,
        tuple(required), tuple(free),
    )  # fmt: skip


def _upper_tones(upper: str, mode: str) -> tuple[Tone, ...]:
    try:
        return tuple(line_tones(upper, mode))
    except ValueError as e:  # an unknown mode, or no 入声 table for the classical one
        raise ConstraintError("tone_mode", f"声调模式「{mode}」不可用", str(e)) from e


def _check_end(pos: int, lock: int, end_ok: Tensor, upper: str, want: Tone, tables: VocabTables) -> None:
    if lock >= 0 and not bool(end_ok[lock]):
        tone = "平" if want == Tone.LEVEL else "仄"
        raise ConstraintError(
            "tone_end",
            f"锁定的「{tables.pieces[lock]}」决定了下联末字，但下联须以{tone}声收尾",
            f"the lock {tables.pieces[lock]!r} fixes the lower line's last character, whose tone must be "
            f"{'level' if want == Tone.LEVEL else 'oblique'} "
            "(lock a character of that tone, or leave the last box free)",
        )


def _check_capacity(
    required: list[int], free: list[bool], end_pos: int, end_ok: Tensor, tables: VocabTables
) -> None:
    n = sum(free)
    if len(required) > n:
        raise ConstraintError(
            "required_chars",
            f"嵌字有{len(required)}个，下联只剩{n}个可自由填写的位置",
            f"{len(required)} required characters but only {n} free positions in the lower line",
        )
    if len(required) == n and end_pos >= 0 and free[end_pos] and not any(bool(end_ok[r]) for r in required):
        raise ConstraintError(
            "required_chars",
            "嵌字占满所有空位，但没有一个能做下联的末字（平仄不合）",
            "the required characters fill every free position, but none has the tone the line must end on",
        )


def _check_pool(free: list[bool], upper_ids: frozenset[int], tables: VocabTables) -> None:
    pool = int((~tables.never & ~tables.punct).sum()) - 1 - len(upper_ids)  # minus EOS
    if sum(free) > pool:
        raise ConstraintError(
            "vocabulary",
            "模型字表太小，无法为每个位置选出不同的字",
            "the vocabulary has too few characters for a distinct one at every position",
        )


# ---- the rules ------------------------------------------------------------------------


@dataclass
class Step:
    """Where the search is: ``pos`` being chosen, the ``prefix`` (B, pos) chosen so far,
    and ``row`` (B,) the request each row belongs to."""

    pos: int
    prefix: Tensor
    row: Tensor


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


class RepeatsMirrored:
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

    def on_columns(self, ids: Tensor) -> RepeatsMirrored:
        return self  # it compares the chosen tokens with each other only


class RequiredChars:
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


class NoThreeLevelTail:
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
) -> tuple[list[PositionRule], list[object]]:
    """The position rules and the step rules for plans of one length."""
    position: list[PositionRule] = [SpecialTokens(plans, tables), ExactLength(plans, tables)]
    stepwise: list[object] = []
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
