"""What a model may offer the search beyond its steps, declared in its ``capabilities``
(model/decoding/step_model.py's ``StepModel`` protocol): the search reads the declaration and
never probes a model for methods."""

from __future__ import annotations

LISTED_ROWS = "listed_rows"  # step_states(): hidden states, so a shortlist's rows alone are scored
LISTED_IN_GRAPH = "listed_in_graph"  # step_log_probs(): the listed rows scored inside the step
LOG_PROBS = "log_probs"  # step() returns normalised log-probabilities (the tagger's lattice)
REORDER_BEAMS = "reorder_beams"  # reorder_beams(): beams moved within their request only
