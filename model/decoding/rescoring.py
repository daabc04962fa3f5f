"""Scores of given lines: :func:`rescore`, the encoder-decoder's log-probability of whole
candidate lines in one teacher-forced pass (the fast mode's proposals); :func:`forced_search`
and :func:`next_scores`, the beam search's own scores of given lines and of every next
character after a prefix (``Decoder.alternatives``), step by step as the search reads them
(model/decoding/step_model.py's ``rule_scores``).

Shapes: N requests, K candidates, L line length, V vocabulary (or M listed columns).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from data.vocab import BOS_ID, EOS_ID, PAD_ID
from model.decoding.score_rules import Step, StepRule
from model.decoding.shortlist import Shortlist
from model.decoding.step_model import RescoringModel, StepModel, model_log_probs, rule_scores
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
        logp = model_log_probs(model, cache, prev, pos)  # (width, V)
        step = Step(pos, rows[:, :pos], np.zeros(width, dtype=np.int64))
        scores = rule_scores(logp, table, pos, step_rules, step)
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
    tokens = np.array(list(prefix), dtype=np.int64).reshape(1, pos)
    prev = np.full((1,), BOS_ID, dtype=np.int64)
    for p in range(pos):  # the prefix's steps fill the cache; their scores are not needed
        model.step(cache, prev, p)
        prev = tokens[:, p]
    logp = model_log_probs(model, cache, prev, pos)  # (1, V)
    step = Step(pos, tokens, np.zeros(1, dtype=np.int64))
    return rule_scores(logp, table, pos, step_rules, step)[0]
