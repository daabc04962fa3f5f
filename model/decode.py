"""Beam search for lower lines under the couplet rules.

``Decoder(model, vocab)`` builds the per-vocabulary tables (tones, special pieces) once.
``generate(upper, options)`` plans the request (checking its constraints up front, see
model/constraints.py), fuses the position rules into one ``(N, L+1, V)`` table, runs a
fixed-length beam search over the model's KV cache, and reports each candidate with the
string-level rule check of model/rules.py. ``generate_batch`` decodes many upper lines at
once, grouped by length (every line of a group takes the same number of steps).

Shapes: N requests, K beams, B = N*K rows, L line length, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from data.text import is_punct
from data.vocab import BOS_ID, Vocab
from model.constraints import (
    ConstraintError,
    Plan,
    Step,
    VocabTables,
    Weights,
    build_rules,
    fuse,
    plan_request,
)
from model.rules import check
from model.tones import Tone, mark
from model.transformer import CoupletTransformer

MAX_CANDIDATES = 20

__all__ = ["Candidate", "ConstraintError", "DecodeOptions", "DecodeResult", "Decoder", "beam_search"]


@dataclass(frozen=True)
class DecodeOptions:
    """What to generate. ``rules=False`` is a plain beam search with only the exact length
    (and the user's locks / required characters); the weights set the preferences (0 = off)."""

    n_best: int = 10
    beam_size: int | None = None  # default n_best; never fewer than n_best
    tone_mode: str = "modern"  # modern | lenient | classical (needs RUSHENG_TABLE)
    rules: bool = True
    tone_end: bool = True  # the hard tone-at-the-end rule (only with rules on)
    locks: str | None = None  # e.g. "__春___": '_' or '＿' free, any other character locked
    required_first: str | None = None  # 藏头: the first character
    required_chars: str = ""  # 嵌字: each must appear somewhere
    rhythm_weight: float = 1.0  # cost of an unopposed tone at a rhythm position
    three_level_weight: float = 1.0  # cost of a level tone that makes a 三平尾

    @property
    def beam(self) -> int:
        return max(self.n_best, self.beam_size or self.n_best)


@dataclass(frozen=True)
class Candidate:
    text: str
    score: float  # model log-probability per token (the L characters and the end)
    report: dict[str, bool | float | None]  # model.rules.check(...).as_dict()


@dataclass(frozen=True)
class DecodeResult:
    upper: str
    candidates: list[Candidate]
    unknown_chars: list[str] = field(default_factory=list)  # encoded as unk, still mirrored
    upper_end_tone: str = ""  # 平 / 仄 / 中 / "" of the upper line's last character
    probably_reversed: bool = False  # the upper ends level: the pair is probably the other way


@torch.inference_mode()
def beam_search(
    model: CoupletTransformer, src: Tensor, table: Tensor, step_rules: Sequence[object], beam: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Fixed-length beam search: src (N, S), table (N, L+1, V) -> tokens (N, K, L),
    search scores (N, K) (log-probs plus preferences), model log-probs (N, K)."""
    n, steps, v = table.shape
    k = beam
    row = torch.arange(n).repeat_interleave(k)  # (B,) the request of each row
    cache = model.reorder_cache(model.new_cache(model.encode(src), src), row)
    prev = torch.full((n * k,), BOS_ID, dtype=torch.long)
    search = torch.full((n, k), float("-inf"))
    search[:, 0] = 0.0  # one live beam at the start, so the first step gives K distinct ones
    logp_sum = torch.zeros(n * k)
    tokens = torch.empty(n * k, 0, dtype=torch.long)
    offset = (torch.arange(n) * k)[:, None]  # (N, 1)
    for pos in range(steps):
        logp = F.log_softmax(model.step(cache, prev, pos).float(), dim=-1)  # (B, V)
        scores = (logp.view(n, k, v) + table[:, None, pos]).view(n * k, v)
        for rule in step_rules:
            scores = rule(scores, Step(pos, tokens, row))  # type: ignore[operator]
        total = (search[:, :, None] + scores.view(n, k, v)).view(n, k * v)  # (N, K*V)
        search, flat = total.topk(k, dim=1)  # (N, K)
        parent = (offset + flat // v).view(-1)  # (B,) row each new beam extends
        tok = (flat % v).view(-1)  # (B,)
        logp_sum = logp_sum[parent] + logp[parent, tok]
        tokens = torch.cat([tokens[parent], tok[:, None]], dim=1)  # (B, pos+1)
        if pos + 1 < steps:
            cache = model.reorder_cache(cache, parent)
        prev = tok
    return tokens[:, : steps - 1].view(n, k, steps - 1), search, logp_sum.view(n, k)


class Decoder:
    """Lower lines for upper lines from a CoupletTransformer, under the couplet rules."""

    def __init__(self, model: CoupletTransformer, vocab: Vocab) -> None:
        self.model = model.eval()
        self.vocab = vocab
        size = model.cfg.vocab_size
        if size < len(vocab):
            raise ValueError(f"model has {size} output ids but the vocabulary {len(vocab)}")
        pieces = vocab.pieces + [""] * (size - len(vocab))  # ids past the vocabulary: never
        self.tables = VocabTables.build(vocab, pieces)

    def plan(self, upper: str, options: DecodeOptions) -> Plan:
        if len(upper) + 1 > self.model.cfg.max_len:
            raise ConstraintError(
                "length",
                f"上联太长（{len(upper)}字），最多{self.model.cfg.max_len - 1}字",
                f"the upper line has {len(upper)} characters; at most {self.model.cfg.max_len - 1}",
            )
        return plan_request(
            upper,
            self.vocab,
            self.tables,
            rules=options.rules,
            mode=options.tone_mode,
            tone_end=options.tone_end,
            locks=options.locks,
            required_first=options.required_first,
            required_chars=options.required_chars,
        )

    def generate(self, upper: str, options: DecodeOptions | None = None) -> DecodeResult:
        return self.generate_batch([upper], options)[0]

    def generate_batch(
        self, uppers: Sequence[str], options: DecodeOptions | None = None, batch_size: int = 32
    ) -> list[DecodeResult]:
        """Results in the order of ``uppers``; lines of one length are decoded together.
        Raises ConstraintError for the first line whose constraints cannot be met."""
        options = options or DecodeOptions()
        if not 1 <= options.n_best <= MAX_CANDIDATES:
            raise ValueError(f"n_best must be 1..{MAX_CANDIDATES}, got {options.n_best}")
        plans = [self.plan(u, options) for u in uppers]
        by_length: dict[int, list[int]] = {}
        for i, p in enumerate(plans):
            by_length.setdefault(p.length, []).append(i)
        results: list[DecodeResult | None] = [None] * len(plans)
        for idx in by_length.values():
            for start in range(0, len(idx), batch_size):
                chunk = idx[start : start + batch_size]
                for i, res in zip(chunk, self._decode([plans[i] for i in chunk], options), strict=True):
                    results[i] = res
        return [r for r in results if r is not None]

    def _decode(self, plans: list[Plan], options: DecodeOptions) -> list[DecodeResult]:
        weights = Weights(options.rhythm_weight, options.three_level_weight)
        position, stepwise = build_rules(plans, self.tables, weights)
        length = plans[0].length
        table = fuse(position, len(plans), length, self.tables.size)  # (N, L+1, V)
        src = torch.tensor([self.vocab.encode(p.upper) for p in plans])  # (N, L)
        tokens, search, logp = beam_search(self.model, src, table, stepwise, options.beam)
        return [
            self._result(plan, tokens[n], search[n], logp[n] / (length + 1), options)
            for n, plan in enumerate(plans)
        ]

    def _result(
        self, plan: Plan, tokens: Tensor, search: Tensor, score: Tensor, options: DecodeOptions
    ) -> DecodeResult:
        """tokens (K, L), search (K,), score (K,) -> the distinct live candidates, best first."""
        seen: set[str] = set()
        candidates = []
        for ids, s, sc in zip(tokens.tolist(), search.tolist(), score.tolist(), strict=True):
            text = self._text(plan, ids)
            if s == float("-inf") or text in seen:
                continue
            seen.add(text)
            report = check(plan.upper, text, plan.mode).as_dict()
            candidates.append(Candidate(text, sc, report))
            if len(candidates) == options.n_best:
                break
        if not candidates:
            raise ConstraintError(
                "search", "在所有约束下找不到下联", "no lower line satisfies all the constraints together"
            )
        end = _end_tone(plan)
        return DecodeResult(
            plan.upper, candidates, self.vocab.unknown(plan.upper), mark(end), end == Tone.LEVEL
        )

    def _text(self, plan: Plan, ids: list[int]) -> str:
        # A mirrored punctuation mark is copied from the upper line (it may be unknown).
        pieces = self.tables.pieces
        return "".join(
            u if t >= 0 else pieces[i] for u, t, i in zip(plan.upper, plan.punct, ids, strict=True)
        )


def _end_tone(plan: Plan) -> Tone:
    for ch, tone in zip(reversed(plan.upper), reversed(plan.upper_tones), strict=True):
        if not is_punct(ch):
            return tone
    return Tone.NONE
