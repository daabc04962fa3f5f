"""The check of a couplet (``POST /api/v1/check``, duilian/check.py): the latency of one check
(p50 / p90 / p99 in ms) of a 7-character couplet and of a 100-character one, on the shipped
bundle's pairing table and known lines; the goals are p50 under 20 ms and under 150 ms
(issue 42).

Two ways: ``check`` times what the route computes (the known lines, then ``check_couplet``),
``api`` the whole request through the real app in-process (FastAPI's TestClient: validation, the
check, the JSON). Couplets: 7-character pairs of the wb14123 test set, each checked once, and the
two ways on different halves (no cache helps); 100-character ones are test pairs joined clause by
clause with "，" (each line exactly 100 characters, the longest the site accepts). The first
check of each way, which reads jieba's parts of speech and pypinyin's phrases, is left out.

With the suggestions (7 characters): ``api_suggest`` the whole request with the model in the
server process, ``site_suggest`` with the site's two decode worker processes (the suggestions
computed in one of them), ``suggest`` the check and its suggestions as ``duilian check`` computes
them in this process (``*_100``: 100 characters, which the alternatives search refuses at once).

``api`` and ``site`` go through FastAPI's TestClient, whose calls cross into the app's event loop
on another thread and back (about 4-5 ms a request on this machine, which no deployment pays).
``http`` and ``http_suggest`` are what a user's browser meets: a real ``python -m serve`` (its
default decode workers; bench/_live_server.py) on loopback, one keep-alive HTTP client.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import httpx

from bench._live_server import served
from bench.decode import upper_lines
from data.paths import default_model_dir, graph_cache_dir
from duilian.check import check_couplet, check_with, known_couplet
from duilian.engine import Engine, set_decode_threads
from duilian.inputs import AlternativesQuery
from duilian.service import LoadedModel
from duilian.suggest import suggest
from model.decoding.alternatives import Kept
from model.decoding.answer import Alternatives
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from model.decoding.plan import ConstraintError
from model.store.bundle import Bundle, load_bundle
from model.store.layout import has_model

LONG = 100


def pairs_of(length: int, count: int) -> list[tuple[str, str]]:
    """``count`` distinct couplets of exactly ``length`` characters from the test pairs."""
    uppers, _ = upper_lines()
    lowers, _ = upper_lines(1)
    pairs = [(u, w) for u, w in zip(uppers, lowers, strict=True) if len(u) == len(w) and "，" not in u]
    if length <= 32:
        return [p for p in pairs if len(p[0]) == length][:count]
    out: list[tuple[str, str]] = []
    i = 0
    while len(out) < count and i < len(pairs):
        up, low = pairs[i]
        i += 1
        while len(up) < length and i < len(pairs):
            u, w = pairs[i]
            i += 1
            room = length - len(up) - 1
            up, low = f"{up}，{u[:room]}", f"{low}，{w[:room]}"
        if len(up) == length:
            out.append((up, low))
    return out


def check_of(bundle: Bundle) -> Callable[[str, str], object]:
    def run(upper: str, lower: str) -> object:
        lowers = bundle.known_lowers(upper)
        known = known_couplet(upper, lower, lowers, bundle.in_training_data(upper))
        return check_couplet(upper, lower, "modern", bundle.pairing, known)

    return run


def timed(fn: Callable[[str, str], object], pairs: list[tuple[str, str]]) -> dict[str, float]:
    fn(*pairs[0])  # the first reads jieba's tags and pypinyin's phrases
    times = []
    for upper, lower in pairs[1:]:
        start = time.perf_counter()
        fn(upper, lower)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()

    def pct(q: float) -> float:
        return round(times[min(len(times) - 1, int(q * len(times)))], 2)

    return {
        "p50_ms": pct(0.5),
        "p90_ms": pct(0.9),
        "p99_ms": pct(0.99),
        "mean_ms": round(statistics.fmean(times), 2),
    }


def api_of(
    folder: Path, suggest: bool = False, processes: int = 0
) -> tuple[Callable[[str, str], object], Callable[[], None]]:
    """POST /api/v1/check through the real app (the model in the server process, or in
    ``processes`` decode workers), with or without its suggestions, and its close."""
    from fastapi.testclient import TestClient

    from serve.main import create_app
    from serve.settings import Settings

    db = tempfile.mkdtemp(prefix="bench-check-")
    settings = Settings(
        model_dir=folder, database_url=f"sqlite:///{db}/f.db", known_pairs=None, rate_limit_per_minute=0,
        decode_processes=processes,
    )  # fmt: skip
    client = TestClient(create_app(settings))
    client.__enter__()
    return checking(client, suggest), lambda: client.__exit__(None, None, None)


class Posts(Protocol):
    """An HTTP client: httpx's to a real server, or FastAPI's TestClient to the app in-process."""

    def post(self, url: str, *, json: Any) -> Any: ...


def checking(client: Posts, suggest: bool) -> Callable[[str, str], object]:
    """POST /api/v1/check through ``client``, with or without the suggestions."""

    def run(upper: str, lower: str) -> object:
        r = client.post("/api/v1/check", json={"upper": upper, "lower": lower, "suggest": suggest})
        if r.status_code != 200:
            raise RuntimeError(f"check answered {r.status_code}: {r.text}")
        return r.json()

    return run


class Suggesting:
    """The check with its suggestions on a model in this process, counting what it asks."""

    def __init__(self, model: LoadedModel) -> None:
        self.model, self.places, self.calls, self.couplets = model, 0, 0, 0

    def __call__(self, upper: str, lower: str) -> object:
        report = check_with(self.model, upper, lower, "modern")
        kept: Kept = {}  # as LoadedModel.suggestions keeps the line's scores between its asks

        def ask(qs: Sequence[AlternativesQuery]) -> list[Alternatives | ConstraintError]:
            self.calls += 1
            return self.model.alternatives_at(qs, kept)

        found = suggest(report, ask, self.model.bundle.pairing)
        self.places += len(found.items)
        self.couplets += 1
        return replace(report, suggestions=found)


def suggest_figures(pairs: list[tuple[str, str]], prefix: str) -> dict[str, object]:
    set_decode_threads(1)
    model = LoadedModel.load(default_model_dir(), engine=Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir()))
    fn = Suggesting(model)
    out: dict[str, object] = {f"{prefix}_{k}": v for k, v in timed(fn, pairs).items()}
    out[f"{prefix}_places_per_couplet"] = round(fn.places / fn.couplets, 2)
    out[f"{prefix}_alternatives_asks_per_couplet"] = round(
        fn.calls / fn.couplets, 2
    )  # (one per line, a retry two)
    return out


def run(args: argparse.Namespace) -> dict[str, object]:
    if not has_model(default_model_dir()):
        return {"skipped": "no bundle in models/default"}
    quick = getattr(args, "quick", False)
    n_short, n_long = (51, 11) if quick else (401, 81)
    short, long = pairs_of(7, 2 * n_short), pairs_of(LONG, 2 * n_long)  # half for each way: no warm cache
    bundle = load_bundle(default_model_dir())
    out: dict[str, object] = {"couplets_7": n_short - 1, "couplets_100": n_long - 1}
    fn = check_of(bundle)
    out |= {f"check_7_{k}": v for k, v in timed(fn, short[:n_short]).items()}
    out |= {f"check_100_{k}": v for k, v in timed(fn, long[:n_long]).items()}
    api, close = api_of(default_model_dir())
    try:
        out |= {f"api_7_{k}": v for k, v in timed(api, short[n_short:]).items()}
        out |= {f"api_100_{k}": v for k, v in timed(api, long[n_long:]).items()}
    finally:
        close()
    n_sug_short, n_sug_long = (11, 4) if quick else (61, 13)
    for name, processes in (("api_suggest_7", 0), ("site_suggest_7", 2)):  # in the server; the site's workers
        api, close = api_of(default_model_dir(), suggest=True, processes=processes)
        try:  # the whole request with its suggestions, a fresh app each: the couplets `suggest` times below
            pairs = short[n_short : n_short + n_sug_short]
            out |= {f"{name}_{k}": v for k, v in timed(api, pairs).items()}
        finally:
            close()
    with served("bench-check-") as server, httpx.Client(base_url=server.url, timeout=30) as http:
        for name, suggesting, pairs in (
            ("http_7", False, short[n_short:]),
            ("http_suggest_7", True, short[n_short : n_short + n_sug_short]),
        ):
            out |= {f"{name}_{k}": v for k, v in timed(checking(http, suggesting), pairs).items()}
    out |= suggest_figures(short[n_short : n_short + n_sug_short], "suggest_7")  # the same couplets
    out |= suggest_figures(long[:n_sug_long], "suggest_100")
    out["load_average_at_start"] = round(os.getloadavg()[0], 2)
    return out
