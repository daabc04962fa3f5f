"""The sensitive-word filter measured on the test set (issue 25, item 2).

1. False positives: the share of the human lower lines of the wb14123 test set that the
   served filter (the bundle's hashed list with the allow-list) refuses, matching substrings
   as before and matching on the upper line's word boundaries (data/segment.py) as now.
2. Short answers: the first N test upper lines through the service (duilian.service, the
   site's engine), 10 candidates asked: how many answers have fewer, and how many candidates
   the filter after the search still withheld.

    python scripts/sensitive_check.py [--model models/default] [--lines 2000] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from data.paths import corpus_dir, default_model_dir, graph_cache_dir
from data.segment import boundaries
from duilian.engine import Engine
from duilian.inputs import Query
from duilian.service import LoadedModel, allow_list
from model.store.bundle import load_bundle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=default_model_dir())
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = [r.split("\t") for r in (corpus_dir() / "wb14123_test.tsv").read_text("utf-8").splitlines()]
    pairs = [(r[0], r[1]) for r in rows if len(r) >= 2]
    words = load_bundle(args.model).sensitive_filter(allow_list())
    substring = [lo for _, lo in pairs if not words.is_clean(lo)]
    bounded = [lo for up, lo in pairs if not words.is_clean(lo, boundaries(up))]
    out: dict[str, object] = {
        "human_lower_lines": len(pairs),
        "refused_substring": len(substring),
        "refused_word_boundaries": len(bounded),
        "refused_substring_share": round(len(substring) / len(pairs), 5),
        "refused_word_boundaries_share": round(len(bounded) / len(pairs), 5),
        "still_refused_examples": bounded[:10],
    }
    model = LoadedModel.load(
        args.model, engine=Engine(int8=True, runtime="onnx", graph_cache=graph_cache_dir())
    )
    short, withheld, errors, asked = 0, 0, 0, 10
    start = time.perf_counter()
    uppers = [up for up, _ in pairs[: args.lines]]
    for up in uppers:
        answer = model.answer_batch([Query(up, asked)], 0)[0]
        if isinstance(answer, Exception):
            errors += 1
            continue
        short += len(answer.candidates) < asked
        withheld += answer.filtered
    out |= {
        "upper_lines": len(uppers),
        "asked": asked,
        "short_answers": short,
        "refused_lines": errors,
        "withheld_after_search": withheld,
        "seconds": round(time.perf_counter() - start, 1),
    }
    text = json.dumps(out, ensure_ascii=False, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
