"""Scores of given lines: :func:`rescore`, the encoder-decoder's log-probability of whole
candidate lines in one teacher-forced pass (the fast mode's proposals); :func:`forced_walk`,
the beam search's own scores of lines that leave a given line at some places
(``Decoder.alternatives``), step by step as the search reads them (model/decoding/step_model.py's
``rule_scores``).

Shapes: N requests, K candidates, L line length, V vocabulary (or M listed columns).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from data.vocab import BOS_ID, EOS_ID, PAD_ID
from model.decoding.score_rules import Step, StepRule
from model.decoding.shortlist import Shortlist
from model.decoding.step_model import RescoringModel, StepModel, normalised, rule_scores
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


# lines that leave the walked line at a place, given the search's scores there (V,): (C, L)
Leaving = Callable[[int, Tensor], Tensor]


def forced_walk(
    model: StepModel,
    src: Tensor,
    table: Tensor,
    step_rules: Sequence[StepRule],
    line: Sequence[int],
    places: Sequence[int],
    leaving: Leaving,
    memory: Tensor | None = None,
    score_end: bool = False,
    required: Sequence[int] = (),
) -> dict[int, tuple[Tensor, Tensor, Tensor]]:
    """The beam search's own scores of lines that leave ``line`` (one request: src (1, S), table
    (1, L+1, V)) at each of ``places``, all in one walk: place -> (lines (C, L), search scores
    (C,), model log-probs (C,)); search scores are log-probs plus the table's and the step rules'
    preferences, -inf where a rule refuses a line.

    The walk takes ``line`` token by token as the search would. At a place, ``leaving(place,
    scores)`` gives the lines to score from the scores the search gives every token there
    after the line's prefix; from then on those lines ride in the same batch as the line and the
    lines of the places before, each step one model call for all of them. Their own tokens only
    are read, so the table and the rules run over those columns (M: the lines' tokens, the end
    of sequence and the ``required`` characters) as the shortlist search runs them; the model's
    log-probabilities are normalised over the whole vocabulary. On an int8 engine a batch's
    activations share one scale, so a place's scores move a little with the places walked beside
    it (docs/MEASUREMENTS.md, "Checking a couplet"); in fp32 they are those of each place alone."""
    found: dict[int, tuple[Tensor, Tensor, Tensor]] = {}
    if not places:
        return found
    starts, length = sorted(set(places)), len(line)
    steps = length + 1 if score_end else length
    memory = model.encode(src) if memory is None else memory
    cache = model.new_cache(memory, src, length + 1)
    tokens = np.array(list(line), dtype=np.int64).reshape(1, -1)
    own_search, own_logp = np.float32(0), np.float32(0)
    walking = True  # the line itself still rides in row 0 (until its last place)
    # the leaving lines, place by place, and what every step reads over their columns
    targets = np.zeros((0, steps), dtype=np.int64)
    search, logp = np.zeros(0, np.float32), np.zeros(0, np.float32)
    owner: list[int] = []  # the place of each leaving line
    ids, columns, table_m, rules_m = np.zeros(0, np.int64), targets, table, list(step_rules)
    for pos in range(steps):
        own_prev = [BOS_ID if pos == 0 else int(tokens[0, pos - 1])] if walking else []
        prev = np.concatenate([own_prev, targets[:, pos - 1] if pos else []]).astype(np.int64)
        out = model.step(cache, prev, pos)  # (R, V)
        first = int(walking)
        if len(targets):
            lp = normalised(model, out[first:], ids)  # (C, M)
            step = Step(pos, columns[:, :pos], np.zeros(len(targets), np.int64))
            scores = rule_scores(lp, table_m, pos, rules_m, step)
            here = columns[:, pos, None]
            search = search + np.take_along_axis(scores, here, 1)[:, 0]
            logp = logp + np.take_along_axis(lp, here, 1)[:, 0]
        if not walking:
            continue
        own = normalised(model, out[:1])  # (1, V)
        own_step = Step(pos, tokens[:, :pos], np.zeros(1, np.int64))
        own_scores = rule_scores(own, table, pos, step_rules, own_step)
        keep = None  # the rows that go on, where they change
        if pos == starts[0]:
            starts.pop(0)
            lines = leaving(pos, own_scores[0])  # (C, L)
            new = np.concatenate([lines, np.full((len(lines), 1), EOS_ID)], 1) if score_end else lines
            targets = np.concatenate([targets, new])
            tok = lines[:, pos]
            search = np.concatenate([search, own_search + own_scores[0, tok]])
            logp = np.concatenate([logp, own_logp + own[0, tok]])
            owner += [pos] * len(lines)
            ids = np.unique(np.concatenate([targets.reshape(-1), [EOS_ID], np.asarray(required, np.int64)]))
            columns = np.searchsorted(ids, targets)  # (C, T) each token's column
            table_m = table[:, :, ids]  # (1, L+1, M)
            rules_m = [rule.on_columns(ids[None, :]) for rule in step_rules]
            keep = np.concatenate([np.arange(len(prev)), np.zeros(len(lines), np.int64)])  # + row 0 copied
        tok_own = int(tokens[0, pos])
        own_search, own_logp = own_search + own_scores[0, tok_own], own_logp + own[0, tok_own]
        if not starts:  # no place left: the line itself is not needed further
            walking = False
            keep = (np.arange(len(prev)) if keep is None else keep)[1:]
        if keep is not None:
            cache = model.reorder_cache(cache, keep)
    where = np.array(owner)
    for place in sorted(set(places)):
        mine = where == place
        found[place] = (targets[mine, :length], search[mine], logp[mine])
    return found
