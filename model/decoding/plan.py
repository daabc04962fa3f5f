"""A request compiled into a :class:`Plan` (``plan_request``): the upper line and the user's
constraints (locks, 藏头, 嵌字, tone mode) checked up front and resolved to positions and
ids. A constraint that cannot be met raises :class:`ConstraintError` naming it, with a
message in Chinese and English, before any search."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from data.rules import clause_ends, hoof_ends, hoof_pattern, verdict
from data.segment import boundaries
from data.text import is_any_punct, is_han, is_punct
from data.tones import Tone, line_tones, wanted_end
from data.vocab import UNK_ID, Vocab
from model.decoding.vocab_tables import VocabTables

FREE = frozenset("_＿")


class ConstraintError(ValueError):
    """No lower line can satisfy the constraints; ``constraint`` names the one at fault."""

    def __init__(self, constraint: str, zh: str, en: str) -> None:
        super().__init__(f"{zh} / {en}")
        self.constraint, self.zh, self.en = constraint, zh, en

    def mirrored(self) -> ConstraintError:
        """The error said of a request in the other direction (下联求上联): the rules are the
        same with the lines' roles swapped, so the messages are, 上联 and 下联 exchanged."""
        return ConstraintError(self.constraint, _swap_words(self.zh, _ZH), _swap_words(self.en, _EN))

    def __reduce__(self) -> tuple[type[ConstraintError], tuple[str, str, str]]:
        return ConstraintError, (self.constraint, self.zh, self.en)  # (it crosses process pools)


_ZH = ("上联", "下联")
_EN = ("upper line", "lower line")


def _swap_words(text: str, words: tuple[str, str]) -> str:
    a, b = words
    return b.join(part.replace(b, a) for part in text.split(a))


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
    # (L+1,) the word boundaries the sensitive-word filter reads (data/segment.py); None: those
    # of ``upper`` itself (decoding.model_view.ModelView gives the whole line's, for a shortened one)
    word_bounds: tuple[bool, ...] | None = None
    # 马蹄韵 (``with_hoof``): (position, tone) of each clause end of the line written that must
    # have that tone, at its repeat group's first position; () where the rule is not enforced
    hoof: tuple[tuple[int, Tone], ...] = ()

    @property
    def length(self) -> int:
        return len(self.upper)

    def bounds(self) -> tuple[bool, ...]:
        return self.word_bounds if self.word_bounds is not None else boundaries(self.upper)

    def written(self, ids: Sequence[int], pieces: Sequence[str]) -> str:
        """The line of tokens ``ids`` (L,) written for this plan; a mirrored punctuation mark
        is copied from the given line (it may be unknown to the vocabulary)."""
        return "".join(
            u if t >= 0 else pieces[i] for u, t, i in zip(self.upper, self.punct, ids, strict=True)
        )


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


def check_lock_pattern(upper: str, locks: str) -> None:
    """A lock pattern has one box per character of the upper line."""
    if len(locks) != len(upper):
        raise ConstraintError(
            "locks",
            f"锁字模式长度为{len(locks)}，上联长度为{len(upper)}，二者须相等",
            f"the lock pattern has {len(locks)} characters but the upper line has {len(upper)}",
        )


def _parse_locks(upper: str, locks: str | None, required_first: str | None) -> dict[int, str]:
    out: dict[int, str] = {}
    if locks:
        check_lock_pattern(upper, locks)
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


