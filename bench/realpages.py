"""Extraction on real pages: precision and recall of ``crawler.extract.prose_pairs`` on the
hand-read excerpts in tests/crawler/realpages, per layout and overall, for the tune and
held-out splits apart (``make bench BENCH_ARGS=realpages`` or ``python -m bench.realpages``;
``--pages 54-72`` scores those pages only).

A found pair counts as right when, after the crawl's normalisation and with the edge
punctuation stripped, it equals a hand-read pair of its page; pairs the validation
pipeline would drop are counted too (extraction is measured, not policy).

``python -m bench.realpages --policy`` measures the policy instead: how many hand-read
pairs the crawler's validation (``crawler.pipelines.invalid_reason``, the data stage's
``pair_problem``) refuses, per rule, and how many of those refused for a repeat or a reused
character would pass if a function word at the same positions in both halves (之…之, 为…为)
were exempt (``policy_drops``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawler.extract import prose_pairs
from crawler.pipelines import invalid_reason, normalise_line
from data.rules import no_reuse, repeats_mirrored

PAGES = Path(__file__).resolve().parent.parent / "tests" / "crawler" / "realpages"
_EDGE = "，。；：！？、 "


@dataclass
class Page:
    name: str
    source: str
    layout: str
    split: str
    pairs: set[tuple[str, str]] = field(default_factory=set)
    text: str = ""


def read_page(path: Path) -> Page:
    head, _, text = path.read_text(encoding="utf-8").partition("\n---\n")
    page = Page(path.stem, "", "", "", text=text)
    for line in head.splitlines():
        key, _, value = line.partition(": ")
        if key == "pair":
            upper, _, lower = value.partition(" / ")
            page.pairs.add((key_line(upper), key_line(lower)))
        elif key in ("source", "layout", "split"):
            setattr(page, key, value.strip())
    return page


def key_line(line: str) -> str:
    return normalise_line(line).strip(_EDGE)


def pages() -> list[Page]:
    return [read_page(p) for p in sorted(PAGES.glob("*.txt"))]


def score(selected: list[Page]) -> dict[str, Any]:
    """Counts per layout and overall, with the misses and the false pairs listed."""
    by: dict[str, dict[str, Any]] = defaultdict(lambda: {"truth": 0, "found": 0, "right": 0})
    misses, wrong = [], []
    for page in selected:
        found = {(key_line(p.upper), key_line(p.lower)) for p in prose_pairs(page.text)}
        for row in (by[page.layout], by["all"]):
            row["truth"] += len(page.pairs)
            row["found"] += len(found)
            row["right"] += len(found & page.pairs)
        misses += [f"{page.name}: {u} / {w}" for u, w in sorted(page.pairs - found)]
        wrong += [f"{page.name}: {u} / {w}" for u, w in sorted(found - page.pairs)]
    for row in by.values():
        row["recall"] = round(row["right"] / row["truth"], 3) if row["truth"] else None
        row["precision"] = round(row["right"] / row["found"], 3) if row["found"] else None
    return {"layouts": dict(by), "misses": misses, "false_pairs": wrong}


def page_range(selected: list[Page], spec: str) -> list[Page]:
    """The pages numbered ``FIRST-LAST`` (``54-72``) or ``N``, by their file name's number."""
    first, _, last = spec.partition("-")
    low, high = int(first), int(last or first)
    return [p for p in selected if low <= int(p.name.split("-")[0]) <= high]


# Function words (虚字) that the issue asks about: repeated at the same positions in both
# halves (一夜五更，半夜五更之半 / 三秋八月，中秋八月之中), would an exemption let a pair through?
FUNCTION_WORDS = "之而不也以其于乎者与矣兮为"
# A wider list, to see how the answer moves with the list: copulas, particles, 在/有/无.
WIDE_FUNCTION_WORDS = FUNCTION_WORDS + "是所则乃且亦或若焉哉诸夫曰在有无"
REPEAT_RULES = ("repeats_not_mirrored", "reused_chars")


