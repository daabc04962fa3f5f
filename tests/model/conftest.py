"""Fixtures for the model tests: 50 hand-written couplets and a vocabulary built from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from data.vocab import Vocab

FIXTURES = Path(__file__).parent / "fixtures"


def read_pairs(path: Path) -> list[tuple[str, str]]:
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(a, b) for a, b in rows]


@pytest.fixture(scope="session")
def pairs() -> list[tuple[str, str]]:
    return read_pairs(FIXTURES / "couplets50.tsv")


@pytest.fixture(scope="session")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    prefix = tmp_path_factory.mktemp("spm") / "spm"
    lines = [x for pair in pairs for x in pair]
    return Vocab.train(lines, prefix, vocab_size=0)
