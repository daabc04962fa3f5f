"""The splits: what the filters kept per source, the validation splits drawn as whole upper
lines, test leakage, and the train, valid and test files written.
"""

from __future__ import annotations

import itertools
import operator
import random
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path

import numpy as np

from data.config import DataConfig
from data.filters import PairFilter
from data.normalize import Normalizer
from data.outputs import copy_file, write_lines, write_pairs
from data.sources import Pair
from data.text import REGISTERS


def split_by_upper(pairs: list[Pair], uppers: set[str]) -> tuple[list[Pair], list[Pair]]:
    """(pairs whose upper line is in ``uppers``, the others), order kept; iterated in C."""
    inside = list(map(uppers.__contains__, map(itemgetter(0), pairs)))
    return list(itertools.compress(pairs, inside)), list(
        itertools.compress(pairs, map(operator.not_, inside))
    )


def carve_valid(
    pairs: list[Pair], candidates: set[str], size: int, seed: int
) -> tuple[list[Pair], list[Pair], set[str]]:
    """(valid, rest, valid uppers): whole upper lines drawn at random from ``candidates``."""
    # Ordered by first appearance (not set order, which changes with the hash seed).
    pool = list(filter(candidates.__contains__, dict.fromkeys(map(itemgetter(0), pairs))))
    drawn = random.Random(seed).sample(pool, k=min(len(pool), size))
    sample, rest = split_by_upper(pairs, set(drawn))
    per_upper = Counter(map(itemgetter(0), sample))
    chosen: set[str] = set()
    total = 0
    for upper in drawn:
        if total >= size:
            break
        chosen.add(upper)
        total += per_upper[upper]
    valid, back = split_by_upper(sample, chosen)
    return valid, rest + back, chosen


@dataclass
class Kept:
    """What the filters kept: the pairs of every source in order, the upper lines each
    validation split may draw from, and how often a pair of a weighted source is written."""

    pairs: list[Pair]
    candidates: set[str]
    classical_candidates: set[str]
    repeat: dict[Pair, int]
    register: dict[Pair, int] = field(default_factory=dict)  # index in REGISTERS, when not general


def filter_sources(
    sources: list[tuple[str, list[Pair]]], config: DataConfig, pf: PairFilter, report: dict
) -> Kept:
    kept = Kept([], set(), set(), {})
    for name, pairs in sources:
        before = len(kept.pairs)
        kept.pairs.extend(pf.keep_batch(pairs))
        report["sources"][name]["pairs_kept_by_filters"] = len(kept.pairs) - before
        if name in config.valid_sources:
            kept.candidates.update(map(itemgetter(0), kept.pairs[before:]))
        if name in config.classical_sources:
            kept.classical_candidates.update(map(itemgetter(0), kept.pairs[before:]))
        if config.repeat.get(name, 1) > 1:
            times = config.repeat[name]
            kept.repeat.update((pair, max(times, kept.repeat.get(pair, 1))) for pair in kept.pairs[before:])
        if config.registers.get(name, "general") != "general":
            level = REGISTERS.index(config.registers[name])
            kept.register.update(
                (pair, max(level, kept.register.get(pair, 0))) for pair in kept.pairs[before:]
            )
    return kept


def repeated(train: list[Pair], repeat: dict[Pair, int]) -> list[Pair]:
    """``train`` with each pair of a weighted source written as often as its weight says."""
    if not repeat:
        return train
    return [pair for pair in train for _ in range(repeat.get(pair, 1))]


def split_test(test_lines: list[str], norm: Normalizer, train_uppers: set[str]) -> tuple[list[int], set[str]]:
    """Leak flags per test line (its upper line is a training upper line) and the test uppers."""
    uppers = norm.normalize_many([line.split("\t", 1)[0] for line in test_lines])
    return [int(u in train_uppers) for u in uppers], set(uppers)


def shuffled(pairs: list[Pair], seed: int) -> list[Pair]:
    """A seeded permutation, so training order mixes the sources."""
    order = np.random.default_rng(seed).permutation(len(pairs))
    return list(map(pairs.__getitem__, order.tolist()))


@dataclass
class TestSet:
    """The test lines as given, their file, and per line whether its upper line leaked."""

    lines: list[str]
    file: Path | None
    leak: list[int]
    uppers: set[str]


def split_and_write(kept: Kept, test: TestSet, config: DataConfig, report: dict) -> list[Pair]:
    """Write train, both validation splits and the test files; return the training pairs
    (each once: the weighted copies are only in train.tsv)."""
    removed, train = split_by_upper(kept.pairs, test.uppers)
    valid, train, valid_uppers = carve_valid(train, kept.candidates, config.valid_size, config.seed)
    classical, train, classical_uppers = carve_valid(
        train, kept.classical_candidates - valid_uppers, config.classical_valid_size, config.seed
    )
    if not train:
        raise ValueError(
            f"{len(valid) + len(classical)} pairs left after filtering, all taken by the validation "
            f"splits (valid_size {config.valid_size}, classical_valid_size {config.classical_valid_size}): "
            "too few to train on; pass a smaller --valid-size or --classical-valid-size"
        )
    written = shuffled(repeated(train, kept.repeat), config.seed)
    out = config.out_dir
    if kept.register:  # a third column where the register is not general
        regs = kept.register
        write_lines(
            out / "train.tsv",
            [
                f"{u}\t{lo}\t{REGISTERS[regs[(u, lo)]]}" if (u, lo) in regs else f"{u}\t{lo}"
                for u, lo in written
            ],
        )
        report["registers"] = dict(Counter(REGISTERS[regs.get(pair, 0)] for pair in written))
    else:
        write_pairs(out / "train.tsv", written)
    write_pairs(out / "valid.tsv", valid)
    write_pairs(out / "valid_classical.tsv", classical)
    if test.file is not None:
        copy_file(test.file, out / "test.tsv")
    else:
        write_lines(out / "test.tsv", test.lines)
    write_lines(out / "test_leakfree.tsv", [t for t, f in zip(test.lines, test.leak, strict=True) if not f])
    write_lines(out / "test_leak.txt", [str(f) for f in test.leak])
    report["split"] = {
        "train": len(written),
        "train_distinct": len(train),
        "valid": len(valid),
        "valid_uppers": len(valid_uppers),
        "valid_classical": len(classical),
        "valid_classical_uppers": len(classical_uppers),
        "test": len(test.lines),
        "test_leak": sum(test.leak),
        "test_leakfree": len(test.lines) - sum(test.leak),
        "train_removed_test_upper": len(removed),
    }
    return train
