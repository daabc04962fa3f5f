"""The data stage: read → normalise → filter → dedup → split → vocabulary → report.

Everything runs in one process on lists of short strings. Every per-character scan runs
in numpy over a whole source at once (data/chars.py) and the rest iterates in C (dict,
set, map, itertools), so Python code touches only the few lines a scan flags: that is
what keeps the whole corpus (~930K pairs) well under the 60 s budget on two cores.

The steps' parts: data/inputs.py (sources read, test lines, the formal split), data/splits.py,
data/char_vocab.py, data/data_card.py, data/outputs.py; data/freshness.py says when the
outputs are fresh.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from operator import itemgetter

from data.banners import BANNERS_FILE, build_banners
from data.char_vocab import build_vocab, coverage
from data.config import DataConfig
from data.data_card import data_card
from data.dedup import Deduper
from data.filters import PairFilter
from data.freshness import stamp
from data.inputs import formal_split, load_sensitive, normalise, read_test, read_train_sources
from data.normalize import STEPS, Normalizer
from data.outputs import write_lines, write_pairs
from data.sources import Pair
from data.splits import TestSet, filter_sources, split_and_write, split_test

SAMPLE_HITS = 30


class Timer:
    """Wall-clock and CPU seconds per named stage, for the report (the machine is shared:
    CPU seconds show the work, wall seconds what a user waits)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start, cpu = time.perf_counter(), time.process_time()
        yield
        self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - start, 3)
        self.cpu_seconds[name] = round(self.cpu_seconds.get(name, 0.0) + time.process_time() - cpu, 3)


@contextmanager
def no_gc() -> Iterator[None]:
    """The stage builds millions of tuples and no cycles; the cyclic collector would rescan
    them again and again as they pile up (measured: ~10% of the stage's CPU), so it waits."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def run(config: DataConfig) -> dict:
    """Build every output into ``config.out_dir`` and return the report."""
    with no_gc():
        return _run(config)


def _run(config: DataConfig) -> dict:
    timer = Timer()
    report: dict = {"stamp": stamp(config), "config": config.as_dict(), "sources": {}}
    config.out_dir.mkdir(parents=True, exist_ok=True)
    # The report marks the outputs complete: gone until this run has written them all, so a
    # run that fails half-way leaves them stale, never mixed outputs passing for fresh ones.
    (config.out_dir / "report.json").unlink(missing_ok=True)
    sources, test = _read_and_normalise(config, report, timer)
    with timer("formal"):
        formal = formal_split(config, report)
        before = sum(len(pairs) for _, pairs in sources)
        sources = [(name, formal.drop_held(pairs)) for name, pairs in sources]
        report["formal"]["training_pairs_dropped"] = before - sum(len(pairs) for _, pairs in sources)
        write_pairs(config.out_dir / "valid_formal.tsv", formal.valid)
        write_pairs(config.out_dir / "test_formal.tsv", formal.test)
    with timer("filter"):
        pf = PairFilter(config.min_len, config.max_len, load_sensitive(config))
        kept = filter_sources(sources, config, pf, report)
    report["filter"] = {reason: pf.counts.get(reason, 0) for reason in PairFilter.reasons()}
    report["filter"]["kept"] = len(kept.pairs)
    report["sensitive_sample_hits"] = dict(pf.sensitive_hits.most_common(SAMPLE_HITS))
    report["sensitive_examples"] = pf.sensitive_examples
    with timer("dedup"):
        dedup = Deduper(config.max_lowers_per_upper, config.near_dup)
        kept.pairs = dedup(kept.pairs)
    report["dedup"] = {k: dedup.counts.get(k, 0) for k in Deduper.reasons()} | {"kept": len(kept.pairs)}
    report["dedup_examples"] = dict(dedup.examples)
    with timer("split"):
        train = split_and_write(kept, test, config, report)
    with timer("banners"):  # 横批: phrases and character vectors from the vetted training pairs
        banners = build_banners(train, pf.sensitive).save(config.out_dir / BANNERS_FILE)
    report["banners"] = {"file": banners.name, "bytes": banners.stat().st_size}
    with timer("vocab"):
        vocab = build_vocab(train, config, report)
        # as the model meets them: normalised like every input (a served upper line too)
        sides = [side for line in test.lines for side in line.split("\t")]
        report["vocab"] |= coverage(vocab, Normalizer(t2s=config.t2s).normalize_many(sides))
    report["seconds"] = timer.seconds | {"total": round(sum(timer.seconds.values()), 3)}
    report["cpu_seconds"] = timer.cpu_seconds | {"total": round(sum(timer.cpu_seconds.values()), 3)}
    write_lines(config.out_dir / "DATA_CARD.md", [data_card(report)])
    # Last: its stamp is what marks the outputs complete and fresh.
    write_lines(config.out_dir / "report.json", [json.dumps(report, ensure_ascii=False, indent=1)])
    return report


def _read_and_normalise(
    config: DataConfig, report: dict, timer: Timer
) -> tuple[list[tuple[str, list[Pair]]], TestSet]:
    with timer("read"):
        sources = read_train_sources(config, report)
        test_lines, test_file = read_test(config, report)
    if not sources:
        where = f"{config.corpus_dir} (check DUILIAN_CORPUS_DIR, --sources)"
        raise ValueError(f"no training pairs found in {where}")
    norm = Normalizer(t2s=config.t2s)
    with timer("normalise"):
        sources = [(name, normalise(pairs, norm)) for name, pairs in sources]
        # Leakage is judged against every training-source upper line, before any filter.
        train_uppers = set().union(*(map(itemgetter(0), ps) for _, ps in sources))
        leak, test_uppers = split_test(test_lines, norm, train_uppers)
    report["normalise"] = {
        "lines": 2 * sum(len(ps) for _, ps in sources),
        **{f"changed_{k}": norm.counts.get(k, 0) for k in STEPS},
    }
    return sources, TestSet(test_lines, test_file, leak, test_uppers)
