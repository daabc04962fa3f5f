"""The evaluation's figures as Markdown tables (eval.md, the model card)."""

from __future__ import annotations

from typing import Any

from model.release.metrics import BLEU_ORDERS


def with_ci(split: dict[str, Any], key: str) -> str:
    """A figure of one split as text, with its confidence interval when there is one."""
    ci = split.get(f"{key}_ci95")
    return f"{split.get(key, '–')}" + (f" ± {ci}" if ci is not None else "")


def markdown(result: dict[str, Any]) -> str:
    splits = [s for s in ("full", "leakfree") if s in result]
    head = "| figure | " + " | ".join(f"{s} ({result[s]['pairs']} pairs)" for s in splits) + " |"
    lines = [head, "|---|" + "---|" * len(splits)]
    for key in ("bleu1", "bleu2", "bleu4", "perplexity", "distinct1", "distinct2", "verbatim_train_lower"):
        lines.append(f"| {key} | " + " | ".join(with_ci(result[s], key) for s in splits) + " |")
    for rule in result[splits[0]]["rules_model"]:
        cells = [f"{result[s]['rules_model'][rule]} (human {result[s]['rules_human'][rule]})" for s in splits]
        lines.append(f"| rule {rule} % | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def comparison_table(result: dict[str, Any]) -> str:
    """The decode asked for beside each compared one (empty without any)."""
    compared: dict[str, dict[str, float]] = result.get("compared", {})
    if not compared:
        return ""
    asked = result["summary"]
    head = "| figure | as asked | " + " | ".join(compared) + " |"
    keys = [k for k in asked if not k.endswith("_human")]
    keys += [f"full_bleu{n}_{s}" for n in BLEU_ORDERS for s in ("diff", "diff_ci95", "wins")]  # paired
    rows = [
        f"| {k} | {asked.get(k, '–')} | " + " | ".join(str(c.get(k, "–")) for c in compared.values()) + " |"
        for k in keys
        if k in asked or any(k in c for c in compared.values())
    ]
    return "\n".join(["", head, "|---|---|" + "---|" * len(compared), *rows]) + "\n"
