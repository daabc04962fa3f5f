"""Long couplets (长联): an upper line longer than the model's training lines, answered
segment by segment with every hard rule kept on the whole line.

The model was trained on lines of at most 32 characters, and its positions end at
``max_len``. A longer upper line is cut into segments: its clauses (each with the marks that
end it), neighbours joined while they fit in ``SEGMENT_CHARS`` characters, and a clause
longer than that cut at word boundaries (data/segment.py). The segments are decoded in order
by a beam over whole prefixes: each of the ``n_best`` best prefixes so far asks the search for
its ``n_best`` continuations in one batched search, and the best ``n_best`` longer prefixes
are kept, by the search's score per character of the whole prefix.

What ties the segments together is the rules of the whole line, given to each segment's
search as constraints:

- **no reuse**: no character of the whole upper line, anywhere;
- **repeats mirrored**: where the upper line repeats a character of an earlier segment, the
  lower line repeats the character the prefix has there (a lock); and no character the prefix
  already has may come again elsewhere (the lower line repeats only where the upper does);
- **punctuation** is mirrored inside each segment, as for any line;
- **the tone at the end** is asked where the line's last character's repeat group starts:
  in the last segment, or in an earlier one when the last character repeats one of it; each
  segment's end gets the rhythm preference of any clause end;
- the user's **locks** and **藏头** are cut to their segments. 嵌字 (required characters
  anywhere) is refused for long lines: which segment should hold them is the user's to say,
  with a lock.

Each segment is read by the model on its own (the model takes at most one line of context);
the whole line is the context only through these constraints.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from data.rules import reads_reversed
from data.segment import boundaries
from data.text import LONGEST_LINE, clauses, is_han, is_punct
from data.tones import Tone, line_tones, wanted_end
from data.vocab import Vocab
from model.decoding.answer import FORWARD, REVERSE, Answer, judged, tone_marks
from model.decoding.options import DecodeOptions
from model.decoding.plan import FREE, ConstraintError, Plan, hoof_wants, with_hoof

LONG_FROM = 33  # upper lines of this many characters or more are answered segment by segment
SEGMENT_CHARS = 16  # the longest segment joined from clauses (training lines: median 7, at most 32)


def segments(upper: str, limit: int = SEGMENT_CHARS) -> list[tuple[int, int]]:
    """(start, end) spans covering ``upper`` in order: each clause with the marks after it,
    neighbours joined while the join has at most ``limit`` characters, a longer clause cut at
    the word boundaries nearest ``limit`` (jieba; anywhere if a word is longer)."""
    spans: list[tuple[int, int]] = []
    found = clauses(upper)
    for k, (start, _) in enumerate(found):
        end = found[k + 1][0] if k + 1 < len(found) else len(upper)  # the marks after it too
        spans.append((0 if k == 0 else start, end))
    if not spans:
        return [(0, len(upper))]
    pieces: list[tuple[int, int]] = []
    for start, end in spans:
        while end - start > limit:
            cut = _cut(upper, start, end, limit)
            pieces.append((start, cut))
            start = cut
        pieces.append((start, end))
    joined = [pieces[0]]
    for start, end in pieces[1:]:
        if end - joined[-1][0] <= limit:
            joined[-1] = (joined[-1][0], end)
        else:
            joined.append((start, end))
    return joined


def _cut(upper: str, start: int, end: int, limit: int) -> int:
    """Where to cut upper[start:end] (longer than ``limit``): the last word boundary at most
    ``limit`` characters in, at least a quarter of it; else ``start + limit``."""
    bounds = boundaries(upper[start:end])
    for i in range(limit, max(limit // 4, 1) - 1, -1):
        if bounds[i]:
            return start + i
    return start + limit


@dataclass(frozen=True)
class _Prefix:
    text: str  # the lower line so far
    rank: float  # the search's score, summed over its characters
    score: float  # the model's log-probability, summed over its characters


class _View(Protocol):
    @property
    def kept(self) -> tuple[int, ...]: ...  # the segment's positions the model reads

    def restore(self, result: Answer, mode: str, reverse: bool = False) -> Answer: ...


class SegmentDecoder(Protocol):
    """What the segment search needs of model.decoding.decoder.Decoder."""

    vocab: Vocab
    reverse: bool  # the given line is a lower line (下联求上联)

    def plan_view(self, upper: str, options: DecodeOptions) -> tuple[_View, Plan]: ...

    def decode_plans(self, plans: list[Plan], options: DecodeOptions) -> list[Answer | None]: ...


def generate_long(decoder: SegmentDecoder, upper: str, options: DecodeOptions) -> Answer:
    """``options.n_best`` lower lines for a long ``upper`` (module docstring); raises
    ConstraintError when the constraints cannot be met."""
    if len(upper) > LONGEST_LINE:
        raise ConstraintError(
            "length",
            f"上联太长（{len(upper)}字），最多{LONGEST_LINE}字",
            f"the upper line has {len(upper)} characters; at most {LONGEST_LINE}",
        )
    if options.required_chars:
        raise ConstraintError(
            "required",
            f"长联（{len(upper)}字）暂不支持嵌字，请用锁定字指定位置",
            f"embedded characters (嵌字) are not offered for lines over {LONG_FROM - 1} characters "
            "yet; lock them at the positions you want instead",
        )
    locks = options.locks or ""
    if locks and len(locks) != len(upper):
        raise ConstraintError(
            "locks",
            f"锁定格式须与上联等长（{len(upper)}字）",
            f"the lock pattern must be as long as the upper line ({len(upper)} characters)",
        )
    spans = segments(upper)
    upper_ids = {i for ch in upper if options.rules and is_han(ch) for i in decoder.vocab.encode(ch)}
    tones = line_tones(upper, options.tone_mode)
    last_char = max((i for i, ch in enumerate(upper) if not is_punct(ch)), default=-1)
    line_end = tones[last_char] if last_char >= 0 else Tone.NONE
    want = wanted_end(line_end, decoder.reverse)
    # where the tone-end rule sits: the first occurrence of the last character (-1: no rule)
    asked = options.rules and options.tone_end and last_char >= 0 and want != Tone.EITHER
    end_head = upper.index(upper[last_char]) if asked else -1
    hoof = hoof_wants(upper, options.tone_mode, decoder.reverse) if options.rules else {}  # the whole line's
    beam = [_Prefix("", 0.0, 0.0)]
    for k, (start, end) in enumerate(spans):
        last = k == len(spans) - 1
        step_options = replace(
            options,
            tone_end=options.tone_end and last,
            required_first=options.required_first if k == 0 else None,
            locks=None,
        )
        plans: list[Plan] = []
        views: list[_View] = []
        kept: list[_Prefix] = []
        for prefix in beam:
            pattern = _locks(upper, start, end, prefix.text, locks, options.rules)
            try:
                view, plan = decoder.plan_view(upper[start:end], replace(step_options, locks=pattern))
            except ConstraintError:
                if len(beam) == 1:
                    raise
                continue  # this prefix leaves the segment no line: drop it
            banned = upper_ids | {i for ch in prefix.text if is_han(ch) for i in decoder.vocab.encode(ch)}
            plan = replace(plan, upper_ids=frozenset(banned - set(plan.lock)))
            at = {start + pos: j for j, pos in enumerate(view.kept)}
            plan = with_hoof(plan, {at[p]: tone for p, tone in hoof.items() if p in at})
            if not last and start <= end_head < end and end_head - start in view.kept:
                # the line's last character repeats one of this segment: its tone is chosen here
                plan = replace(plan, end_pos=view.kept.index(end_head - start), want_end=want)
            plans.append(plan)
            views.append(view)
            kept.append(prefix)
        if not plans:
            raise _no_line()
        tokens = plans[0].length + int(options.score_end)  # what the scores are per
        grown = [
            _Prefix(
                prefix.text + c.text, prefix.rank + c.rank_score * tokens, prefix.score + c.score * tokens
            )
            for prefix, view, result in zip(
                kept, views, decoder.decode_plans(plans, step_options), strict=True
            )
            if result is not None
            for c in view.restore(result, options.tone_mode, decoder.reverse).candidates
        ]
        if not grown:
            raise _no_line()
        best: dict[str, _Prefix] = {}
        for p in sorted(grown, key=lambda p: p.rank, reverse=True):
            best.setdefault(p.text, p)
        beam = list(best.values())[: options.n_best]
    per = sum(b - a for a, b in spans) + len(spans) * int(options.score_end)
    reverse = decoder.reverse
    candidates = [
        judged(upper, p.text, options.tone_mode, tones, reverse, p.rank / per, p.score / per) for p in beam
    ]
    return Answer.given_line(
        REVERSE if reverse else FORWARD,
        upper,
        tone_marks(upper, options.tone_mode),
        candidates=candidates,
        unknown_chars=[ch for ch in decoder.vocab.unknown(upper) if not is_punct(ch)],
        reads_reversed=reads_reversed(line_end, reverse),
    )


def _no_line() -> ConstraintError:
    return ConstraintError(
        "search", "在所有约束下找不到下联", "no lower line satisfies all the constraints together"
    )


def _locks(upper: str, start: int, end: int, prefix: str, locks: str, rules: bool) -> str | None:
    """The lock pattern of segment upper[start:end]: the user's, and where the upper line
    repeats a character of an earlier segment, the prefix's character there."""
    out = list(locks[start:end]) if locks else ["_"] * (end - start)
    for i in range(start, end):
        j = upper.index(upper[i])  # its first occurrence
        if rules and j < start and is_han(upper[i]) and out[i - start] in FREE:
            out[i - start] = prefix[j]
    pattern = "".join(out)
    return None if all(ch in FREE for ch in pattern) else pattern
