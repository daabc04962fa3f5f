"""Beam search for lower lines under the couplet rules.

``Decoder(model, vocab)`` builds the per-vocabulary tables (tones, special pieces) once.
``generate(upper, options)`` plans the request (checking its constraints up front, see
model/constraints.py), fuses the position rules into one ``(N, L+1, V)`` table, runs a
fixed-length beam search over the model's KV cache, and reports each candidate with the
string-level rule check of data/rules.py. ``generate_batch`` decodes many upper lines at
once, grouped by length (every line of a group takes the same number of steps). With
required characters (嵌字) the beam is shared out over how many each beam has placed.

Shapes: N requests, K beams, B = N*K rows, L line length, V vocabulary.
"""

from __future__ import annotations

import copy
import functools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast, get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from data.rules import (
    RuleReport,
    no_reuse,
    no_three_level_tail,
    punctuation_mirrored,
    repeats_mirrored,
    rhythm_share,
    tone_end_ok,
)
from data.text import is_punct
from data.tones import Tone, line_tones, mark
from data.vocab import BOS_ID, PAD_ID, Vocab
from model.bundle import Runtime
from model.constraints import (
    NEG_INF,
    ConstraintError,
    Plan,
    RequiredChars,
    Step,
    VocabTables,
    Weights,
    build_rules,
    fuse,
    plan_request,
)
from model.tagger import CoupletTagger
from model.transformer import EOS_ID, CoupletTransformer, DecoderCache, LayerCache

MAX_CANDIDATES = 20
DIVERSE_PENALTY = 1.0  # ``diversity`` of a served ``diverse`` request (docs/EXPERIMENTS.md §8)

__all__ = ["Candidate", "ConstraintError", "DecodeOptions", "DecodeResult", "Decoder", "beam_search"]


@dataclass(frozen=True)
class DecodeOptions:
    """What to generate. ``rules=False`` is a plain beam search with only the exact length
    (and the user's locks / required characters); the weights set the preferences (0 = off)."""

    n_best: int = 10
    beam_size: int | None = None  # default n_best; never fewer than n_best
    tone_mode: str = "modern"  # modern | lenient | classical (入声 oblique: data.tones)
    rules: bool = True
    tone_end: bool = True  # the hard tone-at-the-end rule (only with rules on)
    locks: str | None = None  # e.g. "__春___": '_' or '＿' free, any other character locked
    required_first: str | None = None  # 藏头: the first character (after any opening punctuation)
    required_chars: str = ""  # 嵌字: each must appear somewhere
    rhythm_weight: float = 1.0  # cost of an unopposed tone at a rhythm position
    three_level_weight: float = 2.0  # cost of a level tone that makes a 三平尾
    score_end: bool = False  # one more model step for log P(end of sequence) after the line
    fast: bool = False  # with a proposer: search its one-pass lattice, rescore (faster, lower BLEU)
    # with a proposer: its log-probabilities' weight in the normal search; with the session-12
    # tagger 1.5 beat 1.0 on 3,000 validation lines, BLEU-4 3.73 against 3.70 and 3.74 against
    # 3.46 (1.25 and 1.75 in between; docs/EXPERIMENTS.md §17)
    ensemble_weight: float = 1.5
    # fast mode: how many candidates the proposer's search hands to the rescoring (at least n_best);
    # 10 scored as 40 did on 400 test lines, in 30 ms a request against 54 (docs/EXPERIMENTS.md §6)
    proposals: int = 10
    proposer_weight: float = 0.0  # with a proposer: weight of its log-probability in the final score
    # with a proposer: the output layer scores only its top-k of each position (0: all); 16 gave
    # the BLEU of 32 and 24 on 1,000 validation lines, 0.8 ms sooner (docs/EXPERIMENTS.md §13)
    shortlist: int = 16
    # > 0: diverse beam search; the beam is split into n_best groups, one candidate each, and a
    # group pays this much for a character an earlier group chose at the same position
    diversity: float = 0.0

    @property
    def groups(self) -> tuple[int, ...]:
        """The beams of each group of a diverse search: two for the first (its line is the best
        candidate, and two beams found lines as good as five or ten, one did not: docs/
        EXPERIMENTS.md §8), one for each other, and ``beam_size`` is not used; () for one plain
        beam (without ``diversity``, in the fast mode, whose proposals are rescored as one
        list, and for one candidate)."""
        if self.diversity > 0 and not self.fast and self.n_best > 1:
            return (2,) + (1,) * (self.n_best - 1)
        return ()

    @property
    def beam(self) -> int:
        return sum(self.groups) or max(self.n_best, self.beam_size or self.n_best)


