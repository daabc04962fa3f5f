"""Fixtures for the model tests: 50 hand-written couplets and a vocabulary built from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from data.vocab import Vocab
from tests.model.decoding.fixtures import decode_vocab

FIXTURES = Path(__file__).parent / "fixtures"


def read_pairs(path: Path) -> list[tuple[str, str]]:
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(a, b) for a, b in rows]


@pytest.fixture(scope="session")
def pairs() -> list[tuple[str, str]]:
    return read_pairs(FIXTURES / "couplets50.tsv")


@pytest.fixture(scope="session")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    """The model tests' one vocabulary (tests/model/decoding/fixtures.py says why one)."""
    return decode_vocab(tmp_path_factory.mktemp("spm"), pairs)


@pytest.fixture(scope="session")
def data_folder(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]], vocab: Vocab) -> Path:
    """A data-stage folder made of the fixtures: train = valid = test (for memorisation tests)."""
    folder = tmp_path_factory.mktemp("data")
    text = "".join(f"{u}\t{lo}\n" for u, lo in pairs)
    for name in ("train.tsv", "valid.tsv", "test.tsv"):
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "test_leak.txt").write_text("".join("1\n" if i % 2 else "0\n" for i in range(len(pairs))))
    (folder / "spm.model").write_bytes(vocab.to_bytes())
    return folder
