"""What the search asks of a model, and the one way a step's scores are made.

:class:`StepModel` names the optional capabilities (``capabilities``), which the model
classes state, so nothing is probed with ``hasattr``; the narrower protocols name what each
capability adds. A step's search scores are always the model's log-probabilities
(:func:`model_log_probs`) plus the rule table's row and the step rules (:func:`rule_scores`):
the beam search (model/decoding/search.py) and the scores of given lines
(model/decoding/rescoring.py) read them the same way.

Shapes: N requests, B = N*width rows, L line length, V vocabulary (or M listed columns).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import numpy as np

from model.decoding.arrays import log_softmax, log_softmax_at
from model.decoding.score_rules import Step, StepRule
from model.spec.capabilities import LOG_PROBS

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


def model_log_probs(model: StepModel, cache: Any, prev: Tensor, pos: int) -> Tensor:
    """The model's step at ``pos`` after ``prev`` (B,) as log-probabilities (B, V) float32
    (the tagger's lattice, ``LOG_PROBS``, already is)."""
    return normalised(model, model.step(cache, prev, pos))


def normalised(model: StepModel, out: Tensor, columns: Tensor | None = None) -> Tensor:
    """A step's output ``out`` (B, V) as log-probabilities, or only at ``columns`` (B, M),
    normalised over the whole vocabulary either way."""
    if LOG_PROBS in model.capabilities:
        return out if columns is None else out[:, columns]
    return log_softmax(out) if columns is None else log_softmax_at(out, columns)


def rule_scores(logp: Tensor, table: Tensor, pos: int, step_rules: Sequence[StepRule], step: Step) -> Tensor:
    """The search's scores of every continuation: log-probs logp (B, V), its rows request by
    request, plus the rule table's row ``pos`` of each row's request (table (N, L+1, V)),
    then every step rule -> (B, V), a new array (a step rule may change it in place)."""
    n, v = table.shape[0], logp.shape[-1]
    scores = (logp.reshape(n, -1, v) + table[:, None, pos]).reshape(-1, v)
    for rule in step_rules:
        scores = rule(scores, step)
    return scores
