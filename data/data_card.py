"""DATA_CARD.md: a short human-readable summary of the data stage's report."""

from __future__ import annotations

from pathlib import Path


def _table(title: str, counts: dict[str, int]) -> list[str]:
    return [f"| {title} | pairs |", "|---|---|", *(f"| {k} | {v} |" for k, v in counts.items()), ""]


def _repeat_lines(repeat: dict[str, int], sp: dict) -> list[str]:
    if not repeat:
        return []
    weights = ", ".join(f"{name} ×{k}" for name, k in repeat.items())
    return [f"train holds {sp['train_distinct']} distinct pairs, those of {weights} written that often,"]


def _vocab_lines(vo: dict) -> list[str]:
    if "from" in vo:
        return [
            f"Vocabulary: {vo['size']} pieces, reused from `{vo['from']}` (`--vocab-from`);",
            f"{vo['train_unknown_types']} training character types ({vo['train_unknown_tokens']} tokens)",
            "are not in it and map to the unknown token.",
        ]
    return [
        f"Vocabulary: {vo['size']} pieces (sentencepiece char model; characters seen at least",
        f"{vo['min_char_count']} times in train; others map to the unknown token, never dropped).",
    ]


def _formal_lines(fo: dict) -> list[str]:
    if not fo.get("present"):
        return []
    return [
        f"Formal yardstick: valid_formal {fo['valid']}, test_formal {fo['test']}: the pairs of",
        f"`{Path(fo['file']).name}` that stand in none of {', '.join(fo['checked_against'])}",
        "(Han characters only, either orientation; data/formal.py). Training pairs with one of their",
        f"lines were removed: {fo['training_pairs_dropped']}.",
    ]


def data_card(report: dict) -> str:
    """A short human-readable summary of the report (the bundle ships it as DATA_CARD.md)."""
    sources = {
        f"{name} ({s['kind']})": s.get("pairs_read", 0)
        for name, s in report["sources"].items()
        if s.get("files")
    }
    sp, vo, norm = report["split"], report["vocab"], report["normalise"]
    changed = ", ".join(f"{k.removeprefix('changed_')} {v}" for k, v in norm.items() if k != "lines")
    return "\n".join(
        [
            "# Data card",
            "",
            "Couplet pairs (`upper<TAB>lower`) built by `make data` (`python -m data`); every",
            "count below is from `report.json`. Licences: wb14123 AGPL-3.0 (so is a model trained",
            "on it); the regulated-verse and primer pairs MIT.",
            "",
            *_table("source read", sources),
            f"Normalisation (lines changed, of {norm['lines']}): {changed}. Whitespace removed,",
            "compatibility forms folded (full-width Chinese punctuation kept), ASCII punctuation",
            "to full-width (the corpus's `--` to `——`), traditional to simplified (OpenCC t2s),",
            "variant characters that OpenCC keeps to their standard form (`data/variants.txt`).",
            "",
            *_table("dropped by filter", report["filter"]),
            "Punctuation must be the same mark at the same positions (docs/COUPLET_RULES.md, rule 2).",
            "Sensitive words: the shared list minus the allow-list in `data/sensitive_allow.txt`.",
            "",
            *_table("removed as duplicate", report["dedup"]),
            "Near duplicates: the same pair without punctuation; the same upper line with a lower",
            "line one character away from a kept one (lines of 5+ characters). At most",
            f"{report['config']['max_lowers_per_upper']} lower lines per upper line.",
            "",
            f"Splits: train {sp['train']}, valid {sp['valid']} ({sp['valid_uppers']} whole upper lines),",
            f"valid_classical {sp.get('valid_classical', 0)} (classical sources, "
            f"{sp.get('valid_classical_uppers', 0)} whole upper lines),",
            *_repeat_lines(report["config"].get("repeat") or {}, sp),
            f"test {sp['test']}: the standard wb14123 test set byte for byte, {sp['test_leakfree']} of it",
            f"leak-free ({sp['test_leak']} test pairs have an upper line that is an upper line of the",
            "training sources).",
            "Training pairs whose upper line is a test upper line were removed:",
            f"{sp['train_removed_test_upper']}.",
            *_formal_lines(report.get("formal") or {}),
            "",
            *_vocab_lines(vo),
            f"Test character coverage {vo['test_char_coverage']:.4%},",
            f"{vo['test_unknown_types']} unknown",
            "character types in the test set (normalised as inputs are).",
            "",
            "Known limits: the sensitive-word list both misses and over-hits; about 3.8% of the",
            "original wb14123 pairs are missing upstream, so rare characters are under-represented.",
            "",
        ]
    )
