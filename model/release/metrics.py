"""The evaluation's figures: BLEU-1/2/4 (with a bootstrap interval, and paired between two
decodes), perplexity, rule compliance and diversity, of one split of the test set.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from sacrebleu.metrics import BLEU

from data.rules import HARD_RULES, check
from data.vocab import Vocab
from model.net.checkpoint import CoupletModel
from model.training.pairs import PairData
from model.training.scoring import mean_nll

BLEU_ORDERS = (1, 2, 4)
# Resamples of the test lines for BLEU's 95% confidence interval (sacrebleu's own default
# for its bootstrap); a few seconds on the 4,000-pair test set.
BOOTSTRAP = 1000


def bleu_scores(hyps: list[str], refs: list[str], n_bootstrap: int = 0) -> dict[str, float]:
    """Corpus BLEU-1/2/4 (sacrebleu, ``tokenize="zh"``). With ``n_bootstrap`` > 1 also
    ``bleuN_ci95``: the half-width of the 95% confidence interval from sacrebleu's bootstrap
    resampling of the lines (its seed fixed, SACREBLEU_SEED, so the figure is reproducible):
    how far another sample of test lines could move the figure. Two decodes of the same
    lines are compared far more finely by ``paired_bleu``."""
    out: dict[str, float] = {}
    for n in BLEU_ORDERS:
        score = BLEU(tokenize="zh", max_ngram_order=n).corpus_score(
            hyps, [refs], n_bootstrap=max(n_bootstrap, 1)
        )
        out[f"bleu{n}"] = round(score.score, 2)
        if n_bootstrap > 1:  # estimate_ci's result: sacrebleu prints it as "score (μ ± ci)"
            out[f"bleu{n}_ci95"] = round(float(score._ci), 2)
    return out


def rule_rates(uppers: list[str], lowers: list[str], tone_mode: str) -> dict[str, float]:
    """Share of pairs passing each rule; tone_end and rhythm over the pairs where they apply."""
    reports = [check(u, lo, tone_mode) for u, lo in zip(uppers, lowers, strict=True)]
    n = max(len(reports), 1)
    rates = {name: sum(bool(getattr(r, name)) for r in reports) / n for name in HARD_RULES}
    rates["hard_ok"] = sum(r.hard_ok for r in reports) / n
    tone = [r.tone_end for r in reports if r.tone_end is not None]
    rates["tone_end"] = sum(tone) / len(tone) if tone else math.nan
    rhythm = [r.rhythm for r in reports if r.rhythm is not None]
    rates["rhythm"] = sum(rhythm) / len(rhythm) if rhythm else math.nan
    rates["no_three_level_tail"] = sum(r.no_three_level_tail for r in reports) / n
    return {k: round(100 * v, 2) for k, v in rates.items()}


def distinct(lines: list[str], n: int) -> float:
    grams = [line[i : i + n] for line in lines for i in range(len(line) - n + 1)]
    return round(len(set(grams)) / max(len(grams), 1), 4)


def perplexity(model: CoupletModel, vocab: Vocab, pairs: list[tuple[str, str]], register: int = 0) -> float:
    """The reference lines' perplexity, every pair in the register of index ``register``."""
    data = PairData(pairs, vocab, model.cfg.max_len, batch_tokens=4096, registers=[register] * len(pairs))
    with torch.no_grad():
        return round(math.exp(mean_nll(model, data.fixed_batches(list(range(len(data)))))), 2)


def score_split(
    model: CoupletModel,
    vocab: Vocab,
    pairs: list[tuple[str, str]],
    hyps: list[str],
    train_lowers: set[str],
    tone_mode: str,
    n_bootstrap: int = BOOTSTRAP,
    register: int = 0,
) -> dict[str, Any]:
    uppers, refs = [u for u, _ in pairs], [lo for _, lo in pairs]
    return {
        "pairs": len(pairs),
        **bleu_scores(hyps, refs, n_bootstrap),
        "perplexity": perplexity(model, vocab, pairs, register),
        "distinct1": distinct(hyps, 1),
        "distinct2": distinct(hyps, 2),
        "verbatim_train_lower": round(100 * sum(h in train_lowers for h in hyps) / max(len(hyps), 1), 2),
        "rules_model": rule_rates(uppers, hyps, tone_mode),
        "rules_human": rule_rates(uppers, refs, tone_mode),
    }


def line_stats(refs: list[str], hyps: list[str]) -> dict[int, Any]:
    """For each BLEU order, sacrebleu's sufficient statistics of every line (matches and totals
    per n-gram order, lengths), an int array (lines, statistics): a resample's BLEU is
    computed from their sums, as sacrebleu's own bootstrap does."""

    return {
        n: np.array(
            BLEU(tokenize="zh", max_ngram_order=n)._extract_corpus_statistics(hyps, [refs]), dtype=np.int64
        )
        for n in BLEU_ORDERS
    }


def paired_bleu(asked: dict[int, Any], other: dict[int, Any], n_bootstrap: int) -> dict[str, float]:
    """``other``'s BLEU against ``asked``'s on the same lines (both ``line_stats``), by a paired
    bootstrap (Koehn, EMNLP 2004): both decodes resampled together, line for line,
    ``n_bootstrap`` times. For each order: ``bleuN_diff`` (other - asked on the lines as they
    are), ``bleuN_diff_ci95`` (half the width of the difference's 95% interval over the
    resamples) and ``bleuN_wins`` (the share of resamples where ``other`` scores higher). Much
    finer than comparing the two decodes' own intervals, since what the lines share cancels
    out. The seed is fixed."""

    lines = len(asked[BLEU_ORDERS[0]])
    samples = np.random.default_rng(12345).integers(0, lines, size=(max(n_bootstrap, 1), lines))
    out: dict[str, float] = {}
    for n in BLEU_ORDERS:
        bleu = BLEU(tokenize="zh", max_ngram_order=n)._compute_score_from_stats
        a, b = asked[n], other[n]
        diffs = np.array([bleu(list(b[i].sum(0))).score - bleu(list(a[i].sum(0))).score for i in samples])
        lo, hi = np.percentile(diffs, [2.5, 97.5])
        out[f"bleu{n}_diff"] = round(bleu(list(b.sum(0))).score - bleu(list(a.sum(0))).score, 2)
        out[f"bleu{n}_diff_ci95"] = round(float(hi - lo) / 2, 2)
        out[f"bleu{n}_wins"] = round(float((diffs > 0).mean()), 3)
    return out
