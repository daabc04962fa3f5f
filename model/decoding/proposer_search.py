"""The encoder-decoder's search as a request's options ask (:func:`model_search`), and the
search with the proposer, an encoder-only tagger, beside it (:func:`search_with_proposer`):
its one pass's log-probabilities as a second opinion and its shortlist, or, in the fast mode,
its lattice searched and the proposals rescored by the encoder-decoder.

Shapes: N requests, K beams, L line length, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from data.vocab import EOS_ID
from model.decoding.arrays import topk
from model.decoding.options import DecodeOptions
from model.decoding.plan import Plan
from model.decoding.score_rules import StepRule
from model.decoding.search import Found, StepModel, rescore, run_search, strategy_for
from model.decoding.shortlist import Shortlist
from model.decoding.step_model import RescoringModel
from model.decoding.vocab_tables import NEG_INF

Tensor = np.ndarray  # (the search's arrays)


def model_search(
    engine: StepModel,
    src: Tensor,
    table: Tensor,
    stepwise: list[StepRule],
    options: DecodeOptions,
    shortlist: Shortlist | None = None,
) -> Found:
    """The encoder-decoder's search as ``options`` ask (plain, diverse or banked)."""
    strategy = strategy_for(stepwise, options.beam, options.groups, options.diversity)
    return run_search(
        engine, src, table, stepwise, strategy, score_end=options.score_end, shortlist=shortlist
    )


def search_with_proposer(
    engine: RescoringModel,
    proposer: StepModel,
    head_t: Tensor,
    plans: list[Plan],
    table: Tensor,
    src: Tensor,
    stepwise: list[StepRule],
    options: DecodeOptions,
) -> Found:
    """The search with the tagger beside the model: tokens (N, K, L), search scores, model
    log-probs. One tagger pass gives its log-probabilities at every position (the lattice)
    and, with ``options.shortlist``, the shortlist: the tokens it ranks in its top k at
    some position among those the rules allow there (with the required characters and
    EOS). The normal search adds ``ensemble_weight`` times the lattice to the rule table
    (a second opinion on every step) and scores only the shortlist; the fast mode searches
    the lattice itself, within the shortlist, and rescores its proposals with the model.
    When the shortlist leaves some request without a line, the batch is searched again
    over the whole vocabulary."""
    lattice = proposer.encode(src)  # (N, L, V) log-probabilities
    length = lattice.shape[1]
    shortlist = _shortlist(plans, table[:, :length] + lattice, options.shortlist, head_t)
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
        return _rescore(engine, src, *found, options, listed)
    table = table.copy()
    table[:, :length] += options.ensemble_weight * lattice
    found, _ = _with_fallback(shortlist, lambda lst: model_search(engine, src, table, stepwise, options, lst))
    return found


def _shortlist(plans: list[Plan], ranked: Tensor, k: int, head_t: Tensor) -> Shortlist | None:
    """ranked (N, L, V): the rule table plus the lattice -> the shortlist of its top ``k``
    per position (None for k = 0)."""
    if not k:
        return None
    values, top = topk(ranked, min(k, ranked.shape[-1]))  # (N, L, k)
    rows = []
    for n, plan in enumerate(plans):
        also = np.array([*plan.required, EOS_ID], dtype=np.int64)
        rows.append(np.unique(np.concatenate([top[n][np.isfinite(values[n])], also])))  # sorted
    return Shortlist.from_rows(rows, head_t)


def _rescore(
    engine: RescoringModel,
    src: Tensor,
    tokens: Tensor,
    search: Tensor,
    logp: Tensor,
    options: DecodeOptions,
    shortlist: Shortlist | None,
) -> Found:
    """The proposer's candidates re-ranked by the encoder-decoder's log-probability plus
    the search's preferences (and ``proposer_weight`` times the proposer's log-probability)
    -> tokens, search scores, model log-probs, best first per request."""
    ar = rescore(engine, src, tokens, options.score_end, shortlist)  # (N, K)
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
