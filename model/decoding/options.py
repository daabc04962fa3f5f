"""What a decode is asked for (``DecodeOptions``; what it gives back is model/decoding/answer.py's),
and the runtimes a ``Decoder`` may run the models on (with the served
defaults, which ``serve.settings`` and ``model.release.evaluate`` read)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

MAX_CANDIDATES = 20
DIVERSE_PENALTY = 1.0  # ``diversity`` of a served ``diverse`` request (docs/EXPERIMENTS.md §8)


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
    register: str = "general"  # data.text.REGISTERS, for a model with registers (model/decoding/registers.py)
    rhythm_weight: float = 1.0  # cost of an unopposed tone at a rhythm position
    three_level_weight: float = 2.0  # cost of a level tone that makes a 三平尾
    score_end: bool = False  # one more model step for log P(end of sequence) after the line
    fast: bool = False  # with a proposer: search its one-pass lattice, rescore (faster, lower BLEU)
    # with a proposer: its log-probabilities' weight in the normal search. 1.5 had the best BLEU
    # (docs/EXPERIMENTS.md §17), but blind judges preferred the lines of 0.5, whose search leans
    # more on the encoder-decoder's own steps, and more so with the pairing table (§23)
    ensemble_weight: float = 0.5
    # with the bundle's pairing table (data/pairing.py): its score of each character against
    # the upper line's character at the same position is added with this weight (0 = off;
    # 0.6 with ensemble_weight 0.5 won blind on both halves, docs/EXPERIMENTS.md §23)
    pairing_weight: float = 0.6
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
    # with a reranker (model/decoding/reranking.py): its score's weight in each candidate's rank;
    # None: the reranker's own (the bundle's, chosen on validation lines; docs/EXPERIMENTS.md
    # §44-45), 0: off
    rerank_weight: float | None = None

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


# Alternatives at one position (``Decoder.alternatives``): the rule-allowed characters are
# first ranked by the search's score at that position alone, and this many of the best (and
# the line's own) are then scored on the whole line (docs/EXPERIMENTS.md §26)
ALTERNATIVE_POOL = 64


Runtime = Literal["torch", "onnx"]  # what runs the models while decoding
RUNTIMES: tuple[Runtime, ...] = get_args(Runtime)
SERVE_INT8 = (
    True  # how `make serve` decodes a bundle by default (serve.settings, model.release.evaluate read it)
)
SERVE_RUNTIME: Runtime = "onnx"  # and on what
