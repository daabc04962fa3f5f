"""Alternatives at one position (``Decoder.alternatives``, whose docstring says what they are):
the characters the rules allow there are ranked by the search's score at that position alone,
the best ``pool`` of them and the line's own then scored on the whole line as the search
scores a line (model/decoding/rescoring.py's ``next_scores`` and ``forced_search``).

Shapes: L line length, V vocabulary, C characters scored whole.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

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
from model.decoding.search import StepModel, forced_search, next_scores
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
    if not 1 <= k <= MAX_CANDIDATES:
        raise ValueError(f"k must be 1..{MAX_CANDIDATES}, got {k}")
    check_input(upper, lower, position, options.rules, decoder.vocab)
    view, plan = decoder.plan_view(upper, options)
    at = view.kept.index(position)
    line = [decoder.vocab.encode(lower[i])[0] for i in view.kept]
    head = [src if src >= 0 else i for i, src in enumerate(plan.copy_of)]
    group = [i for i in range(plan.length) if head[i] == head[at]]  # a repeat group changes together

    table, src, stepwise = decoder.rule_tables([plan], options)  # (1, L+1, V), (1, L)
    proposer = decoder.proposer_engine
    if proposer is not None and options.ensemble_weight:  # the normal search's second opinion
        table[:, : plan.length] += options.ensemble_weight * proposer.encode(src)
    engine = decoder.engine_for(options)
    memory = engine.encode(src)

    own = line[group[0]]
    chars = _pool(engine, src, table, stepwise, memory, line, group, pool)
    lines = np.tile(np.array(line, dtype=np.int64), (len(chars), 1))  # (C, L)
    lines[:, group] = np.array(chars, dtype=np.int64)[:, None]
    search, logp = forced_search(engine, src, table, stepwise, lines, options.score_end, memory)
    per_token = plan.length + int(options.score_end)
    order = [j for j in topk(search, len(search))[1].tolist() if math.isfinite(search[j])]
    chosen = set(order[:k]) | {j for j in order if chars[j] == own}
    tones = line_tones(view.original, plan.mode)
    found = []
    for j in (j for j in order if j in chosen):
        text = view.text(plan.written(lines[j].tolist(), decoder.tables.pieces))
        found.append(
            Alternative(
                char=decoder.tables.pieces[chars[j]],
                text=text,
                rank_score=float(search[j]) / per_token,
                score=float(logp[j]) / per_token,
                tones=tone_marks(text, plan.mode),
                report=check_answer(view.original, text, plan.mode, tones, decoder.reverse),
                original=chars[j] == own,
            )
        )
    if not found:
        raise ConstraintError(
            "search",
            f"下联第{position + 1}字在其余字不变时，没有合乎全部规则的字（其余的字可能已违反规则）",
            f"no character at position {position + 1} keeps every rule with the rest of the lower line "
            "as it is (the rest may break a rule already)",
        )
    positions = [view.kept[i] for i in group]
    upper_line, lower_line = (lower, view.original) if decoder.reverse else (view.original, lower)
    direction = REVERSE if decoder.reverse else FORWARD
    return Alternatives(direction, upper_line, lower_line, position, positions, found)


def _pool(
    engine: StepModel,
    src: Tensor,
    table: Tensor,
    stepwise: list[StepRule],
    memory: Tensor,
    line: list[int],
    group: list[int],
    pool: int,
) -> list[int]:
    """The characters to score whole: the best ``pool`` the rules allow by the search's score
    at the group's first position after the line's prefix (plus the table's rows of the
    group's other positions), and the line's own."""
    first = group[0]
    local = next_scores(engine, src, table, stepwise, line[:first], memory)  # (V,)
    for i in group[1:]:
        local = local + table[0, i]
    count = int(np.isfinite(local).sum())
    ranked = topk(local, min(pool, count))[1].tolist() if count else []
    return list(dict.fromkeys([*ranked, line[first]]))


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
