"""Alternatives at one position (``Decoder.alternatives``, whose docstring says what they are):
the characters the rules allow there are ranked by the search's score at that position alone,
the best ``pool`` of them and the line's own then scored on the whole line as the search
scores a line (model/decoding/rescoring.py's ``forced_walk``).

Shapes: L line length, V vocabulary, C characters scored whole.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np

from data.rules import check_answer, punctuation_mirrored
from data.text import is_punct
from data.tones import line_tones
from data.vocab import Vocab
from model.decoding.answer import FORWARD, REVERSE, Alternative, Alternatives, tone_marks
from model.decoding.arrays import topk
from model.decoding.model_view import ModelView
from model.decoding.options import MAX_CANDIDATES, DecodeOptions
from model.decoding.plan import ConstraintError, Plan
from model.decoding.score_rules import StepRule
from model.decoding.search import forced_walk
from model.decoding.vocab_tables import VocabTables

Tensor = np.ndarray  # (the search's arrays)


class AlternativesDecoder(Protocol):
    """What ``alternatives`` needs of model.decoding.decoder.Decoder."""

    vocab: Vocab
    tables: VocabTables
    reverse: bool  # the given line is a lower line (下联求上联)

    @property
    def proposer_engine(self) -> Any: ...

    def plan_view(self, upper: str, options: DecodeOptions) -> tuple[ModelView, Plan]: ...

    def rule_tables(
        self, plans: list[Plan], options: DecodeOptions
    ) -> tuple[Tensor, Tensor, list[StepRule]]: ...

    def engine_for(self, options: DecodeOptions) -> Any: ...


def alternatives(
    decoder: AlternativesDecoder,
    upper: str,
    lower: str,
    position: int,
    options: DecodeOptions,
    k: int,
    pool: int,
) -> Alternatives:
    """The best characters for ``position`` of ``lower``, the rest of the line kept, best first:
    at most ``k`` and the line's own (when it keeps the rules). Raises ConstraintError (its
    messages for a forward model) when the input cannot be judged or no character fits."""
    (found,) = alternatives_at(decoder, upper, lower, [position], options, k, pool)
    if isinstance(found, ConstraintError):
        raise found
    return found


@dataclass(frozen=True)
class Scored:
    """One place of a line with its characters scored whole (``alternatives_at``'s costly part):
    ``chars`` (C,) and ``lines`` (C, L) each with one of them, their search scores ``search``
    and model log-probabilities ``logp`` (C,), ``own`` the line's own character there, ``group``
    the positions that change together."""

    group: list[int]
    chars: list[int]
    lines: Tensor
    search: Tensor
    logp: Tensor
    own: int


# scored places kept for another ask about the same line (``alternatives_at``'s ``kept``): by
# position, for one line, options and pool
Kept = dict[tuple[str, str, int, DecodeOptions, int], Scored]


def alternatives_at(
    decoder: AlternativesDecoder,
    upper: str,
    lower: str,
    positions: Sequence[int],
    options: DecodeOptions,
    k: int,
    pool: int,
    kept: Kept | None = None,
) -> list[Alternatives | ConstraintError]:
    """:func:`alternatives` at each of ``positions`` of one line, the answer or the refusal of
    each: the line is planned, encoded and walked once, and each position's lines are scored in
    one batch from where they leave it. With ``kept``, places scored before (an earlier ask of
    the same line, options and pool, for fewer characters) are only described again, and the
    places scored now are added to it. Raises ConstraintError when the line itself cannot be judged."""
    if not 1 <= k <= MAX_CANDIDATES:
        raise ValueError(f"k must be 1..{MAX_CANDIDATES}, got {k}")
    refused = {p: _position_error(upper, lower, p, options.rules, decoder.vocab) for p in positions}
    if all(refused.values()):
        return [cast(ConstraintError, refused[p]) for p in positions]
    view, plan = decoder.plan_view(upper, options)
    kept = {} if kept is None else kept
    wanted = [p for p in positions if refused[p] is None]
    missing = [p for p in wanted if (upper, lower, p, options, pool) not in kept]
    if missing:
        for p, scored in _scored(decoder, view, plan, lower, missing, options, pool).items():
            kept[(upper, lower, p, options, pool)] = scored
    per_token = plan.length + int(options.score_end)
    direction = REVERSE if decoder.reverse else FORWARD
    upper_line, lower_line = (lower, view.original) if decoder.reverse else (view.original, lower)
    given_tones = line_tones(view.original, plan.mode)
    answers: dict[int, Alternatives | ConstraintError] = {}
    for p in wanted:
        scored = kept[(upper, lower, p, options, pool)]
        s, lp = scored.search, scored.logp
        order = [j for j in topk(s, len(s))[1].tolist() if math.isfinite(s[j])]
        chosen = set(order[:k]) | {j for j in order if scored.chars[j] == scored.own}
        found = []
        for j in (j for j in order if j in chosen):
            text = view.text(plan.written(scored.lines[j].tolist(), decoder.tables.pieces))
            found.append(
                Alternative(
                    char=decoder.tables.pieces[scored.chars[j]],
                    text=text,
                    rank_score=float(s[j]) / per_token,
                    score=float(lp[j]) / per_token,
                    tones=tone_marks(text, plan.mode),
                    report=check_answer(view.original, text, plan.mode, given_tones, decoder.reverse),
                    original=scored.chars[j] == scored.own,
                )
            )
        positions_p = [view.kept[i] for i in scored.group]
        answers[p] = (
            Alternatives(direction, upper_line, lower_line, p, positions_p, found) if found else _none_fits(p)
        )
    return [cast(ConstraintError, refused[p]) if refused[p] else answers[p] for p in positions]


def _scored(
    decoder: AlternativesDecoder,
    view: ModelView,
    plan: Plan,
    lower: str,
    positions: Sequence[int],
    options: DecodeOptions,
    pool: int,
) -> dict[int, Scored]:
    """Each of ``positions`` (none refused) with its best ``pool`` characters and the line's own
    scored whole: the line encoded and walked once, each place's lines in one batch."""
    line = [decoder.vocab.encode(lower[i])[0] for i in view.kept]
    head = [src if src >= 0 else i for i, src in enumerate(plan.copy_of)]
    groups = {
        p: [i for i in range(plan.length) if head[i] == head[view.kept.index(p)]] for p in positions
    }  # a repeat group changes together

    table, src, stepwise = decoder.rule_tables([plan], options)  # (1, L+1, V), (1, L)
    proposer = decoder.proposer_engine
    if proposer is not None and options.ensemble_weight:  # the normal search's second opinion
        table[:, : plan.length] += options.ensemble_weight * proposer.encode(src)
    engine = decoder.engine_for(options)
    memory = engine.encode(src)

    heads = {g[0]: g for g in groups.values()}

    def leaving(head: int, scores: Tensor) -> Tensor:
        return _lines(line, heads[head], _pool(scores, table, line, heads[head], pool))

    walked = forced_walk(
        engine, src, table, stepwise, line, sorted(heads), leaving, memory, options.score_end, plan.required
    )
    out = {}
    for p, g in groups.items():
        lines, s, lp = walked[g[0]]
        out[p] = Scored(g, lines[:, g[0]].tolist(), lines, s, lp, line[g[0]])
    return out


def _none_fits(position: int) -> ConstraintError:
    return ConstraintError(
        "search",
        f"下联第{position + 1}字在其余字不变时，没有合乎全部规则的字（其余的字可能已违反规则）",
        f"no character at position {position + 1} keeps every rule with the rest of the lower line "
        "as it is (the rest may break a rule already)",
    )


def _lines(line: list[int], group: list[int], chars: list[int]) -> Tensor:
    """The line with each of ``chars`` at the positions of ``group``: (C, L)."""
    lines = np.tile(np.array(line, dtype=np.int64), (len(chars), 1))
    lines[:, group] = np.array(chars, dtype=np.int64)[:, None]
    return lines


def _pool(local: Tensor, table: Tensor, line: list[int], group: list[int], pool: int) -> list[int]:
    """The characters to score whole: the best ``pool`` the rules allow by the search's score
    ``local`` (V,) at the group's first position after the line's prefix (plus the table's rows
    of the group's other positions), and the line's own."""
    for i in group[1:]:
        local = local + table[0, i]
    count = int(np.isfinite(local).sum())
    ranked = topk(local, min(pool, count))[1].tolist() if count else []
    return list(dict.fromkeys([*ranked, line[group[0]]]))


def _position_error(
    upper: str, lower: str, position: int, rules: bool, vocab: Vocab
) -> ConstraintError | None:
    try:
        check_input(upper, lower, position, rules, vocab)
    except ConstraintError as exc:
        return exc
    return None


def check_input(upper: str, lower: str, position: int, rules: bool, vocab: Vocab) -> None:
    """What ``alternatives`` needs of its input before any model runs."""
    if len(lower) != len(upper):
        raise ConstraintError(
            "length",
            f"下联有{len(lower)}字，上联有{len(upper)}字，二者须一样长",
            f"the lower line has {len(lower)} characters but the upper line {len(upper)}",
        )
    if not 0 <= position < len(upper):
        raise ConstraintError(
            "position",
            f"位置须在 0 到 {len(upper) - 1} 之间（从 0 数起），现在是 {position}",
            f"the position must be 0 to {len(upper) - 1} (counted from 0), got {position}",
        )
    if rules and is_punct(upper[position]):
        raise ConstraintError(
            "position",
            f"下联第{position + 1}字对的是上联的标点「{upper[position]}」，须与之相同，没有别的字可换",
            f"position {position + 1} mirrors the upper line's mark {upper[position]!r}: "
            "nothing else may stand there",
        )
    if rules and not punctuation_mirrored(upper, lower):
        raise ConstraintError(
            "punctuation",
            "下联的标点须与上联同位置的标点相同，其余位置不能有标点",
            "the lower line must have the upper line's marks at the same places, and no other",
        )
    unknown = [ch for ch in dict.fromkeys(vocab.unknown(lower)) if not is_punct(ch)]
    if unknown:
        raise ConstraintError(
            "vocabulary",
            f"下联的字不在模型字表中：{''.join(unknown)}",
            f"characters of the lower line are not in the model's vocabulary: {''.join(unknown)}",
        )
