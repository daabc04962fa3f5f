"""The fixed-length search under the rules: the loop that drives a model step by step
(:func:`run_search`). The strategies that choose each step's beams are
model/decoding/strategies.py's, what the loop asks of a model model/decoding/step_model.py's,
and the scores of given lines (the fast mode's rescoring, the alternatives' forced search)
model/decoding/rescoring.py's; this module names them all for the decoder.

Arrays are numpy's (model/decoding/arrays.py says why): float32 scores, int64 tokens. A
model speaks numpy too: the ONNX engine natively, a PyTorch model through its adapter
(model/export/torch_engine.py).

Shapes: N requests, K beams, B = N*K rows, L line length, V vocabulary (or M listed columns).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from data.vocab import BOS_ID
from model.decoding.rescoring import Leaving, forced_walk, rescore
from model.decoding.score_rules import Step, StepRule
from model.decoding.shortlist import Shortlist
from model.decoding.step_model import (
    BeamMovingModel,
    InGraphModel,
    ListedRowsModel,
    StepModel,
    model_log_probs,
    rule_scores,
)
from model.decoding.strategies import (
    BankedBeamSearch,
    BeamSearch,
    DiverseBeamSearch,
    GreedySearch,
    Strategy,
    allocate,
    strategy_for,
)
from model.spec.capabilities import LISTED_IN_GRAPH, LISTED_ROWS, REORDER_BEAMS

__all__ = [
    "BankedBeamSearch",
    "BeamSearch",
    "DiverseBeamSearch",
    "Found",
    "GreedySearch",
    "Leaving",
    "StepModel",
    "Strategy",
    "allocate",
    "forced_walk",
    "rescore",
    "run_search",
    "strategy_for",
]

Tensor = np.ndarray  # (the search's arrays)
Found = tuple[
    Tensor, Tensor, Tensor
]  # run_search's tokens (N, K, L), search scores (N, K), model log-probs (N, K)


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
) -> Found:
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
            logp = model_log_probs(model, cache, prev, pos)  # (B, V) float32
            logp = logp if shortlist is None else shortlist.pick(logp)  # (B, M)
        here = Step(pos, tokens, row)
        total = rule_scores(logp, table, pos, step_rules, here).reshape(n, width, v)
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


def _reorder_beams(model: StepModel, cache: Any, parent: Tensor) -> Any:
    """``model.reorder_beams`` (beams that stay within their request: a model whose rows of one
    request share state moves only the rest) where the model declares it, else ``reorder_cache``."""
    if REORDER_BEAMS in model.capabilities:
        return cast(BeamMovingModel, model).reorder_beams(cache, parent)
    return model.reorder_cache(cache, parent)
