"""Long couplets: time to answer upper lines of about 40, 60 and 100 characters as the site
does (the shipped bundle, int8 on the served runtime, 10 candidates, one thread), and the
share of answers keeping every hard rule.

The long lines are whole wb14123 test upper lines joined with "，" until the next would pass
the target length (so each is 0-6 characters under it; the mean is reported); the corpus
has no couplet longer than 32 characters. Without the corpus, fixture couplets are joined.

Then the mixed load (bench/_mixed_load.py): sixteen clients bursting 60-100 character lines at
a real server while another sends 7-character lines, with the cost admission off and on
(serve/admission.py), twice each, 30 s a run (``DUILIAN_BENCH_LONG_SECONDS`` for longer runs,
so that p99 is more than the slowest of about 90 requests; ``--quick``: once, 10 s): the short
lines' p50/p90/p99/max, and how the long-line clients were answered (200, 429, 503).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench._mixed_load import mixed
from bench.decode import upper_lines
from data.paths import default_model_dir, graph_cache_dir
from duilian.engine import Engine, set_decode_threads
from duilian.inputs import Query
from duilian.service import LoadedModel
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from model.store.layout import has_model

TARGETS = (40, 60, 100)


def long_lines(uppers: list[str], target: int, count: int) -> list[str]:
    """``count`` lines of ``target - 6`` to ``target`` characters, whole upper lines joined."""
    out: list[str] = []
    pool = [u for u in uppers if u and "，" not in u]
    i = 0
    while len(out) < count and i < len(pool) * 4:
        line = ""
        while i < len(pool) * 4:
            piece = pool[i % len(pool)]
            i += 1
            joined = f"{line}，{piece}" if line else piece
            if len(joined) > target:
                break
            line = joined
        if len(line) >= target - 6:
            out.append(line)
    return out


def run(args: argparse.Namespace) -> dict[str, object]:
    if not has_model(default_model_dir()):
        return {"skipped": "no bundle in models/default"}
    set_decode_threads(1)
    quick = getattr(args, "quick", False)
    count = 5 if quick else 20
    uppers, source = upper_lines()
    model = LoadedModel.load(default_model_dir(), engine=Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir()))
    out: dict[str, object] = {"source": source, "lines_per_length": count}
    for target in TARGETS:
        lines = long_lines(uppers, target, count)
        times, kept = [], 0
        for line in lines:
            start = time.perf_counter()
            answer = model.answer(Query(line, 10), banners=False)
            times.append(1000 * (time.perf_counter() - start))
            kept += all(c.report.hard_ok for c in answer.candidates) and len(answer.candidates) == 10
        out[f"chars_{target}_mean_length"] = round(statistics.mean(len(x) for x in lines), 1)
        out[f"chars_{target}_p50_ms"] = round(statistics.median(times), 1)
        out[f"chars_{target}_max_ms"] = round(max(times), 1)
        out[f"chars_{target}_all_rules_kept"] = f"{kept}/{len(lines)}"
    longs = [line for target in (60, 80, 100) for line in long_lines(uppers, target, 12)]
    shorts = [u for u in uppers if len(u) == 7][:400]
    seconds, repeats = (10.0, 1) if quick else (float(os.environ.get("DUILIAN_BENCH_LONG_SECONDS", 30)), 2)
    for run_no in range(repeats):
        for admission in (False, True):
            figures = mixed(default_model_dir(), longs, shorts, seconds, admission)
            for key, value in figures.items():
                out[f"mixed_{'on' if admission else 'off'}_{run_no + 1}_{key}"] = value
    return out