def mirrored_words(upper: str, lower: str, words: str) -> set[str]:
    """The function words of ``words`` that stand at exactly the same positions in both halves."""

    def at(line: str, ch: str) -> list[int]:
        return [i for i, c in enumerate(line) if c == ch]

    return {ch for ch in set(upper) & set(lower) if ch in words and at(upper, ch) == at(lower, ch)}


def passes_with_exemption(upper: str, lower: str, words: str) -> bool:
    """The repeat and no-reuse rules hold once the mirrored function words are left out of
    both (each occurrence read as a character of its own, found nowhere else)."""
    exempt = mirrored_words(upper, lower, words)

    def mask(line: str, base: int) -> str:
        return "".join(chr(base + i) if ch in exempt else ch for i, ch in enumerate(line))

    masked_upper, masked_lower = mask(upper, 0xE000), mask(lower, 0xE400)  # private use: not Han
    return repeats_mirrored(masked_upper, masked_lower) and no_reuse(masked_upper, masked_lower)


def policy_drops(selected: list[Page]) -> dict[str, Any]:
    """Hand-read pairs that validation refuses: per rule the count and the pairs, and of
    those refused for a repeat or a reused character, the ones a function-word exemption
    would let through (with ``FUNCTION_WORDS`` and with ``WIDE_FUNCTION_WORDS``)."""
    total = 0
    refused: dict[str, list[str]] = defaultdict(list)
    exempt: dict[str, list[str]] = {"function_words": [], "wide_function_words": []}
    for page in selected:
        for upper, lower in sorted(page.pairs):
            total += 1
            reason = invalid_reason(upper, lower)
            if reason is None:
                continue
            shown = f"{page.name}: {upper} / {lower}"
            refused[reason].append(shown)
            if reason not in REPEAT_RULES:
                continue
            for key, words in (
                ("function_words", FUNCTION_WORDS),
                ("wide_function_words", WIDE_FUNCTION_WORDS),
            ):
                if passes_with_exemption(upper, lower, words):
                    exempt[key].append(f"{shown} ({''.join(sorted(mirrored_words(upper, lower, words)))})")
    counts = {reason: len(pairs) for reason, pairs in sorted(refused.items(), key=lambda kv: -len(kv[1]))}
    return {
        "pairs": total,
        "refused": sum(counts.values()),
        "counts": counts,
        "refused_pairs": dict(refused),
        "repeat_or_reuse": sum(counts.get(r, 0) for r in REPEAT_RULES),
        "pass_with_exemption": {key: len(v) for key, v in exempt.items()},
        "exempted_pairs": exempt,
    }


def run(args: Any) -> dict[str, object]:
    figures: dict[str, object] = {}
    all_pages = pages()
    figures["pages"] = len(all_pages)
    figures["sites"] = len({p.source.split("/")[2] for p in all_pages})
    for split in ("tune", "heldout"):
        result = score([p for p in all_pages if p.split == split])
        for layout, row in sorted(result["layouts"].items()):
            figures[f"{split}_{layout}"] = (
                f"P {row['precision']} R {row['recall']} "
                f"({row['right']}/{row['found']} found, {row['truth']} read)"
            )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.realpages", description=__doc__)
    parser.add_argument("--pages", help="only the pages numbered FIRST-LAST (54-72) or N")
    parser.add_argument("--policy", action="store_true", help="validation's refusals of the hand-read pairs")
    args = parser.parse_args(argv)
    selected = page_range(pages(), args.pages) if args.pages else pages()
    if args.policy:
        print(json.dumps(policy_drops(selected), ensure_ascii=False, indent=1))
        return 0
    for split in ("tune", "heldout"):
        result = score([p for p in selected if p.split == split])
        print(f"== {split}")
        print(json.dumps(result, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
