"""An upper line as the model reads it (:class:`ModelView`): the marks the model never saw
left out before the plan and the search, and put back, mirrored, in every candidate."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from data.segment import boundaries
from data.text import is_punct, text_end
from data.tones import line_tones
from data.vocab import Vocab
from model.decoding.answer import Answer, judged, tone_marks
from model.decoding.options import DecodeOptions
from model.decoding.plan import FREE, Plan, check_lock, check_lock_pattern, hoof_wants, with_hoof


class Planner(Protocol):
    """What ``ModelView.plan`` needs of model.decoding.decoder.Decoder."""

    vocab: Vocab
    reverse: bool  # the given line is a lower line (下联求上联)

    def plan(self, upper: str, options: DecodeOptions) -> Plan: ...


@dataclass(frozen=True)
class ModelView:
    """An upper line as the model reads it: without the punctuation marks its vocabulary
    lacks, and without the marks that end the line. The model never saw 。《》“” and the
    like (the training lines have none): read as unknown characters they unsettle every
    candidate (docs/EXPERIMENTS.md §25); a final mark says nothing the lower line must answer.
    Left-out marks are put back in every candidate at their positions, which is what the
    punctuation rule asks (mirrored marks)."""

    original: str
    line: str  # what the model decodes
    kept: tuple[int, ...]  # the original's positions that ``line`` holds, in order

    @classmethod
    def of(cls, upper: str, vocab: Vocab, rules: bool = True) -> ModelView:
        if not rules:
            return cls(upper, upper, tuple(range(len(upper))))
        end = text_end(upper)
        if end == 0:  # only marks: the plan says what is wrong with it
            return cls(upper, upper, tuple(range(len(upper))))
        kept = tuple(i for i in range(end) if not (is_punct(upper[i]) and upper[i] not in vocab))
        return cls(upper, "".join(upper[i] for i in kept), kept)

    def locks(self, locks: str | None, vocab: Vocab) -> str | None:
        """The lock pattern over the kept positions; a left-out mark may be locked only as
        itself (or left free): the plan's own checks, on the whole line."""
        if not locks or len(self.kept) == len(self.original):
            return locks
        check_lock_pattern(self.original, locks)
        kept = set(self.kept)
        for i, ch in enumerate(locks):
            if i not in kept and ch not in FREE:
                check_lock(self.original, i, ch, vocab, rules=True)
        return "".join(locks[i] for i in self.kept)

    def plan(self, decoder: Planner, options: DecodeOptions) -> Plan:
        """The decoder's plan for ``line``, the locks over the kept positions, and the whole
        line's word boundaries, so the filter in the search reads the words the check of a
        finished line reads (jieba may segment a line with its marks left out otherwise)."""
        plan = decoder.plan(self.line, replace(options, locks=self.locks(options.locks, decoder.vocab)))
        hoof = (
            hoof_wants(self.original, options.tone_mode, decoder.reverse, self.kept) if options.rules else {}
        )
        plan = with_hoof(plan, hoof)  # (马蹄韵 read on the whole line, its marks included)
        return plan if plan.length == len(self.original) else replace(plan, word_bounds=self.word_bounds())

    def word_bounds(self) -> tuple[bool, ...]:
        """The whole line's word boundaries (data/segment.py) at the kept positions: between two
        kept characters, a boundary when there is one anywhere from the first's end to the
        second's start (a left-out mark is a word of its own, so it puts one there)."""
        whole, k = boundaries(self.original), self.kept
        return (True, *(any(whole[k[j - 1] + 1 : k[j] + 1]) for j in range(1, len(k))), True)

    def text(self, lower: str) -> str:
        out = list(self.original)
        for j, i in enumerate(self.kept):
            out[i] = lower[j]
        return "".join(out)

    def restore(self, result: Answer, mode: str, reverse: bool = False) -> Answer:
        """``result`` for the whole upper line: the marks put back, the reports read again on
        the whole lines, and only characters (not marks) named unknown (the view left out
        marks only, so its unknown characters are the whole line's)."""
        unknown = [ch for ch in result.unknown_chars if not is_punct(ch)]
        if len(self.kept) == len(self.original):
            return replace(result, unknown_chars=unknown)
        tones = line_tones(self.original, mode)
        candidates = [
            judged(self.original, self.text(c.text), mode, tones, reverse, c.rank_score, c.score)
            for c in result.candidates
        ]
        return Answer.given_line(
            result.direction,
            self.original,
            tone_marks(self.original, mode),
            candidates=candidates,
            unknown_chars=unknown,
            reads_reversed=result.reads_reversed,
        )