def check_lock(upper: str, pos: int, ch: str, vocab: Vocab, rules: bool, head_char: bool = False) -> None:
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
    reverse: bool = False,
) -> Plan:
    """Check and resolve one request; raises ConstraintError when no line can satisfy it.
    ``reverse``: ``upper`` is a lower line and the line written is its upper line (下联求上联):
    the same rules but the tone at the end (``data.tones.wanted_end``); the messages still
    name the lines as the forward request does (``ConstraintError.mirrored`` swaps them)."""
    if not upper:
        raise ConstraintError("length", "上联为空", "the upper line is empty")
    head = _groups(upper, rules)
    raw = _parse_locks(upper, locks, required_first)
    first = _first_char(upper) if required_first else -1
    for pos, ch in raw.items():
        check_lock(upper, pos, ch, vocab, rules, head_char=pos == first)
    lock_ch = _resolve_locks(upper, raw, head, rules)
    ids = vocab.encode(upper)
    punct = [ids[i] if rules and is_punct(ch) else -1 for i, ch in enumerate(upper)]
    lock = [vocab.encode(lock_ch[i])[0] if i in lock_ch and punct[i] < 0 else -1 for i in range(len(upper))]
    copy_of = [head[i] if rules and head[i] != i and punct[i] < 0 else -1 for i in range(len(upper))]
    tones = _upper_tones(upper, mode)
    last = max((i for i, ch in enumerate(upper) if not is_punct(ch)), default=-1)
    want = wanted_end(tones[last], reverse) if last >= 0 else Tone.EITHER
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


def hoof_wants(
    line: str, mode: str, reverse: bool = False, kept: Sequence[int] | None = None
) -> dict[int, Tone]:
    """马蹄韵 for the line to write: where the given ``line`` (an upper line; with ``reverse`` a
    lower line) keeps 马蹄韵 at every clause end (``data.rules.hoof_ends``), the tone each clause
    end of the line written must have, by position of ``line``: the mirrored pattern, but for the
    last clause's end, which the tone-end rule holds. Empty for one clause or a line that breaks
    it (then the report says so, and the search does not insist). ``kept``: the positions of
    ``line`` the plan's line holds (``model_view.ModelView``), whose indices the answer is by then."""
    if len(clause_ends(line)) < 2:  # (most lines: no tones to read)
        return {}
    ends = hoof_ends(line_tones(line, mode), line, lower=reverse)
    if not ends or verdict(kept for _, _, kept in ends) is not True:
        return {}
    wanted = hoof_pattern(len(ends), lower=not reverse)
    at = {pos: j for j, pos in enumerate(range(len(line)) if kept is None else kept)}
    return {at[pos]: tone for (pos, _, _), tone in zip(ends[:-1], wanted[:-1], strict=True) if pos in at}


def with_hoof(plan: Plan, wants: Mapping[int, Tone]) -> Plan:
    """``plan`` with ``wants`` (``hoof_wants``, by position of ``plan.upper``) as its 马蹄韵 rule:
    each at its repeat group's first position. A locked place, or a group asked for two tones, is
    left to the lock (reported, not enforced); so is every place of a plan with 嵌字, whose
    characters' room the rule would narrow (``RequiredChars`` counts on the end's tone alone)."""
    if not plan.rules or plan.required or not wants:
        return replace(plan, hoof=())
    heads: dict[int, Tone] = {}
    clash: set[int] = set()
    for pos, tone in wants.items():
        head = plan.copy_of[pos] if plan.copy_of[pos] >= 0 else pos
        if plan.lock[head] >= 0 or plan.punct[head] >= 0:
            continue
        if heads.setdefault(head, tone) != tone:
            clash.add(head)
    return replace(plan, hoof=tuple((h, t) for h, t in sorted(heads.items()) if h not in clash))


def _upper_tones(upper: str, mode: str) -> tuple[Tone, ...]:
    try:
        return tuple(line_tones(upper, mode))
    except ValueError as e:  # an unknown mode, or no 入声 table for the classical one
        raise ConstraintError("tone_mode", f"声调模式「{mode}」不可用", str(e)) from e


def _check_end(pos: int, lock: int, end_ok: np.ndarray, upper: str, want: Tone, tables: VocabTables) -> None:
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
    required: list[int], free: list[bool], end_pos: int, end_ok: np.ndarray, tables: VocabTables
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
