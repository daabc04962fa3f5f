"""Extraction on real pages: precision and recall of ``crawler.extract.prose_pairs`` on the
hand-read excerpts in tests/crawler/realpages, per layout and overall, for the tune and
held-out splits apart (``make bench BENCH_ARGS=realpages`` or ``python -m bench.realpages``).

A found pair counts as right when, after the crawl's normalisation and with the edge
punctuation stripped, it equals a hand-read pair of its page; pairs the validation
pipeline would drop are counted too (extraction is measured, not policy).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawler.extract import prose_pairs
from crawler.pipelines import normalise_line

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


def main() -> int:
    for split in ("tune", "heldout"):
        result = score([p for p in pages() if p.split == split])
        print(f"== {split}")
        print(json.dumps(result, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
