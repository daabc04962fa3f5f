"""The strategies that choose each step's beams of the search (model/decoding/search.py's
``run_search``): :class:`BeamSearch`, :class:`GreedySearch`, :class:`DiverseBeamSearch`,
:class:`BankedBeamSearch`, picked for a request by :func:`strategy_for`; kept apart from the
loop as OpenNMT-py keeps its ``DecodeStrategy`` from the translator. The rule that shares the
beam out by bank says so with ``n_banks``.

Shapes: N requests, K beams, B = N*K rows, L line length, V vocabulary (or M listed columns).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from model.decoding.arrays import topk
from model.decoding.score_rules import Step, StepRule
from model.decoding.vocab_tables import NEG_INF

Tensor = np.ndarray  # (the search's arrays)


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
