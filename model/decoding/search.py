"""The fixed-length search under the rules: the loop that drives a model step by step
(:func:`run_search`), and the strategies that choose each step's beams (:class:`BeamSearch`,
:class:`GreedySearch`, :class:`DiverseBeamSearch`, :class:`BankedBeamSearch`), kept apart as
OpenNMT-py keeps its ``DecodeStrategy`` from the translator; and the teacher-forced
rescoring of the fast mode's proposals.

The loop asks a model only what its protocol declares: :class:`StepModel` names the
optional capabilities (``capabilities``), which the model classes state, so nothing is
probed with ``hasattr``. Step rules share one protocol, ``score_rules.StepRule``; the rule
that shares the beam out by bank says so with ``n_banks``.

Arrays are numpy's (model/decoding/arrays.py says why): float32 scores, int64 tokens. A
model speaks numpy too: the ONNX engine natively, a PyTorch model through its adapter
(model/decoding/torch_engine.py).

Shapes: N requests, K beams, B = N*K rows, L line length, V vocabulary (or M listed columns).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, cast

import numpy as np

from data.vocab import BOS_ID, EOS_ID, PAD_ID
from model.decoding.arrays import log_softmax, topk
from model.decoding.score_rules import Step, StepRule
from model.decoding.shortlist import Shortlist
from model.decoding.vocab_tables import NEG_INF
from model.net.capabilities import LISTED_IN_GRAPH, LISTED_ROWS, LOG_PROBS, REORDER_BEAMS

Tensor = np.ndarray  # (the search's arrays)


class StepModel(Protocol):
    """What the search needs of every model: the encoder-decoder's KV-cached steps, or the
    tagger's lattice (model/decoding/lattice.py); ``capabilities`` declares what else it offers."""

    capabilities: ClassVar[frozenset[str]]

    def encode(self, src: Tensor) -> Tensor: ...

    def new_cache(self, memory: Tensor, src: Tensor, steps: int) -> Any:
        """The cache of a search that takes ``steps`` steps from ``memory`` (``encode``'s)."""

    def step(self, cache: Any, prev: Tensor, pos: int) -> Tensor: ...

    def reorder_cache(self, cache: Any, index: Tensor) -> Any: ...


class ListedRowsModel(StepModel, Protocol):
    """A model declaring ``LISTED_ROWS``."""

    def step_states(self, cache: Any, prev: Tensor, pos: int) -> Tensor: ...


class InGraphModel(ListedRowsModel, Protocol):
    """A model declaring ``LISTED_IN_GRAPH``."""

    def step_log_probs(self, cache: Any, prev: Tensor, pos: int, listed: tuple[Tensor, Tensor]) -> Tensor: ...


class BeamMovingModel(StepModel, Protocol):
    """A model declaring ``REORDER_BEAMS``."""

    def reorder_beams(self, cache: Any, parent: Tensor) -> Any: ...


class RescoringModel(StepModel, Protocol):
    """What ``rescore`` needs: the encoder-decoder's teacher-forced states, normalised, and
    its output layer over the whole vocabulary."""

    cfg: Any

    def decode_states(self, memory: Tensor, src: Tensor, tgt_in: Tensor) -> Tensor: ...

    def head(self, states: Tensor) -> Tensor: ...


# ---- strategies ----------------------------------------------------------------------


