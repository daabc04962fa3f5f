"""The whole stage on a tiny hand-written corpus: outputs, splits, leakage, staleness, CLI."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from data.__main__ import main
from data.config import DataConfig
from data.paths import data_dir
from data.pipeline import run
from data.vocab import Vocab


def read_pairs(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines()]  # type: ignore[misc]


def gz_pairs(path: Path) -> list[tuple[str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [tuple(line.rstrip("\n").split("\t")) for line in fh if line.strip()]  # type: ignore[misc]


@pytest.fixture
def built(corpus: Path) -> dict:
    return run(DataConfig(valid_size=4, classical_valid_size=3))


def test_outputs_and_test_set_as_given(corpus: Path, built: dict) -> None:
    out = data_dir()
    for name in ("train.tsv", "valid.tsv", "test_leakfree.tsv", "spm.model", "spm.vocab", "DATA_CARD.md"):
        assert (out / name).stat().st_size > 0
    assert (out / "test.tsv").read_bytes() == (corpus / "wb14123_test.tsv").read_bytes()
    assert json.loads((out / "report.json").read_text(encoding="utf-8"))["stamp"] == built["stamp"]


def test_leak_flags_and_leak_free_part(corpus: Path, built: dict) -> None:
    out = data_dir()
    flags = (out / "test_leak.txt").read_text().split()
    assert flags == ["1", "0", "0", "0", "0", "0"]
    test = (out / "test.tsv").read_text(encoding="utf-8").splitlines()
    assert (out / "test_leakfree.tsv").read_text(encoding="utf-8").splitlines() == test[1:]
    assert built["split"]["train_removed_test_upper"] == 1


def test_no_upper_line_in_two_splits(built: dict) -> None:
    out = data_dir()
    train, valid = read_pairs(out / "train.tsv"), read_pairs(out / "valid.tsv")
    test = read_pairs(out / "test.tsv")
    uppers = [{u for u, _ in split} for split in (train, valid, test)]
    assert not uppers[0] & uppers[1] and not uppers[0] & uppers[2] and not uppers[1] & uppers[2]
    assert 4 <= len(valid) <= 5
    assert all(len(u) == len(w) for u, w in train + valid)


def test_classical_validation_split(corpus: Path, built: dict) -> None:
    out = data_dir()
    classical = read_pairs(out / "valid_classical.tsv")
    sources = read_pairs(corpus / "classical_duiyun.tsv")
    sources += gz_pairs(corpus / "poetry_lvshi.tsv.gz")
    classical_uppers = {u.strip() for u, _ in sources}
    assert 3 <= len(classical) <= 4 and built["split"]["valid_classical"] == len(classical)
    assert {u for u, _ in classical} <= classical_uppers
    others = read_pairs(out / "train.tsv") + read_pairs(out / "valid.tsv") + read_pairs(out / "test.tsv")
    assert not {u for u, _ in classical} & {u for u, _ in others}


def test_repeat_weights_a_source_up(corpus: Path) -> None:
    once = run(DataConfig(valid_size=4, classical_valid_size=0))
    train_once = read_pairs(data_dir() / "train.tsv")
    twice = run(DataConfig(valid_size=4, classical_valid_size=0, repeat={"poetry_lvshi": 3}))
    train = read_pairs(data_dir() / "train.tsv")
    lvshi = set(gz_pairs(corpus / "poetry_lvshi.tsv.gz"))
    weighted = [pair for pair in set(train_once) if pair in lvshi]
    assert weighted and all(train.count(pair) == 3 for pair in weighted)
    assert all(train.count(pair) == 1 for pair in set(train_once) - set(weighted))
    assert twice["split"]["train"] == once["split"]["train"] + 2 * len(weighted)
    assert twice["split"]["train_distinct"] == once["split"]["train"]
    assert twice["vocab"]["size"] == once["vocab"]["size"]  # counted on distinct pairs


def test_vocab_from_reuses_a_vocabulary(corpus: Path, tmp_path: Path) -> None:
    assert main(["--valid-size", "4", "--sources", "wb14123_train,wb14123_test"]) == 0
    kept = tmp_path / "kept_spm.model"
    kept.write_bytes((data_dir() / "spm.model").read_bytes())
    assert main(["--valid-size", "4", "--vocab-from", str(kept)]) == 0
    assert (data_dir() / "spm.model").read_bytes() == kept.read_bytes()
    report = json.loads((data_dir() / "report.json").read_text(encoding="utf-8"))
    assert report["vocab"]["from"] == str(kept) and report["vocab"]["train_unknown_types"] > 0
    assert "reused from" in (data_dir() / "DATA_CARD.md").read_text(encoding="utf-8")


def test_normalised_filtered_and_deduplicated(built: dict) -> None:
    train = set(read_pairs(data_dir() / "train.tsv")) | set(read_pairs(data_dir() / "valid.tsv"))
    assert ("春风入户来", "瑞雪迎门到") in train
    assert ("春风，入户", "瑞雪，迎门") in train
    assert ("岁月经过", "山河依旧") in train
    assert not any("月经" in u and u != "岁月经过" for u, _ in train)
    f, d = built["filter"], built["dedup"]
    assert (f["unequal_length"], f["sensitive"], f["too_short"], d["exact"]) == (1, 1, 1, 1)
    assert built["normalise"]["changed_t2s"] == 2 and built["normalise"]["changed_punct"] == 2
    assert built["sensitive_sample_hits"] == {"月经": 1}


def test_every_source_read(built: dict) -> None:
    src = built["sources"]
    assert src["crawl"]["pairs_read"] == 3 and src["crawl"]["malformed"] == 1
    assert src["feedback"]["pairs_read"] == 2
    assert src["poetry_lvshi"]["pairs_read"] == 15
    total_kept = sum(s.get("pairs_kept_by_filters", 0) for s in src.values())
    assert total_kept == built["filter"]["kept"]
    assert (
        built["split"]["train"]
        + built["split"]["valid"]
        + built["split"]["valid_classical"]
        + built["split"]["train_removed_test_upper"]
        == (built["dedup"]["kept"])
    )


def test_vocabulary_covers_train_and_keeps_unknowns(built: dict) -> None:
    vocab = Vocab.from_file(data_dir() / "spm.model")
    train = read_pairs(data_dir() / "train.tsv")
    frequent = "春夏秋冬山水花鸟零一二"
    assert all(ch in vocab for ch in frequent)
    line = "春风喵喵"
    ids = vocab.encode(line)
    assert len(ids) == len(line) and ids[2] == vocab.unk_id
    assert built["vocab"]["size"] == len(vocab)
    assert train and 0 < built["vocab"]["test_char_coverage"] <= 1


def test_cli_skips_when_fresh_and_rebuilds_on_change(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--valid-size", "4"]) == 0
    assert main(["--valid-size", "4"]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main(["--valid-size", "5"]) == 0  # another configuration: rebuilt
    assert "up to date" not in capsys.readouterr().out
    source = corpus / "classical_duiyun.tsv"
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    assert main(["--valid-size", "5"]) == 0
    assert "up to date" not in capsys.readouterr().out
    assert main(["--valid-size", "5", "--force"]) == 0
    assert "up to date" not in capsys.readouterr().out


def test_cli_sources_can_be_chosen(corpus: Path) -> None:
    assert main(["--sources", "wb14123_train,wb14123_test", "--valid-size", "2"]) == 0
    report = json.loads((data_dir() / "report.json").read_text(encoding="utf-8"))
    assert set(report["sources"]) == {"wb14123_train", "wb14123_test"}


def test_cli_adds_a_wb14123_release_folder(corpus: Path, tmp_path: Path) -> None:
    release = tmp_path / "release" / "train"
    release.mkdir(parents=True)
    (release / "in.txt").write_text("晨 钟 暮 鼓\n", encoding="utf-8")
    (release / "out.txt").write_text("夏 雨 冬 雪\n", encoding="utf-8")
    assert main(["--add", f"release=wb14123:{release.parent}", "--valid-size", "2"]) == 0
    report = json.loads((data_dir() / "report.json").read_text(encoding="utf-8"))
    assert report["sources"]["release"]["pairs_read"] == 1
    pairs = read_pairs(data_dir() / "train.tsv") + read_pairs(data_dir() / "valid.tsv")
    assert ("晨钟暮鼓", "夏雨冬雪") in pairs


def test_without_a_test_source(corpus: Path) -> None:
    (corpus / "wb14123_test.tsv").unlink()
    assert main(["--valid-size", "2"]) == 0
    assert (data_dir() / "test.tsv").read_bytes() == b""
    assert (data_dir() / "test_leak.txt").read_bytes() == b""


def test_truncated_gzip_is_a_message(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = corpus / "poetry_lvshi.tsv.gz"
    path.write_bytes(path.read_bytes()[:-12])
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "data: error" in err and "poetry_lvshi.tsv.gz" in err  # the file is named


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sources", "wb14123_test"], "no training pairs"),
        (["--add", "x=xml:/tmp/x"], "NAME=KIND:PATH"),
        (["--sources", "nope"], "unknown source"),
        (["--corpus-dir", "/nonexistent/corpus"], "does not exist"),
        (["--valid-size", "-1"], "valid-size"),
        (["--add", "x=tsv:no_such_file.tsv"], "no file matches"),
        (["--repeat", "nope=2"], "unknown source 'nope'"),
        (["--repeat", "poetry_lvshi=0"], "whole number"),
        (["--repeat", "poetry_lvshi"], "whole number"),
        (["--classical-valid-size", "-1"], "classical-valid-size"),
        (["--vocab-from", "/nonexistent/spm.model"], "no such file"),
        (["--vocab-from", "pyproject.toml"], "not a sentencepiece model"),
        # every wb14123 pair would be a validation pair, none left to train on
        (["--sources", "wb14123_train,wb14123_test", "--valid-size", "100000"], "smaller --valid-size"),
    ],
)
def test_cli_bad_input_is_a_message(
    corpus: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_run_that_fails_leaves_its_outputs_stale(corpus: Path) -> None:
    assert main(["--valid-size", "2"]) == 0
    wb = ["--sources", "wb14123_train,wb14123_test"]
    assert main([*wb, "--valid-size", "100000"]) == 2  # fails after reading: the old outputs are not fresh
    assert not (data_dir() / "report.json").exists()
    assert main(["--valid-size", "2"]) == 0 and (data_dir() / "report.json").exists()  # rebuilt
