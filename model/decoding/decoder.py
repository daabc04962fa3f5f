"""The Decoder: lower lines for upper lines under the couplet rules.

``Decoder(engine, vocab)`` builds the per-vocabulary tables (tones, special pieces) once.
``generate(upper, options)`` plans the request (checking its constraints up front, see
model/decoding/plan.py), fuses the position rules into one ``(N, L+1, V)`` table, runs a
fixed-length beam search over the model's KV cache (model/decoding/search.py; with a proposer,
model/decoding/proposer_search.py), and reports each candidate with the string-level rule
check of data/rules.py. The model reads the upper line without the punctuation marks its
vocabulary lacks (。《》“” and the like) and without the marks that end the line: those are
put back, mirrored, in every candidate (model/decoding/model_view.py's ``ModelView``), so a
final 。 changes nothing. ``generate_batch`` decodes many upper lines at once, grouped by
length (every line of a group takes the same number of steps). With required characters
(嵌字) the beam is shared out over how many each beam has placed. ``alternatives`` lists the
characters that may stand at one position of a line (model/decoding/alternatives.py).

Shapes: N requests, K beams, B = N*K rows, L line length, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from data.pairing import PairingTable
from data.rules import reads_reversed
from data.text import is_punct
from data.tones import Tone
from data.vocab import Vocab
from model.decoding.alternatives import Kept, alternatives_at
from model.decoding.answer import FORWARD, REVERSE, Alternatives, Answer, judged, tone_marks
from model.decoding.blocked import BlockedWords, NoBlockedWords
from model.decoding.long_lines import LONG_FROM, generate_long
from model.decoding.model_view import ModelView
from model.decoding.options import ALTERNATIVE_POOL, MAX_CANDIDATES, DecodeOptions
from model.decoding.plan import ConstraintError, Plan, plan_request
from model.decoding.proposer_search import model_search, search_with_proposer
from model.decoding.registers import in_register
from model.decoding.reranking import Reranker
from model.decoding.score_rules import StepRule, Weights, build_rules, fuse
from model.decoding.vocab_tables import PairingRows, VocabTables

__all__ = ["Decoder", "ModelView"]

Tensor = np.ndarray  # (the search's arrays: float32 scores, int64 tokens)


class Decoder:
    """Lower lines for upper lines from a model's engine, under the couplet rules."""

    def __init__(
        self,
        model: Any,
        vocab: Vocab,
        proposer: Any = None,
        head_t: np.ndarray | None = None,
        pairing: PairingTable | None = None,
        blocked: BlockedWords | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        """``model``: the engine of an encoder-decoder or a tagger (arrays in, arrays out:
        ``OnnxTransformer`` from its cached graphs, or model/export/engines.py's copies of a
        PyTorch model, whose ``torch_decoder`` builds a Decoder of PyTorch models).
        ``proposer``: a tagger's engine for the fast mode (``DecodeOptions.fast``): the
        rule-bound search runs over its one-pass distributions (no decoder steps), and
        ``model`` rescores its ``proposals`` best lines in one teacher-forced pass, which
        decides the order. Without ``fast`` the search runs on the encoder-decoder's own
        steps, with the proposer's one-pass log-probabilities as a second opinion
        (``ensemble_weight``) and its top tokens as the shortlist the output layer scores
        (``shortlist``; the shortlisted output layer stays fp32). ``head_t``: that output
        layer's weight, transposed (d, V), needed with a proposer.
        ``pairing``: how well characters pair at one position (data/pairing.py), added to the
        search's scores with ``DecodeOptions.pairing_weight``.
        ``blocked``: words no candidate may complete (model/decoding/blocked.py), where they
        would be words of the line; locks that spell one raise ConstraintError.
        ``reranker``: a scorer of whole couplets whose opinion reorders each answer's candidates
        (``DecodeOptions.rerank_weight``; model/decoding/reranking.py); not for a reverse model."""
        if proposer is not None and model.cfg.kind == "tagger":
            raise ValueError("a proposer's candidates are rescored by an encoder-decoder model")
        if proposer is not None and head_t is None:
            raise ValueError("a proposer's shortlists need the output layer's weight (head_t)")
        size = model.cfg.vocab_size
        if size < len(vocab):
            raise ValueError(f"model has {size} output ids but the vocabulary {len(vocab)}")
        if blocked is not None and blocked.vocab_size not in (len(vocab), size):
            raise ValueError(
                f"the blocked words are for {blocked.vocab_size} ids, the vocabulary has {len(vocab)}"
            )
        # the engines the search runs (arrays in, arrays out)
        self.model: Any = model
        self.proposer: Any = proposer
        self.head_t = head_t if head_t is not None else np.empty((0, 0), np.float32)
        self.vocab = vocab
        pieces = vocab.pieces + [""] * (size - len(vocab))  # ids past the vocabulary: never
        self.tables = VocabTables.build(vocab, pieces)
        self.pairing = None if pairing is None else PairingRows(pairing, pieces)
        self.blocked = blocked if blocked is not None and len(blocked) else None
        # a lower_to_upper model (下联求上联): the line given is a lower line, the lines written
        # upper lines; the same rules but the tone at the end, reports of (written, given), and
        # its errors' messages with the lines' names swapped (ConstraintError.mirrored)
        self.reverse = model.cfg.reverse
        if reranker is not None and (self.reverse or not reranker.vocab.same_as(vocab)):
            raise ValueError("a reranker reads upper lines against lower lines, in the model's vocabulary")
        self.reranker = reranker

    @property
    def engine(self) -> Any:
        """The model as the search runs it (arrays in, arrays out)."""
        return self.model

    def engine_for(self, options: DecodeOptions) -> Any:
        """The engine writing in ``options.register`` (ConstraintError where the model does not)."""
        return in_register(self.engine, options.register, self.model.cfg.n_registers)

    @property
    def proposer_engine(self) -> Any:
        return self.proposer

    def plan(self, upper: str, options: DecodeOptions) -> Plan:
        if len(upper) + 1 > self.model.cfg.max_len:
            raise ConstraintError(
                "length",
                f"上联太长（{len(upper)}字），最多{self.model.cfg.max_len - 1}字",
                f"the upper line has {len(upper)} characters; at most {self.model.cfg.max_len - 1}",
            )
        plan = plan_request(
            upper,
            self.vocab,
            self.tables,
            rules=options.rules,
            mode=options.tone_mode,
            tone_end=options.tone_end,
            locks=options.locks,
            required_first=options.required_first,
            required_chars=options.required_chars,
            reverse=self.reverse,
        )
        if self.blocked is not None:
            self.blocked.check_plan(plan)
        return plan

    def generate(self, upper: str, options: DecodeOptions | None = None) -> Answer:
        return self.generate_batch([upper], options)[0]

    def generate_batch(
        self, uppers: Sequence[str], options: DecodeOptions | None = None, batch_size: int = 32
    ) -> list[Answer]:
        """Results in the order of ``uppers``; lines of one length are decoded together.
        Raises ConstraintError for the first line whose constraints cannot be met."""
        try:
            return self._generate_batch(uppers, options or DecodeOptions(), batch_size)
        except ConstraintError as e:
            if self.reverse:
                raise e.mirrored() from e
            raise

    def _generate_batch(self, uppers: Sequence[str], options: DecodeOptions, batch_size: int) -> list[Answer]:
        if not 1 <= options.n_best <= MAX_CANDIDATES:
            raise ValueError(f"n_best must be 1..{MAX_CANDIDATES}, got {options.n_best}")
        results: list[Answer | None] = [None] * len(uppers)
        views: dict[int, ModelView] = {}
        plans: dict[int, Plan] = {}
        for i, upper in enumerate(uppers):
            if len(upper) >= LONG_FROM:  # segment by segment (model/decoding/long_lines.py)
                results[i] = generate_long(self, upper, options)
            else:
                views[i], plans[i] = self.plan_view(upper, options)
        by_length: dict[int, list[int]] = {}
        for i, p in plans.items():
            by_length.setdefault(p.length, []).append(i)
        for idx in by_length.values():
            for start in range(0, len(idx), batch_size):
                chunk = idx[start : start + batch_size]
                for i, res in zip(chunk, self._decode([plans[i] for i in chunk], options), strict=True):
                    results[i] = views[i].restore(res, options.tone_mode, self.reverse)
        return [self.reranked(r, options) for r in results if r is not None]

    def reranked(self, answer: Answer, options: DecodeOptions) -> Answer:
        """``answer`` reordered by the reranker at ``options.rerank_weight`` (as it is without one)."""
        return answer if self.reranker is None else self.reranker.rerank(answer, options.rerank_weight)

    def plan_view(self, upper: str, options: DecodeOptions) -> tuple[ModelView, Plan]:
        """The line as the model reads it (``ModelView``) and the plan of its request."""
        view = ModelView.of(upper, self.vocab, options.rules)
        return view, view.plan(self, options)

    def decode_plans(self, plans: list[Plan], options: DecodeOptions) -> list[Answer | None]:
        """The results of plans of one length, searched together; a plan that leaves no line
        gives None (the others are searched again without it)."""
        try:
            return list(self._decode(plans, options))
        except ConstraintError:
            if len(plans) == 1:
                return [None]
        return [self.decode_plans([plan], options)[0] for plan in plans]

    def rule_tables(self, plans: list[Plan], options: DecodeOptions) -> tuple[Tensor, Tensor, list[StepRule]]:
        """The search's rules for plans of one length: the position rules fused into one table
        (N, L+1, V) with the pairing table's scores added, the upper lines' ids src (N, L), and
        the step rules (the sensitive-word filter's among them)."""
        weights = Weights(options.rhythm_weight, options.three_level_weight)
        position, stepwise = build_rules(plans, self.tables, weights)
        if self.blocked is not None:
            stepwise.append(NoBlockedWords(plans, self.blocked))
        table = fuse(position, len(plans), plans[0].length, self.tables.size)  # (N, L+1, V)
        src = np.array([self.vocab.encode(p.upper) for p in plans], dtype=np.int64)  # (N, L)
        if self.pairing is not None and options.pairing_weight:
            self.pairing.add_to(table, src, options.pairing_weight)
        return table, src, stepwise

    def _decode(self, plans: list[Plan], options: DecodeOptions) -> list[Answer]:
        table, src, stepwise = self.rule_tables(plans, options)
        engine = self.engine_for(options)
        if self.proposer is None or not (options.fast or options.ensemble_weight or options.shortlist):
            tokens, search, logp = model_search(engine, src, table, stepwise, options)
        else:
            tokens, search, logp = search_with_proposer(
                engine, self.proposer_engine, self.head_t, plans, table, src, stepwise, options
            )
        per_token = plans[0].length + int(options.score_end)
        return [
            self._result(plan, tokens[n], search[n] / per_token, logp[n] / per_token, options)
            for n, plan in enumerate(plans)
        ]

    def alternatives(
        self,
        upper: str,
        lower: str,
        position: int,
        options: DecodeOptions | None = None,
        k: int = 10,
        pool: int = ALTERNATIVE_POOL,
    ) -> Alternatives:
        """The best characters for ``position`` of ``lower`` (a lower line of ``upper``), the rest
        of the line kept, under the rules and constraints of ``options`` (locks, 藏头, 嵌字, tone
        mode), best first, at most ``k`` and the line's own character (when it keeps the rules).

        The request is planned as ``generate`` plans it, and the search's own tables and step
        rules judge each line, so a listed character keeps every rule the search keeps:
        punctuation and repeats mirrored (a position of a repeat group changes all its copies),
        no reuse of the upper line's characters, the tone at the end, no character twice unless
        mirrored, the locks, and no listed sensitive word completed. Every character the
        position rules allow is first ranked by the search's score at the group's first
        position after the fixed prefix (plus the table's rows of its copies); the best ``pool``
        of them and the line's own are then scored whole, in one batch, as the search scores a
        line (``forced_search``: the model's log-probability of every token, the pairing table,
        the rhythm and 三平尾 preferences, the tagger's opinion with ``ensemble_weight``), and
        ordered by that score per token. Raises ConstraintError when the input cannot be
        judged (lengths, punctuation, a position on a mark, unknown characters) or no
        character fits. With a reverse model, ``upper`` is the given lower line and ``lower``
        the upper line written for it (the messages name them so)."""
        (found,) = self.alternatives_at(upper, lower, [position], options, k, pool)
        if isinstance(found, ConstraintError):
            raise found
        return found

    def alternatives_at(
        self,
        upper: str,
        lower: str,
        positions: Sequence[int],
        options: DecodeOptions | None = None,
        k: int = 10,
        pool: int = ALTERNATIVE_POOL,
        kept: Kept | None = None,
    ) -> list[Alternatives | ConstraintError]:
        """``alternatives`` at each of ``positions`` of one line, the answer or the refusal of
        each, the line planned, encoded and walked once and all positions' lines scored in one
        batch (the check's suggestions); ``kept``: places scored by an earlier ask of the same
        line, which are only described again (model/decoding/alternatives.py)."""
        try:
            found = alternatives_at(self, upper, lower, positions, options or DecodeOptions(), k, pool, kept)
        except ConstraintError as e:
            found = [e for _ in positions]
        return [f.mirrored() if self.reverse and isinstance(f, ConstraintError) else f for f in found]

    def _result(
        self, plan: Plan, tokens: Tensor, search: Tensor, score: Tensor, options: DecodeOptions
    ) -> Answer:
        """tokens (K, L), search (K,), score (K,), both per token -> the distinct live
        candidates, best first."""
        seen: set[str] = set()
        candidates = []
        for ids, s, sc in zip(tokens.tolist(), search.tolist(), score.tolist(), strict=True):
            text = plan.written(ids, self.tables.pieces)
            if s == float("-inf") or text in seen:
                continue
            seen.add(text)
            candidates.append(judged(plan.upper, text, plan.mode, plan.upper_tones, self.reverse, s, sc))
            if len(candidates) == options.n_best:
                break
        if not candidates:
            raise ConstraintError(
                "search", "在所有约束下找不到下联", "no lower line satisfies all the constraints together"
            )
        return Answer.given_line(
            REVERSE if self.reverse else FORWARD,
            plan.upper,
            tone_marks(plan.upper, plan.mode),
            candidates=candidates,
            unknown_chars=self.vocab.unknown(plan.upper),
            reads_reversed=reads_reversed(_end_tone(plan), self.reverse),
        )


def _end_tone(plan: Plan) -> Tone:
    for ch, tone in zip(reversed(plan.upper), reversed(plan.upper_tones), strict=True):
        if not is_punct(ch):
            return tone
    return Tone.NONE


if __name__ == "__main__":  # a library module: say where the command is, not nothing
    import sys

    print(
        "model.decoding.decoder is a library module, not a command.\n"
        "usage: duilian generate 春风得意马蹄疾   (the command line; duilian --help)\n"
        "       python -m duilian generate ...   (the same, without the console script)",
        file=sys.stderr,
    )
    sys.exit(2)
