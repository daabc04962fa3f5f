"""The data benchmark runs on a tiny corpus and returns flat figures (no timing asserted)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import cast

import pytest

from bench.data import run


def test_bench_data_quick_on_a_tiny_corpus(corpus: Path) -> None:
    figures = run(argparse.Namespace(quick=True))
    assert figures["pairs_in"] == 15 + 6  # the quick run reads the verse and primer files only
    assert cast(int, figures["pairs_train"]) > 0
    assert all(isinstance(v, int | float) for v in figures.values())
    assert {"total_s", "total_cpu_s", "minhash_full_corpus_s_extrapolated"} <= set(figures)


def test_bench_data_without_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUILIAN_CORPUS_DIR", str(tmp_path))
    assert "skipped" in run(argparse.Namespace(quick=True))
