"""Fixtures: the mirror's pairs (hand-written, or a corpus sample when the corpus is
there) and a real redis-server on a free loopback port."""

from __future__ import annotations

import pytest

from crawler.mirror.pairs import HAND_PAIRS, Pair, corpus_pairs
from data.paths import corpus_dir


@pytest.fixture(scope="session")
def mirror_pairs() -> list[Pair]:
    """120 corpus pairs sampled at test time, or the hand-written ones."""
    test_file = corpus_dir() / "wb14123_test.tsv"
    return corpus_pairs(120, seed=7, path=test_file) or list(HAND_PAIRS)