class Strategy(ABC):
    """How each step's beams are chosen from the scores of every continuation of every beam."""

    @abstractmethod
    def select(self, total: Tensor, step: Step, last: bool) -> tuple[Tensor, Tensor]:
        """total (N, width, V): search scores of each beam's continuations (width 1 at the
        first step) -> the chosen beams' scores (N, K') and their indices into width*V."""

    def bind(self, rules: Sequence[StepRule]) -> Strategy:
        """This strategy for the search's own rules (over a shortlist's columns, say)."""
        return self

    def finish(self, search: Tensor, tokens: Tensor, logp: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The beams at the end -> search scores (N, K), tokens (N*K, L), model log-probs (N*K,)
        of the lines to return, best first."""
        return search, tokens, logp


class BeamSearch(Strategy):
    """The ``beam`` best continuations of all beams of a request."""

    def __init__(self, beam: int) -> None:
        self.beam = beam

    def select(self, total: Tensor, step: Step, last: bool) -> tuple[Tensor, Tensor]:
        return _topk(total.reshape(total.shape[0], -1), self.beam)


class GreedySearch(Strategy):
    """One beam: the best continuation at every step."""

    def select(self, total: Tensor, step: Step, last: bool) -> tuple[Tensor, Tensor]:
        return _topk(total.reshape(total.shape[0], -1), 1)


class BankedBeamSearch(Strategy):
    """Dynamic beam allocation (Post & Vilar 2018) for required characters: the beam is
    shared out over how many of them each beam holds (the rule's banks), so that placing a
    costly one early is not always outranked."""

    def __init__(self, beam: int, rule: StepRule | None = None) -> None:
        self.beam, self.rule = beam, rule

    def bind(self, rules: Sequence[StepRule]) -> BankedBeamSearch:
        return BankedBeamSearch(self.beam, next(r for r in rules if r.n_banks))

    def select(self, total: Tensor, step: Step, last: bool) -> tuple[Tensor, Tensor]:
        if self.rule is None:
            raise ValueError("BankedBeamSearch needs a rule with banks: bind() it to the search's rules")
        n, width, v = total.shape
        bank = self.rule.banks(step, v).reshape(n, width * v)
        return allocate(total.reshape(n, width * v), bank, self.beam, self.rule.n_banks)


class DiverseBeamSearch(Strategy):
    """Diverse beam search (Vijayakumar et al., AAAI 2018): each group keeps its own beams; at
    every step a group's choice pays ``diversity`` for each beam of an earlier group that took
    the same token at this position (a Hamming penalty), and at the last character no group
    may complete an earlier group's line. The lines returned are each group's best, scored
    without the penalty, best first."""

    def __init__(self, groups: Sequence[int], diversity: float) -> None:
        self.groups, self.diversity = tuple(groups), diversity

    def select(self, total: Tensor, step: Step, last: bool) -> tuple[Tensor, Tensor]:
        keys = _prefix_keys(step.row, step.prefix) if last else None
        return _diverse_topk(total, self.groups, self.diversity, keys)

    def finish(self, search: Tensor, tokens: Tensor, logp: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        n, k = search.shape
        rows_of = _group_rows(self.groups)  # (G, most beams of a group)
        best = rows_of[np.arange(len(self.groups)), search[:, rows_of].argmax(2)]  # (N, G)
        search, order = topk(np.take_along_axis(search, best, 1), len(self.groups))
        rows = (np.arange(n)[:, None] * k + np.take_along_axis(best, order, 1)).reshape(-1)
        return search, tokens[rows], logp[rows]


def strategy_for(
    rules: Sequence[StepRule], beam: int, groups: Sequence[int] = (), diversity: float = 0.0
) -> Strategy:
    """The strategy a request's options ask for: banked when a rule shares the beam out
    (required characters, which diverse groups would not keep), else diverse with groups,
    else greedy for a beam of one, else the plain beam search."""
    if any(r.n_banks for r in rules):
        return BankedBeamSearch(beam)
    if groups:
        return DiverseBeamSearch(groups, diversity)
    return GreedySearch() if beam == 1 else BeamSearch(beam)


# ---- the loop -------------------------------------------------------------------------


def run_search(
    model: StepModel,
    src: Tensor,
    table: Tensor,
    step_rules: Sequence[StepRule],
    strategy: Strategy,
    *,
    score_end: bool = True,
    shortlist: Shortlist | None = None,
    memory: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Fixed-length search: src (N, S), table (N, L+1, V) -> tokens (N, K, L), search scores
    (N, K) (log-probs plus preferences), model log-probs (N, K).

    Without ``score_end`` the search stops after the L characters: the end of sequence,
    forced at L, is then not scored (it saves a whole model step). With a ``shortlist``
    the search runs over each request's listed tokens only (its columns: the rest of the
    vocabulary is impossible), and the output layer scores those alone where the model can
    (``LISTED_ROWS``). ``memory``: ``model.encode(src)`` when it is already at hand."""
    steps = table.shape[1]
    length = steps - 1
    steps = steps if score_end else length
    memory = model.encode(src) if memory is None else memory
    cache = model.new_cache(memory, src, steps)
    if shortlist is not None:  # from here on a token is a column of its request's list
        table = shortlist.gather(table)
        step_rules = [rule.on_columns(shortlist.ids) for rule in step_rules]
    strategy = strategy.bind(step_rules)
    n, _, v = table.shape
    can = model.capabilities
    scored = shortlist is not None and LISTED_ROWS in can  # the output layer's listed rows
    in_graph = scored and LISTED_IN_GRAPH in can  # ONNX: the listed rows scored in the step
    normalised = LOG_PROBS in can  # the tagger's lattice is
    width = 1  # live beams per request: one at the start (K copies would be equal), then K
    prev = np.full((n,), BOS_ID, dtype=np.int64)
    search = np.zeros((n, 1), np.float32)  # (N, width)
    logp_sum = np.zeros(n, np.float32)  # (B,)
    tokens = np.empty((n, 0), dtype=np.int64)  # (B, pos)
    layouts: dict[int, tuple[Tensor, Tensor]] = {}  # width -> each row's request (B,), first rows (N, 1)
    for pos in range(steps):
        if width not in layouts:
            layouts[width] = np.repeat(np.arange(n), width), np.arange(n)[:, None] * width
        row, first = layouts[width]
        if in_graph:
            logp = cast(InGraphModel, model).step_log_probs(
                cache, prev, pos, cast(Shortlist, shortlist).listed
            )
        elif scored:
            logp = cast(Shortlist, shortlist).log_probs(
                cast(ListedRowsModel, model).step_states(cache, prev, pos)
            )
        else:
            logp = model.step(cache, prev, pos)  # (B, V) float32
            logp = logp if normalised else log_softmax(logp)
            logp = logp if shortlist is None else shortlist.pick(logp)  # (B, M)
        scores = (logp.reshape(n, width, v) + table[:, None, pos]).reshape(n * width, v)  # a new array
        here = Step(pos, tokens, row)
        for rule in step_rules:
            scores = rule(scores, here)
        total = scores.reshape(n, width, v)
        total += search[:, :, None]  # (N, width, V)
        search, flat = strategy.select(total, here, last=pos == length - 1)  # (N, K)
        parent = (first + flat // v).reshape(-1)  # (B',) the row each beam extends
        tok = (flat % v).reshape(-1)  # (B',)
        logp_sum = logp_sum[parent] + logp[parent, tok]
        tokens = np.concatenate([tokens[parent], tok[:, None]], axis=1)  # (B', pos+1)
        if pos + 1 < steps:  # the first reorder widens every row of the cache, later ones only move beams
            cache = _reorder_beams(model, cache, parent) if width > 1 else model.reorder_cache(cache, parent)
        width = search.shape[1]
        prev = (
            tok if shortlist is None else shortlist.token_ids(tok.reshape(n, width)).reshape(-1)
        )  # (B',) ids
    search, tokens, logp_sum = strategy.finish(search, tokens, logp_sum)
    k = search.shape[1]
    tokens = tokens[:, :length].reshape(n, k * length)
    tokens = tokens if shortlist is None else shortlist.token_ids(tokens)
    return tokens.reshape(n, k, length), search, logp_sum.reshape(n, k)


@functools.lru_cache(maxsize=64)
def _group_rows(groups: tuple[int, ...]) -> Tensor:
    """(G, S) the beam rows of each group, a shorter group's padded with its first row."""
    widest, first, rows = max(groups), 0, []
    for size in groups:
        rows.append([first + i for i in range(size)] + [first] * (widest - size))
        first += size
    return np.array(rows, dtype=np.int64)


def _prefix_keys(row: Tensor, tokens: Tensor) -> Tensor:
    """(B,) one number per distinct (request, prefix) of rows (B,) with prefixes tokens (B, pos)."""
    keyed = np.concatenate([row[:, None], tokens], 1)
    return np.unique(keyed, axis=0, return_inverse=True)[1].reshape(-1)


def _diverse_topk(
    total: Tensor, groups: Sequence[int], penalty: float, keys: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Diverse beam search's choice: scores total (N, width, V), width 1 (every group extends
    the first row) or K = sum(groups) (each group owns its rows, in order) -> scores (N, K)
    without the penalty and indices into width*V, group by group. With the rows' prefix
    ``keys`` (B,) a group may not take a token that an earlier group took after the same prefix.
    (Groups choose one after another, so the loop is kept to a few array operations.)"""
    n, width, v = total.shape
    flat_total = total.reshape(n, width * v)
    charged = np.zeros((n, v), total.dtype)  # (N, V) the penalty each token carries here so far
    search: list[Tensor] = []
    flat: list[Tensor] = []
    made: list[tuple[Tensor, Tensor]] = []  # (N, size) (prefix key, token) pairs chosen so far
    first = 0
    step_penalty = np.float32(penalty)
    for size in groups:
        rows = 1 if width == 1 else size
        own = flat_total[:, first * v : (first + rows) * v]  # (N, rows*V)
        penalised = own - (charged if rows == 1 else np.tile(charged, (1, rows)))
        if keys is not None and made:
            repeats = _repeats(keys.reshape(n, width)[:, first : first + rows], made, v)
            penalised[repeats] = NEG_INF
        if size == 1:
            pick = penalised.argmax(1)[:, None]
            value = np.take_along_axis(penalised, pick, 1)
        else:
            value, pick = _topk(penalised, size)
        score = np.take_along_axis(own, pick, 1)
        search.append(score if keys is None else np.where(value == NEG_INF, np.float32(NEG_INF), score))
        flat.append(pick + first * v)
        token = pick % v
        np.add.at(charged, (np.arange(n)[:, None], token), step_penalty)
        if keys is not None:
            made.append((np.take_along_axis(keys.reshape(n, width), first + pick // v, 1), token))
        first += 0 if width == 1 else size
    return np.concatenate(search, 1), np.concatenate(flat, 1)


def _repeats(mine: Tensor, made: list[tuple[Tensor, Tensor]], size: int) -> Tensor:
    """(N, rows*V) bool: the tokens that, after the prefixes ``mine`` (N, rows) (their keys),
    would repeat a (prefix key, token) pair an earlier group made."""
    their_keys, their_tokens = (np.concatenate(x, 1) for x in zip(*made, strict=True))  # (N, P)
    same = mine[:, :, None] == their_keys[:, None, :]  # (N, rows, P)
    repeat = np.zeros((*mine.shape, size), dtype=bool)
    req, rows, made_at = np.nonzero(same)
    repeat[req, rows, their_tokens[req, made_at]] = True
    return repeat.reshape(mine.shape[0], -1)


def _topk(total: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """``topk(total, k)`` for scores total (N, C), always k wide: when C < k (a short
    list at the first step) the rest are dead beams (-inf), as over the whole vocabulary the
    search keeps its width after the first step."""
    search, pick = topk(total, min(k, total.shape[1]))
    if pick.shape[1] < k:
        short = k - pick.shape[1]
        search = np.concatenate([search, np.full((search.shape[0], short), NEG_INF, search.dtype)], 1)
        pick = np.concatenate([pick, np.zeros((pick.shape[0], short), pick.dtype)], 1)
    return search, pick


def allocate(total: Tensor, bank: Tensor, k: int, n_banks: int) -> tuple[Tensor, Tensor]:
    """Choose ``k`` of the candidates total (N, C) with bank (N, C) (how many required
    characters each holds): the best of every bank first, an equal share each, then the
    best of the rest -> scores (N, K) best first, candidate indices (N, K)."""
    quota = max(1, k // n_banks)
    c = total.shape[1]
    picks = [topk(np.where(bank != b, np.float32(NEG_INF), total), min(quota, c)) for b in range(n_banks)]
    best = topk(total, min(k, c))
    order = np.concatenate([p[1] for p in picks] + [best[1]], axis=1).tolist()  # (N, banks*quota + K)
    values = np.concatenate([p[0] for p in picks] + [best[0]], axis=1).tolist()
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
    flat = np.array(chosen, dtype=np.int64)  # (N, K): the global best fill every row to min(k, C)
    return np.take_along_axis(total, flat, 1), flat


def rescore(
    model: RescoringModel,
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
    target = np.concatenate([rows, np.full((n * k, 1), EOS_ID)], 1) if score_end else rows
    tgt_in = np.concatenate([np.full((n * k, 1), BOS_ID), target[:, :-1]], 1)  # (NK, T)
    memory = np.repeat(model.encode(src), k, 0)  # (NK, S, d): the encoder runs once per line
    states = model.decode_states(memory, np.repeat(src, k, 0), tgt_in)  # (NK, T, d) normalised
    states = states.reshape(-1, states.shape[-1])  # (NK*T, d)
    which, firsts = _distinct_prefixes(tgt_in.tolist(), k)
    which_t, target = np.array(which), target.reshape(-1)
    if shortlist is None:
        logits = model.head(states[firsts]).astype(np.float32)  # (U, V)
        columns = target
    else:  # the prefixes come request by request: each request's rows against its own list
        hidden = states[firsts].astype(np.float32)  # (U, d)
        per_request = np.bincount(np.array(firsts) // (k * tgt_in.shape[1]), minlength=n)
        parts = np.split(hidden, np.cumsum(per_request)[:-1])
        logits = np.concatenate([p @ shortlist.weight[i] for i, p in enumerate(parts)])  # (U, M)
        logits[np.repeat(shortlist.ids == PAD_ID, per_request, 0)] = NEG_INF
        request = np.repeat(np.arange(n * k), tgt_in.shape[1]) // k  # (NK*T,)
        columns = shortlist.columns(model.cfg.vocab_size)[request, target]
    top = logits.max(-1, keepdims=True)
    norm = (np.log(np.exp(logits - top).sum(-1, keepdims=True)) + top)[:, 0]  # (U,) logsumexp
    picked = logits[which_t, np.maximum(columns, 0)] - norm[which_t]  # (NK*T,)
    picked[columns < 0] = NEG_INF
    return picked.reshape(n, k, -1).sum(2)


def forced_search(
    model: StepModel,
    src: Tensor,
    table: Tensor,
    step_rules: Sequence[StepRule],
    lines: Tensor,
    score_end: bool = False,
    memory: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The beam search's own scores of given lines of one request: src (1, S), table (1, L+1, V),
    lines (C, L) -> search scores (C,) (log-probs plus the table's and step rules' preferences,
    -inf where a rule refuses the line) and model log-probs (C,).

    Each line is taken token by token as the search would take it: the model's step after the
    line's own prefix, the table's row, every step rule on that prefix; the line's token is
    then read off those scores. All C lines run in the same steps (one batch); the steps
    before the first position where the lines differ run once, for one row."""
    c, length = lines.shape
    steps = length + 1 if score_end else length
    target = np.concatenate([lines, np.full((c, 1), EOS_ID)], 1) if score_end else lines
    differ = np.flatnonzero((target != target[:1]).any(0))
    shared = int(differ[0]) if len(differ) else steps  # steps taken once, for one row
    memory = model.encode(src) if memory is None else memory
    cache = model.new_cache(memory, src, steps)
    normalised = LOG_PROBS in model.capabilities
    width = 1
    search = np.zeros(1, np.float32)
    logp_sum = np.zeros(1, np.float32)
    prev = np.full((1,), BOS_ID, dtype=np.int64)
    for pos in range(steps):
        if pos == shared and c > 1:  # from here on every line has its own row
            cache = model.reorder_cache(cache, np.zeros(c, dtype=np.int64))
            width = c
            search, logp_sum, prev = np.repeat(search, c), np.repeat(logp_sum, c), np.repeat(prev, c)
        rows = target[:width]
        logp = model.step(cache, prev, pos)  # (width, V)
        logp = logp if normalised else log_softmax(logp)
        scores = logp + table[0, pos]
        step = Step(pos, rows[:, :pos], np.zeros(width, dtype=np.int64))
        for rule in step_rules:
            scores = rule(scores, step)
        tok = rows[:, pos]
        search = search + np.take_along_axis(scores, tok[:, None], 1)[:, 0]
        logp_sum = logp_sum + np.take_along_axis(logp, tok[:, None], 1)[:, 0]
        prev = tok
    return np.broadcast_to(search, (c,)).copy(), np.broadcast_to(logp_sum, (c,)).copy()


def next_scores(
    model: StepModel,
    src: Tensor,
    table: Tensor,
    step_rules: Sequence[StepRule],
    prefix: Sequence[int],
    memory: Tensor | None = None,
) -> Tensor:
    """The scores (V,) the beam search gives every token at position ``len(prefix)`` after
    ``prefix`` (one request: src (1, S), table (1, L+1, V)): the model's log-probabilities, the
    table's row, the step rules on that prefix."""
    pos = len(prefix)
    memory = model.encode(src) if memory is None else memory
    cache = model.new_cache(memory, src, pos + 1)
    normalised = LOG_PROBS in model.capabilities
    tokens = np.array(list(prefix), dtype=np.int64).reshape(1, pos)
    prev = np.full((1,), BOS_ID, dtype=np.int64)
    for p in range(pos + 1):
        logp = model.step(cache, prev, p)
        if p < pos:
            prev = tokens[:, p]
    logp = logp if normalised else log_softmax(logp)
    scores = logp + table[0, pos]
    step = Step(pos, tokens, np.zeros(1, dtype=np.int64))
    for rule in step_rules:
        scores = rule(scores, step)
    return scores[0]


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


def _reorder_beams(model: StepModel, cache: Any, parent: Tensor) -> Any:
    """``model.reorder_beams`` (beams that stay within their request: a model whose rows of one
    request share state moves only the rest) where the model declares it, else ``reorder_cache``."""
    if REORDER_BEAMS in model.capabilities:
        return cast(BeamMovingModel, model).reorder_beams(cache, parent)
    return model.reorder_cache(cache, parent)
