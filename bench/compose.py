"""Composing a couplet from a head (``POST /api/v1/compose``, duilian/compose.py): the latency of
one request (p50 / p90 / p99 in ms) for 3 couplets of 7 characters and of the pattern 4,7, on the
shipped bundle as the site decodes it (int8 on ONNX Runtime, one thread), in this process: the
seed choice, one batch of drafts by the reverse model, one batch of lower lines by the forward
model, the 横批 and the check of each couplet. Heads: the first characters of the two lines of the
wb14123 test pairs (each asked once, so no cache helps); the first request of each pattern, which
reads the seed index and jieba's and pypinyin's tables, is left out. Also: the share of requests
answered with 3 couplets, and the mean number answered.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from bench.check import timed
from bench.decode import upper_lines
from data.paths import default_model_dir, graph_cache_dir
from data.text import is_han
from duilian.compose import compose, make_compose_request
from duilian.engine import Engine, set_decode_threads
from duilian.service import LoadedModel
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from model.decoding.plan import ConstraintError
from model.store.layout import has_model

N = 3


def heads(count: int) -> list[str]:
    """``count`` distinct head pairs: the first characters of test pairs' two lines."""
    uppers, _ = upper_lines()
    lowers, _ = upper_lines(1)
    out: list[str] = []
    for u, w in zip(uppers, lowers, strict=True):
        head = u[:1] + w[:1]
        if len(head) == 2 and all(is_han(ch) for ch in head) and head[0] != head[1] and head not in out:
            out.append(head)
        if len(out) == count:
            break
    return out


def composer(model: LoadedModel, pattern: str, answered: list[int]) -> Callable[[str, str], object]:
    def run(head: str, _: str) -> object:
        try:
            found = compose(model, make_compose_request(head, length=pattern, n=N))
        except ConstraintError:
            answered.append(0)
            return None
        answered.append(len(found.couplets))
        return found

    return run


def run(args: argparse.Namespace) -> dict[str, object]:
    if not has_model(default_model_dir()):
        return {"skipped": "no bundle in models/default"}
    count = 21 if getattr(args, "quick", False) else 201
    set_decode_threads(1)
    start = time.perf_counter()
    model = LoadedModel.load(default_model_dir(), engine=Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir()))
    out: dict[str, object] = {"load_s": round(time.perf_counter() - start, 2), "requests_each": count - 1}
    found = heads(2 * count)
    for name, pattern, asked in (("7", "7", found[:count]), ("4_7", "4,7", found[count:])):
        answered: list[int] = []
        figures = timed(composer(model, pattern, answered), [(h, "") for h in asked])
        out |= {f"compose_{name}_{k}": v for k, v in figures.items()}
        kept = answered[1:]  # the first, a warm-up, is not timed
        out[f"compose_{name}_full_share"] = round(sum(a == N for a in kept) / len(kept), 3)
        out[f"compose_{name}_mean_couplets"] = round(sum(kept) / len(kept), 2)
    out["load_average_at_start"] = round(os.getloadavg()[0], 2)
    return out