@dataclass(frozen=True)
class Candidate:
    text: str
    score: float  # model log-probability per token (L characters, the end if scored), over the shortlist
    report: dict[str, bool | float | None]  # data.rules.check(...).as_dict()
    # The search's score per token, by which candidates come best first: ``score`` plus, with a
    # proposer, its log-probability times ``ensemble_weight`` (normal search) or
    # ``proposer_weight`` (fast mode), plus the rhythm and 三平尾 preferences' penalties.
    rank: float = math.nan


@dataclass(frozen=True)
class DecodeResult:
    upper: str
    candidates: list[Candidate]
    unknown_chars: list[str] = field(default_factory=list)  # encoded as unk, still mirrored
    upper_end_tone: str = ""  # 平 / 仄 / 中 / "" of the upper line's last character
    probably_reversed: bool = False  # the upper ends level: the pair is probably the other way


class StepModel(Protocol):
    """What the beam search needs of a model: the encoder-decoder's KV-cached steps, or
    the tagger's lattice (model/tagger.py)."""

    def encode(self, src: Tensor) -> Tensor: ...

    def new_cache(self, memory: Tensor, src: Tensor) -> Any: ...

    def step(self, cache: Any, prev: Tensor, pos: int) -> Tensor: ...

    def reorder_cache(self, cache: Any, index: Tensor) -> Any: ...


