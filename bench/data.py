"""Benchmark of the data stage (`make bench data`): seconds for the whole corpus, per stage.

Also measures the two choices the stage rests on, on a sample of the same corpus:
batch normalisation against OpenCC on every line, and the rule-based near-duplicate
search against MinHash LSH (datasketch), extrapolated to the full corpus.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from data.config import DataConfig
from data.normalize import Normalizer
from data.pipeline import run as run_stage
from data.sources import read_tsv


def sample_lines(config: DataConfig, n: int) -> list[str]:
    pairs = []
    for pair in read_tsv(config.corpus_dir / "wb14123_train.tsv.gz"):
        if pair is not None:
            pairs.append(pair)
        if len(pairs) >= n:
            break
    return [line for pair in pairs for line in pair]


def normalisation_figures(lines: list[str]) -> dict[str, float]:
    import opencc

    converter = opencc.OpenCC("t2s")
    start = time.perf_counter()
    for line in lines:
        converter.convert(line)
    per_line = time.perf_counter() - start
    start = time.perf_counter()
    Normalizer().normalize_many(lines)
    batch = time.perf_counter() - start
    return {
        "norm_sample_lines": len(lines),
        "opencc_every_line_s": round(per_line, 3),
        "batch_normalise_s": round(batch, 3),
        "normalise_speedup": round(per_line / batch, 1),
    }


def minhash_figures(lines: list[str], full_pairs: int) -> dict[str, float]:
    from datasketch import MinHash, MinHashLSH

    pairs = list(zip(lines[0::2], lines[1::2], strict=True))
    start = time.perf_counter()
    lsh = MinHashLSH(threshold=0.8, num_perm=64)
    for i, (upper, lower) in enumerate(pairs):
        text = upper + lower
        m = MinHash(num_perm=64)
        m.update_batch([text[k : k + 2].encode() for k in range(len(text) - 1)])
        lsh.query(m)
        lsh.insert(str(i), m)
    seconds = time.perf_counter() - start
    return {
        "minhash_sample_pairs": len(pairs),
        "minhash_s": round(seconds, 3),
        "minhash_full_corpus_s_extrapolated": round(seconds * full_pairs / len(pairs), 1),
    }


def run(args: argparse.Namespace) -> dict[str, object]:
    config = DataConfig()
    if not (config.corpus_dir / "wb14123_train.tsv.gz").is_file():
        return {"skipped": f"no corpus in {config.corpus_dir}"}
    if args.quick:  # the regulated verse only: about a fifth of the corpus
        keep = {"poetry_lvshi", "classical_duiyun", "wb14123_test"}
        config.sources = tuple(s for s in config.sources if s.name in keep)
        # these are the classical sources: a classical validation split would be most of a
        # tiny corpus, so the quick run carves none (its cost is one more pass of the split)
        config.classical_valid_size = 0
    with tempfile.TemporaryDirectory() as tmp:
        config.out_dir = Path(tmp)
        cpu = time.process_time()
        report = run_stage(config)
        cpu = time.process_time() - cpu
    pairs = sum(s.get("pairs_read", 0) for n, s in report["sources"].items() if n != "wb14123_test")
    figures: dict[str, object] = {
        "pairs_in": pairs,
        "pairs_train": report["split"]["train"],
        **{f"{stage}_s": s for stage, s in report["seconds"].items()},
        **{f"{stage}_cpu_s": s for stage, s in report["cpu_seconds"].items()},
        "cpu_s": round(cpu, 2),
        "pairs_per_s": round(pairs / report["seconds"]["total"]),
        "goal_total_s": 60,
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count() or 0,
    }
    lines = sample_lines(config, 20_000 if args.quick else 100_000)
    figures |= normalisation_figures(lines)
    figures |= minhash_figures(lines[: 2000 if args.quick else 20_000], full_pairs=930_000)
    return figures
