"""Scores of given lines: :func:`rescore`, the encoder-decoder's log-probability of whole
candidate lines in one teacher-forced pass (the fast mode's proposals); :func:`branches`
and :func:`forced_from`, the beam search's scores of every character after a line's prefixes and
of lines that leave it there (``Decoder.alternatives``), step by step as the search reads them
(model/decoding/step_model.py's ``rule_scores``).

Shapes: N requests, K candidates, L line length, V vocabulary (or M listed columns).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from data.vocab import BOS_ID, EOS_ID, PAD_ID
from model.decoding.score_rules import Step, StepRule
from model.decoding.shortlist import Shortlist
from model.decoding.step_model import (
    RescoringModel,
    StepModel,
    model_log_probs,
    model_log_probs_at,
    rule_scores,
)
from model.decoding.vocab_tables import NEG_INF

Tensor = np.ndarray  # (the search's arrays)


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


@dataclass
class Branch:
    """Where other lines leave a given line: the search at ``pos`` after the line's prefix."""

    pos: int
    scores: Tensor  # (V,) the search's scores of every token at pos
    logp: Tensor  # (V,) the model's log-probabilities there
    search: np.float32  # the prefix's search score and model log-probability
    logp_sum: np.float32
    cache: Any  # the model's cache after the step at pos, one row


def branches(
    model: StepModel,
    src: Tensor,
    table: Tensor,
    step_rules: Sequence[StepRule],
    line: Sequence[int],
    positions: Sequence[int],
    memory: Tensor | None = None,
) -> dict[int, Branch]:
    """One walk along ``line`` of one request (src (1, S), table (1, L+1, V)) as the search
    takes it, stopping at each of ``positions``: there the scores the search gives every token
    after the line's prefix (the model's log-probabilities, the table's row, the step rules),
    from which :func:`forced_from` scores lines that differ from ``line`` there first."""
    found: dict[int, Branch] = {}
    if not positions:
        return found
    last = max(positions)
    memory = model.encode(src) if memory is None else memory
    cache = model.new_cache(memory, src, len(line) + 1)
    tokens = np.array(list(line), dtype=np.int64).reshape(1, -1)
    search, logp_sum = np.float32(0), np.float32(0)
    prev = np.full((1,), BOS_ID, dtype=np.int64)
    for pos in range(last + 1):
        logp = model_log_probs(model, cache, prev, pos)  # (1, V)
        scores = rule_scores(logp, table, pos, step_rules, Step(pos, tokens[:, :pos], np.zeros(1, np.int64)))
        if pos in positions:
            one = model.reorder_cache(cache, np.zeros(1, dtype=np.int64))  # (a copy: the walk goes on)
            found[pos] = Branch(pos, scores[0], logp[0], search, logp_sum, one)
        tok = int(tokens[0, pos])
        search, logp_sum = search + scores[0, tok], logp_sum + logp[0, tok]
        prev = tokens[:, pos]
    return found


def forced_from(
    model: StepModel,
    branch: Branch,
    table: Tensor,
    step_rules: Sequence[StepRule],
    lines: Tensor,
    score_end: bool = False,
    required: Sequence[int] = (),
) -> tuple[Tensor, Tensor]:
    """The beam search's own scores of given lines (C, L) that share the walked line's prefix
    before ``branch.pos``: search scores (C,) (log-probs plus the table's and step rules'
    preferences, -inf where a rule refuses the line) and model log-probs (C,).

    From the branch on, each line is taken token by token as the search would take it, all
    in one batch: the model's step after the line's own prefix, the table's row, every step
    rule on that prefix; the line's token is then read off those scores. Only the lines' own
    tokens are read, so the table and the rules run over those columns (M: the lines' tokens,
    the end of sequence and the ``required`` characters) as the shortlist search runs them; the
    model's log-probabilities are normalised over the whole vocabulary."""
    c, length = lines.shape
    steps = length + 1 if score_end else length
    target = np.concatenate([lines, np.full((c, 1), EOS_ID)], 1) if score_end else lines
    ids = np.unique(np.concatenate([target.reshape(-1), [EOS_ID], np.asarray(required, np.int64)]))
    columns = np.searchsorted(ids, target)  # (C, T) each token's column
    table = table[:, :, ids]  # (1, L+1, M)
    step_rules = [rule.on_columns(ids[None, :]) for rule in step_rules]
    tok = target[:, branch.pos]
    search = branch.search + branch.scores[tok]
    logp_sum = branch.logp_sum + branch.logp[tok]
    cache = model.reorder_cache(branch.cache, np.zeros(c, dtype=np.int64))
    row = np.zeros(c, dtype=np.int64)
    for pos in range(branch.pos + 1, steps):
        logp = model_log_probs_at(model, cache, tok, pos, ids)  # (C, M)
        scores = rule_scores(logp, table, pos, step_rules, Step(pos, columns[:, :pos], row))  # (C, M)
        here = columns[:, pos, None]
        search = search + np.take_along_axis(scores, here, 1)[:, 0]
        logp_sum = logp_sum + np.take_along_axis(logp, here, 1)[:, 0]
        tok = target[:, pos]
    return search, logp_sum
