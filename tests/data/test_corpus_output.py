"""Tests of the data itself, on the real corpus output (skipped without the corpora).

Uses work/data when it is up to date with the corpus and code; otherwise builds the
stage into a temporary folder (about a minute on two cores).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from data.chars import CharBatch
from data.config import DataConfig
from data.freshness import is_fresh
from data.inputs import load_sensitive
from data.normalize import Normalizer
from data.pipeline import run
from data.vocab import Vocab

pytestmark = pytest.mark.corpus

NEEDED = ("wb14123_train.tsv.gz", "wb14123_test.tsv", "poetry_lvshi.tsv.gz", "classical_duiyun.tsv")


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = DataConfig()
    if not all((config.corpus_dir / name).is_file() for name in NEEDED):
        pytest.skip(f"corpora not in {config.corpus_dir}")
    if not is_fresh(config):
        config.out_dir = tmp_path_factory.mktemp("data")
        run(config)
    return config.out_dir


def pairs(path: Path) -> list[tuple[str, str]]:
    lines = path.read_text(encoding="utf-8").removesuffix("\n").split("\n")
    return [tuple(line.split("\t")) for line in lines]  # type: ignore[misc]


def test_test_set_exactly_as_given(out: Path) -> None:
    given = DataConfig().corpus_dir / "wb14123_test.tsv"
    assert (out / "test.tsv").read_bytes() == given.read_bytes()
    flags = (out / "test_leak.txt").read_text().split()
    assert len(flags) == 4000 and set(flags) <= {"0", "1"}
    test = (out / "test.tsv").read_text(encoding="utf-8").splitlines()
    leak_free = (out / "test_leakfree.tsv").read_text(encoding="utf-8").splitlines()
    assert leak_free == [t for t, f in zip(test, flags, strict=True) if f == "0"]
    # The corpus README measures 1,318 leaked upper lines before normalisation.
    assert 1300 <= flags.count("1") <= 1400


def test_splits_well_formed(out: Path) -> None:
    for name in ("train.tsv", "valid.tsv"):
        for upper, lower in pairs(out / name):
            assert 2 <= len(upper) == len(lower) <= 32, (name, upper, lower)
    assert 4900 <= len(pairs(out / "valid.tsv")) <= 5100
    assert len(pairs(out / "train.tsv")) > 800_000


def test_no_upper_line_in_two_splits(out: Path) -> None:
    train = {u for u, _ in pairs(out / "train.tsv")}
    valid = {u for u, _ in pairs(out / "valid.tsv")}
    test = set(Normalizer().normalize_many([u for u, _ in pairs(out / "test.tsv")]))
    assert not train & valid
    assert not train & test
    assert not valid & test


def test_vocabulary_covers_the_test_set(out: Path) -> None:
    vocab = Vocab.from_file(out / "spm.model")
    text = "".join(u + w for u, w in pairs(out / "test.tsv"))
    known = sum(ch in vocab for ch in text)
    assert known / len(text) >= 0.995
    assert 5000 <= len(vocab) <= 12000
    # Every character keeps its place: unknown ones become unk, never dropped.
    assert all(len(vocab.encode(u)) == len(u) for u, _ in pairs(out / "test.tsv"))


def test_no_sensitive_word_left_in_training(out: Path) -> None:
    sensitive = load_sensitive(DataConfig())
    assert sensitive is not None
    lines = [f"{u}\t{w}" for u, w in pairs(out / "train.tsv")]
    flagged = sensitive.flag_lines(CharBatch(lines)).tolist()
    assert [lines[i] for i in flagged if sensitive.hits(lines[i])] == []
