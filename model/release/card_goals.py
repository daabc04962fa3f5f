"""The model card's goals (docs/MEASUREMENTS.md), each measured figure set against its target
and reported as reached or not reached with the gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Goal:
    name: str
    value: float | None
    target: float
    higher_is_better: bool
    unit: str = ""
    ci95: float | None = None  # half-width of the value's 95% confidence interval, when known

    def verdict(self) -> str:
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return "not measured"
        ok = self.value >= self.target if self.higher_is_better else self.value <= self.target
        if ok:
            return "reached"
        gap = abs(self.value - self.target)
        within = (
            f"; within the 95% interval ± {self.ci95:g}" if self.ci95 is not None and gap <= self.ci95 else ""
        )
        return f"not reached (gap {gap:.4g}{self.unit}{within})"

    def row(self) -> str:
        sign = "≥" if self.higher_is_better else "≤"
        shown = "–" if self.value is None else f"{self.value:.4g}{self.unit}"
        if self.value is not None and self.ci95 is not None:
            shown += f" ± {self.ci95:g}"
        return f"| {self.name} | {shown} | {sign} {self.target:g}{self.unit} | {self.verdict()} |"


def goals(ev: dict[str, Any], size_mb: float, bench: dict[str, Any]) -> list[Goal]:
    full = ev.get("full", {})
    rules = full.get("rules_model", {})
    latency = bench.get("decode", {})
    return [
        Goal("test perplexity (full test set)", full.get("perplexity"), 60, False),
        Goal("BLEU-4, full test set", full.get("bleu4"), 3, True, ci95=full.get("bleu4_ci95")),
        Goal("BLEU-2, full test set", full.get("bleu2"), 10, True, ci95=full.get("bleu2_ci95")),
        Goal("hard-rule compliance of outputs", rules.get("hard_ok"), 100, True, "%"),
        Goal("lower line ends 平 after 仄", rules.get("tone_end"), 99, True, "%"),
        Goal("bundle size on disk", size_mb, 40, False, " MB"),
        Goal("decoding latency p50 (10 candidates)", latency.get("latency_p50_ms"), 15, False, " ms"),
        Goal("decoding latency p99 (10 candidates)", latency.get("latency_p99_ms"), 50, False, " ms"),
    ]
