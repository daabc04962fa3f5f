"""Alternatives at one position (``POST /api/v1/alternatives``, ``Decoder.alternatives``): the
latency of one request (p50 / p90 / p99 in ms) on the shipped bundle as the site decodes it
(``SERVE_INT8`` on ``SERVE_RUNTIME``, its tagger, pairing table and blocked words, one thread),
and how often the default pre-ranking pool (``ALTERNATIVE_POOL``) gives the same top 8 as a
pool of 1,024 (every character the rules allow at most positions): the share of requests whose
lists are equal, and the mean overlap of the two top 8s.

Lines: the first upper lines of the wb14123 test set (the test fixtures without the corpus),
each with its best candidate from the served search; positions: every character position of
each line, in turn (a repeat group's first place counts for the group). Without a bundle the
module reports that it was skipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.decode import upper_lines
from data.paths import default_model_dir, graph_cache_dir
from data.text import is_punct
from duilian.engine import Engine, set_decode_threads
from duilian.service import LoadedModel
from model.decoding.options import ALTERNATIVE_POOL, SERVE_INT8, SERVE_RUNTIME, DecodeOptions
from model.decoding.plan import ConstraintError
from model.store.layout import has_model

TOP = 8
WIDE = 1024


def run(args: argparse.Namespace) -> dict[str, object]:
    if not has_model(default_model_dir()):
        return {"skipped": "no bundle in models/default"}
    set_decode_threads(1)
    quick = getattr(args, "quick", False)
    lines, source = upper_lines()
    lines = [u for u in lines if 5 <= len(u) <= 16][: 10 if quick else 40]
    model = LoadedModel.load(default_model_dir(), engine=Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir()))
    decoder = model.decoder
    options = DecodeOptions()
    times: list[float] = []
    same = overlap = asked = 0
    for upper in lines:
        try:
            lower = decoder.generate(upper, DecodeOptions(n_best=1)).candidates[0].text
        except ConstraintError:
            continue
        for position in [i for i, ch in enumerate(upper) if not is_punct(ch)]:
            start = time.perf_counter()
            found = decoder.alternatives(upper, lower, position, options, k=TOP)
            times.append((time.perf_counter() - start) * 1000)
            if position % 3 == 0:  # the wide pool on a third of the positions (it is slow)
                wide = decoder.alternatives(upper, lower, position, options, k=TOP, pool=WIDE)
                a = [x.char for x in found.alternatives][:TOP]
                b = [x.char for x in wide.alternatives][:TOP]
                asked += 1
                same += a == b
                overlap += len(set(a) & set(b))
    times.sort()

    def pct(q: float) -> float:
        return round(times[min(len(times) - 1, int(q * len(times)))], 1)

    return {
        "lines": len(lines),
        "source": source,
        "requests": len(times),
        "p50_ms": pct(0.5),
        "p90_ms": pct(0.9),
        "p99_ms": pct(0.99),
        "mean_ms": round(statistics.fmean(times), 1),
        "stdev_ms": round(statistics.stdev(times), 1),
        "pool": ALTERNATIVE_POOL,
        "compared_with_pool": WIDE,
        "same_top8_share": round(same / asked, 3) if asked else None,
        "mean_top8_overlap": round(overlap / asked, 2) if asked else None,
        "compared_requests": asked,
        "load_average_at_start": round(os.getloadavg()[0], 2),
    }
