"""The Decoder: lower lines for upper lines under the couplet rules.

``Decoder(model, vocab)`` builds the per-vocabulary tables (tones, special pieces) once.
``generate(upper, options)`` plans the request (checking its constraints up front, see
model/decoding/plan.py), fuses the position rules into one ``(N, L+1, V)`` table, runs a
fixed-length beam search over the model's KV cache (model/decoding/search.py), and reports
each candidate with the string-level rule check of data/rules.py. The model reads the upper
line without the punctuation marks its vocabulary lacks (。《》“” and the like) and without
the marks that end the line: those are put back, mirrored, in every candidate (:class:`ModelView`),
so a final 。 changes nothing. ``generate_batch`` decodes
many upper lines at once, grouped by length (every line of a group takes the same number of
steps). With
required characters (嵌字) the beam is shared out over how many each beam has placed.

Shapes: N requests, K beams, B = N*K rows, L line length, V vocabulary.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from data.pairing import PairingTable
from data.rules import check_answer, punctuation_mirrored, reads_reversed
from data.segment import boundaries
from data.text import is_punct, text_end
from data.tones import Tone, line_tones
from data.vocab import EOS_ID, Vocab
from model.decoding.answer import FORWARD, REVERSE, Alternative, Alternatives, Answer, judged, tone_marks
from model.decoding.arrays import topk
from model.decoding.blocked import BlockedWords, NoBlockedWords
from model.decoding.long_lines import LONG_FROM, generate_long
from model.decoding.onnx_engine import OnnxTagger, OnnxTransformer
from model.decoding.options import ALTERNATIVE_POOL, MAX_CANDIDATES, RUNTIMES, DecodeOptions, Runtime
from model.decoding.plan import (
    FREE,
    ConstraintError,
    Plan,
    check_lock,
    check_lock_pattern,
    hoof_wants,
    plan_request,
    with_hoof,
)
from model.decoding.registers import in_register
from model.decoding.score_rules import StepRule, Weights, build_rules, fuse
from model.decoding.search import forced_search, next_scores, rescore, run_search, strategy_for
from model.decoding.shortlist import Shortlist
from model.decoding.vocab_tables import NEG_INF, VocabTables
from model.net.config import ModelConfig

if TYPE_CHECKING:
    from model.net.tagger import CoupletTagger
    from model.net.transformer import CoupletTransformer

__all__ = ["Decoder"]

Tensor = np.ndarray  # (the search's arrays: float32 scores, int64 tokens)


def _runtime_copy(
    model: CoupletTransformer | CoupletTagger,
    int8: bool,
    runtime: Runtime,
    graph_cache: Path | None = None,
    key: str | None = None,
) -> Any:
    """The model as the search runs it: eager PyTorch (an int8 copy with ``int8``), or its
    graphs on ONNX Runtime (kept in ``graph_cache`` between runs when given, under ``key``:
    by default a digest of the model, onnx_engine.model_key)."""
    from model.net.transformer import CoupletTransformer

    if runtime == "onnx":
        # One thread: a step is too small to split (two threads per request measured no faster).
        if isinstance(model, CoupletTransformer):
            return OnnxTransformer(model, int8, cache_dir=graph_cache, key=key)
        return OnnxTagger(model, int8, cache_dir=graph_cache, key=key)
    from model.decoding.quantize import quantized

    return quantized(model) if int8 else model.eval()


def _engine(model: Any) -> Any:
    """``model`` speaking arrays, as the search asks: the ONNX engine does; a PyTorch module
    gets its adapter (model/decoding/torch_engine.py). (A process that has not imported
    PyTorch holds no PyTorch module.)"""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        from model.decoding.torch_engine import wrap

        return wrap(model)
    return model


class Decoder:
    """Lower lines for upper lines from a CoupletTransformer, under the couplet rules."""

    def __init__(
        self,
        model: CoupletTransformer | CoupletTagger,
        vocab: Vocab,
        int8: bool = False,
        proposer: CoupletTagger | None = None,
        runtime: Runtime = "torch",
        pairing: PairingTable | None = None,
        blocked: BlockedWords | None = None,
        graph_cache: Path | None = None,
        graph_keys: tuple[str | None, str | None] = (None, None),
    ) -> None:
        """``int8``: decode with copies of the models whose linear layers run in int8
        (dynamic quantisation: 1.2-1.7x faster steps on a CPU, logits within ~0.1).
        ``proposer``: an encoder-only model for the fast mode (``DecodeOptions.fast``): the
        rule-bound search runs over its one-pass distributions (no decoder steps), and
        ``model`` rescores its ``proposals`` best lines in one teacher-forced pass, which
        decides the order. Without ``fast`` the search runs on the encoder-decoder's own
        steps, with the proposer's one-pass log-probabilities as a second opinion
        (``ensemble_weight``) and its top tokens as the shortlist the output layer scores
        (``shortlist``; the shortlisted output layer stays fp32).
        ``runtime``: ``torch`` (eager PyTorch) or ``onnx`` (the models' graphs exported to
        ONNX Runtime, model/decoding/onnx_engine.py: PyTorch's results in fp32, steps 2-4x faster).
        ``pairing``: how well characters pair at one position (data/pairing.py), added to the
        search's scores with ``DecodeOptions.pairing_weight``.
        ``blocked``: words no candidate may complete (model/decoding/blocked.py), where they
        would be words of the line; locks that spell one raise ConstraintError.
        ``graph_cache``: a folder where the ONNX runtime keeps its exported graphs between runs
        (onnx_engine.GraphCache: the same bytes, so the same candidates, without the export),
        under ``graph_keys`` (the model's and the proposer's; None: a digest of the model).
        ``Decoder.from_engines`` builds one from ONNX engines alone, without PyTorch."""
        from model.net.transformer import CoupletTransformer

        if proposer is not None and not isinstance(model, CoupletTransformer):
            raise ValueError("a proposer's candidates are rescored by an encoder-decoder model")
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
        # the output layer's weight, transposed (d, V), for the shortlists' columns
        head_t = np.ascontiguousarray(model.head.weight.detach().float().numpy().T) if proposer else None
        self._setup(
            _runtime_copy(model, int8, runtime, graph_cache, graph_keys[0]),
            model.cfg,
            vocab,
            None if proposer is None else _runtime_copy(proposer, int8, runtime, graph_cache, graph_keys[1]),
            head_t,
            pairing,
            blocked,
        )

    @classmethod
    def from_engines(
        cls,
        engine: OnnxTransformer,
        vocab: Vocab,
        proposer: OnnxTagger | None = None,
        head_t: np.ndarray | None = None,
        pairing: PairingTable | None = None,
        blocked: BlockedWords | None = None,
    ) -> Decoder:
        """A decoder on ONNX engines already built (``OnnxTransformer.cached``: no PyTorch in
        the process); ``head_t``: the output layer's weight transposed (d, V), with a proposer."""
        if proposer is not None and head_t is None:
            raise ValueError("a proposer's shortlists need the output layer's weight (head_t)")
        decoder = cls.__new__(cls)
        decoder._setup(engine, engine.cfg, vocab, proposer, head_t, pairing, blocked)
        return decoder

    def _setup(
        self,
        model: Any,
        cfg: ModelConfig,
        vocab: Vocab,
        proposer: Any,
        head_t: np.ndarray | None,
        pairing: PairingTable | None,
        blocked: BlockedWords | None,
    ) -> None:
        # (the models as given or their runtime copies; the search runs ``engine`` and
        # ``proposer_engine``, the same models speaking arrays)
        self.model: Any = model
        self.proposer: Any = proposer
        self.head_t = head_t if head_t is not None else np.empty((0, 0), np.float32)
        self.vocab = vocab
        size = cfg.vocab_size
        if size < len(vocab):
            raise ValueError(f"model has {size} output ids but the vocabulary {len(vocab)}")
        pieces = vocab.pieces + [""] * (size - len(vocab))  # ids past the vocabulary: never
        self.tables = VocabTables.build(vocab, pieces)
        self.pairing = None if pairing is None else _PairingRows(pairing, pieces)
        if blocked is not None and blocked.vocab_size not in (len(vocab), size):
            raise ValueError(
                f"the blocked words are for {blocked.vocab_size} ids, the vocabulary has {len(vocab)}"
            )
        self.blocked = blocked if blocked is not None and len(blocked) else None
        # a lower_to_upper model (下联求上联): the line given is a lower line, the lines written
        # upper lines; the same rules but the tone at the end, reports of (written, given), and
        # its errors' messages with the lines' names swapped (ConstraintError.mirrored)
        self.reverse = cfg.reverse

    @property
    def engine(self) -> Any:
        """The model as the search runs it (arrays in, arrays out)."""
        return _engine(self.model)

    def engine_for(self, options: DecodeOptions) -> Any:
        """The engine writing in ``options.register`` (ConstraintError where the model does not)."""
        return in_register(self.engine, options.register, self.model.cfg.n_registers)

    @property
    def proposer_engine(self) -> Any:
        return None if self.proposer is None else _engine(self.proposer)

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
        return [r for r in results if r is not None]

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

    def _decode(self, plans: list[Plan], options: DecodeOptions) -> list[Answer]:
        weights = Weights(options.rhythm_weight, options.three_level_weight)
        position, stepwise = build_rules(plans, self.tables, weights)
        if self.blocked is not None:
            stepwise.append(NoBlockedWords(plans, self.blocked))
        length = plans[0].length
        table = fuse(position, len(plans), length, self.tables.size)  # (N, L+1, V)
        src = np.array([self.vocab.encode(p.upper) for p in plans], dtype=np.int64)  # (N, L)
        if self.pairing is not None and options.pairing_weight:
            self.pairing.add_to(table, src, options.pairing_weight)
        if self.proposer is None or not (options.fast or options.ensemble_weight or options.shortlist):
            tokens, search, logp = self._search(src, table, stepwise, options)
        else:
            tokens, search, logp = self._with_tagger(plans, table, src, stepwise, options)
        per_token = length + int(options.score_end)
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
        try:
            return self._alternatives(upper, lower, position, options or DecodeOptions(), k, pool)
        except ConstraintError as e:
            if self.reverse:
                raise e.mirrored() from e
            raise

    def _alternatives(
        self, upper: str, lower: str, position: int, options: DecodeOptions, k: int, pool: int
    ) -> Alternatives:
        if not 1 <= k <= MAX_CANDIDATES:
            raise ValueError(f"k must be 1..{MAX_CANDIDATES}, got {k}")
        _check_alternative_input(upper, lower, position, options.rules, self.vocab)
        view, plan = self.plan_view(upper, options)
        at = view.kept.index(position)
        line = [self.vocab.encode(lower[i])[0] for i in view.kept]
        head = [src if src >= 0 else i for i, src in enumerate(plan.copy_of)]
        group = [i for i in range(plan.length) if head[i] == head[at]]
        first = group[0]

        weights = Weights(options.rhythm_weight, options.three_level_weight)
        position_rules, stepwise = build_rules([plan], self.tables, weights)
        if self.blocked is not None:
            stepwise.append(NoBlockedWords([plan], self.blocked))
        table = fuse(position_rules, 1, plan.length, self.tables.size)  # (1, L+1, V)
        src = np.array([self.vocab.encode(plan.upper)], dtype=np.int64)
        if self.pairing is not None and options.pairing_weight:
            self.pairing.add_to(table, src, options.pairing_weight)
        if self.proposer is not None and options.ensemble_weight:  # the normal search's second opinion
            lattice = self.proposer_engine.encode(src)
            table[:, : plan.length] += options.ensemble_weight * lattice
        engine = self.engine_for(options)
        memory = engine.encode(src)

        local = next_scores(engine, src, table, stepwise, line[:first], memory)  # (V,)
        for i in group[1:]:
            local = local + table[0, i]
        own = line[first]
        count = int(np.isfinite(local).sum())
        ranked = topk(local, min(pool, count))[1].tolist() if count else []
        chars = list(dict.fromkeys([*ranked, own]))
        lines = np.tile(np.array(line, dtype=np.int64), (len(chars), 1))  # (C, L)
        lines[:, group] = np.array(chars, dtype=np.int64)[:, None]
        search, logp = forced_search(engine, src, table, stepwise, lines, options.score_end, memory)
        per_token = plan.length + int(options.score_end)
        order = [j for j in topk(search, len(search))[1].tolist() if math.isfinite(search[j])]
        chosen = set(order[:k]) | {j for j in order if chars[j] == own}
        tones = line_tones(view.original, plan.mode)
        found = []
        for j in order:
            if j not in chosen:
                continue
            text = view.text(self._text(plan, lines[j].tolist()))
            found.append(
                Alternative(
                    char=self.tables.pieces[chars[j]],
                    text=text,
                    rank_score=float(search[j]) / per_token,
                    score=float(logp[j]) / per_token,
                    tones=tone_marks(text, plan.mode),
                    report=check_answer(view.original, text, plan.mode, tones, self.reverse),
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
        upper_line, lower_line = (lower, view.original) if self.reverse else (view.original, lower)
        direction = REVERSE if self.reverse else FORWARD
        return Alternatives(direction, upper_line, lower_line, position, positions, found)

    def _with_tagger(
        self, plans: list[Plan], table: Tensor, src: Tensor, stepwise: list[StepRule], options: DecodeOptions
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The search with the tagger beside the model: tokens (N, K, L), search scores, model
        log-probs. One tagger pass gives its log-probabilities at every position (the lattice)
        and, with ``options.shortlist``, the shortlist: the tokens it ranks in its top k at
        some position among those the rules allow there (with the required characters and
        EOS). The normal search adds ``ensemble_weight`` times the lattice to the rule table
        (a second opinion on every step) and scores only the shortlist; the fast mode searches
        the lattice itself, within the shortlist, and rescores its proposals with the model.
        When the shortlist leaves some request without a line, the batch is searched again
        over the whole vocabulary."""
        proposer = self.proposer_engine
        lattice = proposer.encode(src)  # (N, L, V) log-probabilities
        length = lattice.shape[1]
        shortlist = self._shortlist(plans, table[:, :length] + lattice, options.shortlist)
        if options.fast:
            strategy = strategy_for(stepwise, max(options.beam, options.proposals))

            def lattice_search(lst: Shortlist | None) -> Found:  # the lattice has no output layer
                return run_search(
                    proposer,
                    src,
                    table,
                    stepwise,
                    strategy,
                    score_end=options.score_end,
                    shortlist=lst,
                    memory=lattice,
                )

            found, listed = _with_fallback(shortlist, lattice_search)
            return self._rescore(src, *found, options, listed)
        table = table.copy()
        table[:, :length] += options.ensemble_weight * lattice
        found, _ = _with_fallback(shortlist, lambda lst: self._search(src, table, stepwise, options, lst))
        return found

    def _search(
        self,
        src: Tensor,
        table: Tensor,
        stepwise: list[StepRule],
        options: DecodeOptions,
        shortlist: Shortlist | None = None,
    ) -> Found:
        """The encoder-decoder's search as ``options`` ask (plain, diverse or banked)."""
        strategy = strategy_for(stepwise, options.beam, options.groups, options.diversity)
        return run_search(
            self.engine_for(options),
            src,
            table,
            stepwise,
            strategy,
            score_end=options.score_end,
            shortlist=shortlist,
        )

    def _shortlist(self, plans: list[Plan], ranked: Tensor, k: int) -> Shortlist | None:
        """ranked (N, L, V): the rule table plus the lattice -> the shortlist of its top ``k``
        per position (None for k = 0)."""
        if not k:
            return None
        values, top = topk(ranked, min(k, ranked.shape[-1]))  # (N, L, k)
        rows = []
        for n, plan in enumerate(plans):
            also = np.array([*plan.required, EOS_ID], dtype=np.int64)
            rows.append(np.unique(np.concatenate([top[n][np.isfinite(values[n])], also])))  # sorted
        return Shortlist.from_rows(rows, self.head_t)

    def _rescore(
        self,
        src: Tensor,
        tokens: Tensor,
        search: Tensor,
        logp: Tensor,
        options: DecodeOptions,
        shortlist: Shortlist | None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The proposer's candidates re-ranked by the encoder-decoder's log-probability plus
        the search's preferences (and ``proposer_weight`` times the proposer's log-probability)
        -> tokens, search scores, model log-probs, best first per request."""
        ar = rescore(self.engine_for(options), src, tokens, options.score_end, shortlist)  # (N, K)
        live = np.isfinite(search)
        with np.errstate(invalid="ignore"):  # (-inf - -inf in dead rows: replaced)
            preferences = np.where(live, search - logp, np.float32(NEG_INF))  # (N, K) 0 or the penalties
            final = np.where(
                live, ar + preferences + np.float32(options.proposer_weight) * logp, np.float32(NEG_INF)
            )
        final, order = topk(final.astype(np.float32), final.shape[1])
        return (
            np.take_along_axis(tokens, order[:, :, None], 1),
            final,
            np.take_along_axis(ar, order, 1),
        )

    def _result(
        self, plan: Plan, tokens: Tensor, search: Tensor, score: Tensor, options: DecodeOptions
    ) -> Answer:
        """tokens (K, L), search (K,), score (K,), both per token -> the distinct live
        candidates, best first."""
        seen: set[str] = set()
        candidates = []
        for ids, s, sc in zip(tokens.tolist(), search.tolist(), score.tolist(), strict=True):
            text = self._text(plan, ids)
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

    def _text(self, plan: Plan, ids: list[int]) -> str:
        # A mirrored punctuation mark is copied from the upper line (it may be unknown).
        pieces = self.tables.pieces
        return "".join(
            u if t >= 0 else pieces[i] for u, t, i in zip(plan.upper, plan.punct, ids, strict=True)
        )


Found = tuple[Tensor, Tensor, Tensor]  # run_search's tokens, search scores, model log-probs


@dataclass(frozen=True)
class ModelView:
    """An upper line as the model reads it: without the punctuation marks its vocabulary
    lacks, and without the marks that end the line. The model never saw 。《》“” and the
    like (the training lines have none), and read as unknown characters they unsettled every
    candidate (a final 。 changed the top line of 90% of 300 test lines); a final mark says
    nothing the lower line must answer. Left-out marks are put back in every candidate at
    their positions, which is what the punctuation rule asks (mirrored marks)."""

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

    def plan(self, decoder: Decoder, options: DecodeOptions) -> Plan:
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


class _PairingRows:
    """A pairing table in one vocabulary's token ids (CSR rows by the upper token)."""

    def __init__(self, table: PairingTable, pieces: list[str]) -> None:
        self.indptr, self.cols, self.vals = table.for_vocab(pieces)

    def add_to(self, table: Tensor, src: Tensor, weight: float) -> None:
        """table (N, L+1, V) += ``weight`` times each position's row for src (N, L), in place.
        A position whose character is banned there stays banned (-inf plus a score)."""
        n, length = src.shape
        starts = self.indptr[src].reshape(-1)  # (N*L,)
        counts = self.indptr[src + 1].reshape(-1) - starts
        if not int(counts.sum()):
            return
        rows = np.repeat(np.arange(n * length), counts)
        first = np.repeat(starts - (np.cumsum(counts) - counts), counts)
        entries = first + np.arange(len(rows))  # each row's own slice of cols / vals
        # (each (row, column) once: a row of the pairing table names a column once)
        table[rows // length, rows % length, self.cols[entries]] += np.float32(weight) * self.vals[entries]


def _with_fallback(
    shortlist: Shortlist | None, search: Callable[[Shortlist | None], Found]
) -> tuple[Found, Shortlist | None]:
    """``search`` within the shortlist, and again over the whole vocabulary when that left
    some request without a line -> what was found, and the shortlist it was found in."""
    if shortlist is not None:
        found = search(shortlist)
        if np.isfinite(found[1][:, 0]).all():
            return found, shortlist
    return search(None), None


def _check_alternative_input(upper: str, lower: str, position: int, rules: bool, vocab: Vocab) -> None:
    """What ``Decoder.alternatives`` needs of its input before any model runs."""
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