@torch.inference_mode()
def beam_search(
    model: StepModel,
    src: Tensor,
    table: Tensor,
    step_rules: Sequence[object],
    beam: int,
    score_end: bool = True,
    shortlist: Shortlist | None = None,
    memory: Tensor | None = None,
    groups: Sequence[int] = (),
    diversity: float = 0.0,
) -> tuple[Tensor, Tensor, Tensor]:
    """Fixed-length beam search: src (N, S), table (N, L+1, V) -> tokens (N, K, L),
    search scores (N, K) (log-probs plus preferences), model log-probs (N, K).

    Without ``score_end`` the search stops after the L characters: the end of sequence,
    forced at L, is then not scored (it saves a whole model step). With a ``shortlist``
    the search runs over each request's listed tokens only (its columns: the rest of the
    vocabulary is impossible), and the output layer scores those alone. ``memory``:
    ``model.encode(src)`` when it is already at hand. ``groups``, the beams of each group
    (summing to ``beam``): diverse beam search (Vijayakumar et al., AAAI 2018): each group
    keeps its own beams, at every step a group's choice pays ``diversity`` for each beam of an
    earlier group that took the same token at this position (a Hamming penalty), and at the
    last character no group may complete an earlier group's line. Then K is the number of
    groups: the best line of each, scored without the penalty, best first. Not with required
    characters (their bank allocation is the search's only grouping)."""
    steps = table.size(1)
    length = steps - 1
    steps = steps if score_end else length
    memory = model.encode(src) if memory is None else memory
    cache = _fit_cache(model.new_cache(memory, src), steps)
    if shortlist is not None:  # from here on a token is a column of its request's list
        table = shortlist.gather(table)
        step_rules = [cast(Any, rule).on_columns(shortlist.ids) for rule in step_rules]
    n, _, v = table.shape
    scored = shortlist is not None and hasattr(model, "step_states")  # the output layer's listed rows
    in_graph = scored and hasattr(model, "step_log_probs")  # ONNX: the listed rows scored in the step
    width = 1  # live beams per request: one at the start (K copies would be equal), then K
    prev = torch.full((n,), BOS_ID, dtype=torch.long)
    search = torch.zeros(n, 1)  # (N, width)
    logp_sum = torch.zeros(n)  # (B,)
    tokens = torch.empty(n, 0, dtype=torch.long)  # (B, pos)
    banked = next((r for r in step_rules if isinstance(r, RequiredChars)), None)
    normalised = getattr(model, "steps_are_log_probs", False)  # the tagger's lattice is
    layouts: dict[int, tuple[Tensor, Tensor]] = {}  # width -> each row's request (B,), first rows (N, 1)
    for pos in range(steps):
        if width not in layouts:
            layouts[width] = torch.arange(n).repeat_interleave(width), torch.arange(n)[:, None] * width
        row, first = layouts[width]
        if in_graph:
            logp = cast(Any, model).step_log_probs(cache, prev, pos, cast(Shortlist, shortlist).listed)
        elif scored:
            logp = cast(Shortlist, shortlist).log_probs(cast(Any, model).step_states(cache, prev, pos))
        else:
            logp = model.step(cache, prev, pos).float()  # (B, V)
            logp = logp if normalised else F.log_softmax(logp, dim=-1)
            logp = logp if shortlist is None else shortlist.pick(logp)  # (B, M)
        scores = (logp.view(n, width, v) + table[:, None, pos]).view(n * width, v)
        for rule in step_rules:
            scores = rule(scores, Step(pos, tokens, row))  # type: ignore[operator]
        total = scores.view(n, width, v).add_(search[:, :, None]).view(n, width * v)  # (N, width*V)
        if banked is None and groups:
            keys = _prefix_keys(row, tokens) if pos == length - 1 else None
            search, flat = _diverse_topk(total.view(n, width, v), groups, diversity, keys)
        elif banked is None:
            search, flat = _topk(total, beam)  # (N, K)
        else:
            bank = banked.banks(Step(pos, tokens, row), v).view(n, width * v)
            search, flat = allocate(total, bank, beam, banked.n_banks)
        parent = (first + flat // v).view(-1)  # (B',) the row each beam extends
        tok = (flat % v).view(-1)  # (B',)
        logp_sum = logp_sum[parent] + logp[parent, tok]
        tokens = torch.cat([tokens[parent], tok[:, None]], dim=1)  # (B', pos+1)
        if pos + 1 < steps:  # the first reorder widens every row of the cache, later ones only move beams
            cache = _reorder_beams(model, cache, parent) if width > 1 else model.reorder_cache(cache, parent)
        width = search.size(1)
        prev = tok if shortlist is None else shortlist.token_ids(tok.view(n, width)).view(-1)  # (B',) ids
    k = search.size(1)
    if banked is None and groups:  # each group's best line, best first
        rows_of = _group_rows(tuple(groups))  # (G, most beams of a group)
        best = rows_of[torch.arange(len(groups)), search[:, rows_of].argmax(2)]  # (N, G)
        search, order = search.gather(1, best).sort(dim=1, descending=True)
        rows = (torch.arange(n)[:, None] * k + best.gather(1, order)).view(-1)
        tokens, logp_sum, k = tokens[rows], logp_sum[rows], len(groups)
    tokens = tokens[:, :length].reshape(n, k * length)
    tokens = tokens if shortlist is None else shortlist.token_ids(tokens)
    return tokens.view(n, k, length), search, logp_sum.view(n, k)


@functools.lru_cache(maxsize=64)
def _group_rows(groups: tuple[int, ...]) -> Tensor:
    """(G, S) the beam rows of each group, a shorter group's padded with its first row."""
    widest, first, rows = max(groups), 0, []
    for size in groups:
        rows.append([first + i for i in range(size)] + [first] * (widest - size))
        first += size
    return torch.tensor(rows)


def _prefix_keys(row: Tensor, tokens: Tensor) -> Tensor:
    """(B,) one number per distinct (request, prefix) of rows (B,) with prefixes tokens (B, pos)."""
    return torch.unique(torch.cat([row[:, None], tokens], 1), dim=0, return_inverse=True)[1]


def _diverse_topk(
    total: Tensor, groups: Sequence[int], penalty: float, keys: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Diverse beam search's choice: scores total (N, width, V), width 1 (every group extends
    the first row) or K = sum(groups) (each group owns its rows, in order) -> scores (N, K)
    without the penalty and indices into width*V, group by group. With the rows' prefix
    ``keys`` (B,) a group may not take a token that an earlier group took after the same prefix.
    (Groups choose one after another, so the loop is kept to a few tensor operations.)"""
    n, width, v = total.shape
    flat_total = total.view(n, width * v)
    charged = total.new_zeros(n, v)  # (N, V) the penalty each token carries here so far
    search: list[Tensor] = []
    flat: list[Tensor] = []
    made: list[tuple[Tensor, Tensor]] = []  # (N, size) (prefix key, token) pairs chosen so far
    first = 0
    for size in groups:
        rows = 1 if width == 1 else size
        own = flat_total[:, first * v : (first + rows) * v]  # (N, rows*V)
        penalised = own - (charged if rows == 1 else charged.repeat(1, rows))
        if keys is not None and made:
            penalised = penalised.masked_fill(
                _repeats(keys.view(n, width)[:, first : first + rows], made, v), NEG_INF
            )
        value, pick = penalised.max(1, keepdim=True) if size == 1 else _topk(penalised, size)
        score = own.gather(1, pick)
        search.append(score if keys is None else score.masked_fill(value == NEG_INF, NEG_INF))
        flat.append(pick + first * v)
        token = pick % v
        charged.scatter_add_(1, token, torch.full(token.shape, penalty))
        if keys is not None:
            made.append((keys.view(n, width).gather(1, first + pick // v), token))
        first += 0 if width == 1 else size
    return torch.cat(search, 1), torch.cat(flat, 1)


def _repeats(mine: Tensor, made: list[tuple[Tensor, Tensor]], size: int) -> Tensor:
    """(N, rows*V) bool: the tokens that, after the prefixes ``mine`` (N, rows) (their keys),
    would repeat a (prefix key, token) pair an earlier group made."""
    their_keys, their_tokens = (torch.cat(x, 1) for x in zip(*made, strict=True))  # (N, P)
    same = mine[:, :, None] == their_keys[:, None, :]  # (N, rows, P)
    repeat = torch.zeros(*mine.shape, size, dtype=torch.long)
    repeat.scatter_add_(2, their_tokens[:, None].expand_as(same), same.long())
    return (repeat > 0).view(mine.size(0), -1)


def _topk(total: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """``total.topk(k, dim=1)`` for scores total (N, C), always k wide: when C < k (a short
    list at the first step) the rest are dead beams (-inf), as over the whole vocabulary the
    search keeps its width after the first step."""
    search, pick = total.topk(min(k, total.size(1)), dim=1)
    if pick.size(1) < k:
        short = k - pick.size(1)
        search = torch.cat([search, search.new_full((search.size(0), short), NEG_INF)], 1)
        pick = torch.cat([pick, pick.new_zeros((pick.size(0), short))], 1)
    return search, pick


@dataclass(frozen=True)
class Shortlist:
    """Per request, the tokens the output layer scores: ids (N, M) (PAD where a request has
    fewer) and their rows of the output layer, transposed, weight (N, d, M). Log-probabilities
    are normalised over the shortlist: the mass left out (the tokens no position's proposer
    ranked high) is taken as nothing."""

    ids: Tensor
    weight: Tensor

    @classmethod
    def build(cls, ids: list[list[int]], head: Tensor) -> Shortlist:
        """From lists of ids and the output layer's weight (V, d)."""
        return cls.from_rows([torch.tensor(row, dtype=torch.long) for row in ids], head.t())

    @classmethod
    def from_rows(cls, rows: list[Tensor], head_t: Tensor) -> Shortlist:
        """From each request's ids (M_n,) and the output layer's weight, transposed (d, V)
        (contiguous: its columns are gathered)."""
        width = max(len(row) for row in rows)
        padded = torch.full((len(rows), width), PAD_ID, dtype=torch.long)  # (N, M)
        for n, row in enumerate(rows):
            padded[n, : len(row)] = row
        d = head_t.size(0)
        weight = head_t.index_select(1, padded.flatten()).view(d, len(rows), width).transpose(0, 1)
        return cls(padded, weight.contiguous())

    @functools.cached_property
    def listed(self) -> tuple[Tensor, Tensor]:
        """The output layer's listed rows for a step that scores them itself
        (``step_log_probs``): weight (N, d, M), and bias (N, 1, M), -inf at the padding."""
        bias = torch.zeros(self.ids.shape).masked_fill_(self.ids == PAD_ID, NEG_INF)[:, None]
        return self.weight, bias

    def log_probs(self, states: Tensor) -> Tensor:
        """states (B, d) of B = N*width rows -> log-probabilities (B, M) of the listed
        tokens, -inf at the padding."""
        n, _, m = self.weight.shape
        width = states.size(0) // n
        logits = torch.bmm(states.float().view(n, width, -1), self.weight)  # (N, width, M)
        logits.masked_fill_((self.ids == PAD_ID)[:, None], NEG_INF)
        return logits.log_softmax(-1).view(n * width, m)

    def pick(self, scores: Tensor) -> Tensor:
        """scores (B, V) of B = N*width rows -> their listed columns (B, M)."""
        n, m = self.ids.shape
        return self.gather(scores.view(n, -1, scores.size(1))).view(-1, m)

    def gather(self, table: Tensor) -> Tensor:
        """Rows of each request over the vocabulary, (N, R, V), e.g. the rule table (N, L+1, V)
        -> their listed columns (N, R, M) (-inf at the padding: PAD is never a token)."""
        n, m = self.ids.shape
        return table.gather(2, self.ids[:, None].expand(n, table.size(1), m))

    def token_ids(self, columns: Tensor) -> Tensor:
        """columns (N, X) of each request's list -> the token ids there (N, X)."""
        return self.ids.gather(1, columns)

    def columns(self, size: int) -> Tensor:
        """(N, V): each token's column in its request's list, -1 off the list."""
        n, m = self.ids.shape
        col = torch.full((n, size), -1, dtype=torch.long)
        col.scatter_(1, self.ids, torch.arange(m).expand(n, m))
        col[:, PAD_ID] = -1  # (the padding of shorter lists)
        return col


def allocate(total: Tensor, bank: Tensor, k: int, n_banks: int) -> tuple[Tensor, Tensor]:
    """Choose ``k`` of the candidates total (N, C) with bank (N, C) (how many required
    characters each holds): the best of every bank first, an equal share each, then the
    best of the rest -> scores (N, K) best first, candidate indices (N, K)."""
    quota = max(1, k // n_banks)
    c = total.size(1)
    picks = [total.masked_fill(bank != b, NEG_INF).topk(min(quota, c), dim=1) for b in range(n_banks)]
    best = total.topk(min(k, c), dim=1)
    order = torch.cat([p.indices for p in picks] + [best.indices], dim=1).tolist()  # (N, banks*quota + K)
    values = torch.cat([p.values for p in picks] + [best.values], dim=1).tolist()
    n_picks = n_banks * min(quota, c)
    chosen = []
    for idx, val in zip(order, values, strict=True):
        keep: dict[int, float] = {}
        for j, (i, s) in enumerate(zip(idx, val, strict=True)):
            if len(keep) == k:
                break
            if i not in keep and not (j < n_picks and s == NEG_INF):  # (an empty bank gives nothing)
                keep[i] = s
        chosen.append(sorted(keep, key=keep.__getitem__, reverse=True))
    flat = torch.tensor(chosen)  # (N, K): the global best fill every row to min(k, C)
    return total.gather(1, flat), flat


@torch.inference_mode()
def rescore(
    model: CoupletTransformer,
    src: Tensor,
    tokens: Tensor,
    score_end: bool = False,
    shortlist: Shortlist | None = None,
) -> Tensor:
    """Summed log-probabilities under the encoder-decoder of candidate lines: src (N, S),
    tokens (N, K, L) -> (N, K); one teacher-forced pass for all N*K candidates (with
    ``score_end``, the end of sequence after the line counts too). With a ``shortlist``
    the log-probabilities are normalised over each request's list (-inf off it).

    Candidates from one beam share prefixes, and a position's distribution depends only
    on the prefix before it, so the output layer (the costly part) runs once per distinct
    prefix."""
    n, k, length = tokens.shape
    rows = tokens.reshape(n * k, length)
    target = torch.cat([rows, torch.full((n * k, 1), EOS_ID)], 1) if score_end else rows
    tgt_in = torch.cat([torch.full((n * k, 1), BOS_ID), target[:, :-1]], 1)  # (NK, T)
    memory = model.encode(src).repeat_interleave(k, 0)  # (NK, S, d): the encoder runs once per line
    states = model.decode_states(memory, src.repeat_interleave(k, 0), tgt_in).flatten(0, 1)  # (NK*T, d)
    which, firsts = _distinct_prefixes(tgt_in.tolist(), k)
    which_t, target = torch.tensor(which), target.flatten()
    if shortlist is None:
        logits = model.logits(states[firsts]).float()  # (U, V)
        columns = target
    else:  # the prefixes come request by request: each request's rows against its own list
        hidden = model.dec_norm(states[firsts]).float()  # (U, d)
        per_request = torch.bincount(torch.tensor(firsts) // (k * tgt_in.size(1)), minlength=n)
        parts = hidden.split(per_request.tolist())
        logits = torch.cat([p @ shortlist.weight[i] for i, p in enumerate(parts)])  # (U, M)
        logits.masked_fill_((shortlist.ids == PAD_ID).repeat_interleave(per_request, 0), NEG_INF)
        request = torch.arange(n * k).repeat_interleave(tgt_in.size(1)) // k  # (NK*T,)
        columns = shortlist.columns(model.cfg.vocab_size)[request, target]
    norm = torch.logsumexp(logits, dim=-1)  # (U,)
    picked = logits[which_t, columns.clamp(min=0)] - norm[which_t]  # (NK*T,)
    picked = picked.masked_fill(columns < 0, NEG_INF)
    return picked.view(n, k, -1).sum(2)


def _distinct_prefixes(rows: list[list[int]], per_request: int) -> tuple[list[int], list[int]]:
    """For each cell (i, t) of ``rows`` (NK, T), flattened: the number of its distinct
    (request, rows[i][: t + 1]) prefix, and for each number the first cell holding it."""
    ids: dict[tuple[int, int], int] = {}
    which: list[int] = []
    firsts: list[int] = []
    width = len(rows[0]) if rows else 0
    for i, row in enumerate(rows):
        node = -1 - i // per_request  # the empty prefix of this row's request
        for t, tok in enumerate(row):
            key = (node, tok)
            node = ids.get(key, -1)
            if node < 0:
                node = ids[key] = len(firsts)
                firsts.append(i * width + t)
            which.append(node)
    return which, firsts


M = TypeVar("M", bound=nn.Module)


def quantized(model: M) -> M:
    """A copy of ``model`` with int8 dynamically quantised linear layers, for the CPU."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated but kept in 2.13
        q = torch.ao.quantization.quantize_dynamic(
            copy.deepcopy(model).eval(), {nn.Linear}, dtype=torch.qint8
        )
    return cast(M, q)


RUNTIMES: tuple[Runtime, ...] = get_args(Runtime)


def _runtime_copy(model: CoupletTransformer | CoupletTagger, int8: bool, runtime: Runtime) -> Any:
    """The model as the search runs it: eager PyTorch (an int8 copy with ``int8``), or its
    graphs on ONNX Runtime."""
    if runtime == "onnx":
        from model.onnx_engine import OnnxTagger, OnnxTransformer

        # One thread: a step is too small to split (two threads per request measured no faster).
        return (
            OnnxTransformer(model, int8) if isinstance(model, CoupletTransformer) else OnnxTagger(model, int8)
        )
    return quantized(model) if int8 else model.eval()


def _fit_cache(cache: Any, steps: int) -> Any:
    """Cut the self-attention buffers (allocated for the model's longest line) to the
    ``steps`` positions this search writes, so that reordering beams copies only those."""
    if not isinstance(cache, DecoderCache):
        return cache
    layers = [LayerCache(c.k[:, :, :steps], c.v[:, :, :steps], c.ck, c.cv) for c in cache.layers]
    aligned = None if cache.aligned is None else cache.aligned[:, :steps]
    return DecoderCache(layers, cache.mem_mask, aligned)


def _reorder_beams(model: StepModel, cache: Any, parent: Tensor) -> Any:
    """``model.reorder_beams`` (beams that stay within their request: a model whose rows of one
    request share state moves only the rest) where the model has it, else ``reorder_cache``."""
    if hasattr(model, "reorder_beams"):
        return cast(Any, model).reorder_beams(cache, parent)
    return model.reorder_cache(cache, parent)


class Decoder:
    """Lower lines for upper lines from a CoupletTransformer, under the couplet rules."""

    def __init__(
        self,
        model: CoupletTransformer | CoupletTagger,
        vocab: Vocab,
        int8: bool = False,
        proposer: CoupletTagger | None = None,
        runtime: Runtime = "torch",
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
        ONNX Runtime, model/onnx_engine.py: PyTorch's results in fp32, steps 2-4x faster)."""
        if proposer is not None and not isinstance(model, CoupletTransformer):
            raise ValueError("a proposer's candidates are rescored by an encoder-decoder model")
        # the output layer's weight, transposed (d, V), for the shortlists' columns
        self.head_t = model.head.weight.detach().t().contiguous() if proposer is not None else torch.empty(0)
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
        self.model: Any = _runtime_copy(model, int8, runtime)
        self.proposer: Any = None if proposer is None else _runtime_copy(proposer, int8, runtime)
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
        if self.proposer is None or not (options.fast or options.ensemble_weight or options.shortlist):
            tokens, search, logp = self._search(src, table, stepwise, options)
        else:
            tokens, search, logp = self._with_tagger(plans, table, src, stepwise, options)
        per_token = length + int(options.score_end)
        return [
            self._result(plan, tokens[n], search[n] / per_token, logp[n] / per_token, options)
            for n, plan in enumerate(plans)
        ]

    @torch.inference_mode()
    def _with_tagger(
        self, plans: list[Plan], table: Tensor, src: Tensor, stepwise: list[object], options: DecodeOptions
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
        proposer = cast(CoupletTagger, self.proposer)
        logits = proposer.encode(src)  # (N, L, V)
        lattice = F.log_softmax(logits.float(), dim=-1)
        length = lattice.size(1)
        shortlist = self._shortlist(plans, table[:, :length] + lattice, options.shortlist)
        if options.fast:
            beam = max(options.beam, options.proposals)

            def lattice_search(lst: Shortlist | None) -> Found:  # the lattice has no output layer
                return beam_search(proposer, src, table, stepwise, beam, options.score_end, lst, logits)

            found, listed = _with_fallback(shortlist, lattice_search)
            return self._rescore(src, *found, options, listed)
        table = table.clone()
        table[:, :length] += options.ensemble_weight * lattice
        found, _ = _with_fallback(shortlist, lambda lst: self._search(src, table, stepwise, options, lst))
        return found

    def _search(
        self,
        src: Tensor,
        table: Tensor,
        stepwise: list[object],
        options: DecodeOptions,
        shortlist: Shortlist | None = None,
    ) -> Found:
        """The encoder-decoder's beam search as ``options`` ask (plain or diverse)."""
        return beam_search(
            self.model,
            src,
            table,
            stepwise,
            options.beam,
            options.score_end,
            shortlist,
            groups=options.groups,
            diversity=options.diversity,
        )

    def _shortlist(self, plans: list[Plan], ranked: Tensor, k: int) -> Shortlist | None:
        """ranked (N, L, V): the rule table plus the lattice -> the shortlist of its top ``k``
        per position (None for k = 0)."""
        if not k:
            return None
        values, top = ranked.topk(min(k, ranked.size(-1)), dim=-1)  # (N, L, k)
        rows = []
        for n, plan in enumerate(plans):
            also = torch.tensor([*plan.required, EOS_ID], dtype=torch.long)
            rows.append(torch.cat([top[n][torch.isfinite(values[n])], also]).unique())  # sorted
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
        model = cast(CoupletTransformer, self.model)
        ar = rescore(model, src, tokens, options.score_end, shortlist)  # (N, K)
        live = torch.isfinite(search)
        preferences = torch.where(live, search - logp, NEG_INF)  # (N, K) 0 or the penalties
        final = torch.where(live, ar + preferences + options.proposer_weight * logp, NEG_INF)
        final, order = final.sort(dim=1, descending=True)
        return tokens.gather(1, order[:, :, None].expand_as(tokens)), final, ar.gather(1, order)

    def _result(
        self, plan: Plan, tokens: Tensor, search: Tensor, score: Tensor, options: DecodeOptions
    ) -> DecodeResult:
        """tokens (K, L), search (K,), score (K,), both per token -> the distinct live
        candidates, best first."""
        seen: set[str] = set()
        candidates = []
        for ids, s, sc in zip(tokens.tolist(), search.tolist(), score.tolist(), strict=True):
            text = self._text(plan, ids)
            if s == float("-inf") or text in seen:
                continue
            seen.add(text)
            report = rule_report(plan, text).as_dict()
            candidates.append(Candidate(text, sc, report, s))
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


Found = tuple[Tensor, Tensor, Tensor]  # beam_search's tokens, search scores, model log-probs


def _with_fallback(
    shortlist: Shortlist | None, search: Callable[[Shortlist | None], Found]
) -> tuple[Found, Shortlist | None]:
    """``search`` within the shortlist, and again over the whole vocabulary when that left
    some request without a line -> what was found, and the shortlist it was found in."""
    if shortlist is not None:
        found = search(shortlist)
        if torch.isfinite(found[1][:, 0]).all():
            return found, shortlist
    return search(None), None


def rule_report(plan: Plan, lower: str) -> RuleReport:
    """``data.rules.check(plan.upper, lower, plan.mode)`` with the upper line's tones,
    read once in the plan, reused for every candidate (the tests hold the two equal)."""
    if len(lower) != plan.length:
        return RuleReport(False, False, False, no_reuse(plan.upper, lower), None, None, True)
    ut, lt = list(plan.upper_tones), line_tones(lower, plan.mode)
    return RuleReport(
        length=True,
        punctuation=punctuation_mirrored(plan.upper, lower),
        repeats=repeats_mirrored(plan.upper, lower),
        no_reuse=no_reuse(plan.upper, lower),
        tone_end=tone_end_ok(ut, lt, plan.upper, lower),
        rhythm=rhythm_share(ut, lt, plan.upper),
        no_three_level_tail=no_three_level_tail(lt),
    )


def _end_tone(plan: Plan) -> Tone:
    for ch, tone in zip(reversed(plan.upper), reversed(plan.upper_tones), strict=True):
        if not is_punct(ch):
            return tone
    return Tone.NONE
