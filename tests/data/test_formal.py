"""The formal yardstick (data/formal.py): which yinglian_classic pairs are held out, and that
none of their lines reaches training."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

from data.config import DataConfig
from data.formal import carve_formal, han_only, han_rows, pair_key, read_pairs
from data.paths import data_dir
from data.pipeline import run
from data.sources import Pair
from data.text import is_han
from tests.data.conftest import made_up_pairs, write_tsv

# Formal pairs: the first two stand in wb14123_train (there with other punctuation, and the
# other way round); the rest stand nowhere else.
UNIQUE = [
    ("碧山人来，幽鸟相逐", "金尊酒满，奇花初胎"),
    ("智勇冠当代", "卓荦观群书"),
    ("一帘花影云拖地", "半夜书声月在天"),
    ("水流任急境常静", "花落虽频意自闲"),
    ("室雅何须大", "花香不在多"),
    ("海纳百川，有容乃大", "壁立千仞，无欲则刚"),
]


@pytest.fixture
def formal_corpus(corpus: Path) -> Path:
    train = made_up_pairs(40)
    shared = [("春风杨柳万千条", "六亿神州尽舜尧"), ("青山不墨千秋画", "绿水无弦万古琴")]
    # in wb14123_train: the first without its comma, the second reversed; and a training pair
    # that shares its upper line with a held-out formal pair (another lower line)
    wb = [*train, shared[0], (shared[1][1], shared[1][0]), ("室雅何须大", "德高自有名")]
    write_tsv(corpus / "wb14123_train.tsv.gz", wb, gz=True)
    formal = [("春风杨柳，万千条", "六亿神州，尽舜尧"), shared[1], *UNIQUE, UNIQUE[1]]  # last: a duplicate
    write_tsv(corpus / "yinglian_classic.tsv", formal)
    return corpus


def test_held_out_are_the_pairs_in_no_other_file(formal_corpus: Path) -> None:
    report = run(DataConfig(valid_size=4, classical_valid_size=3))
    out = data_dir()
    valid = [tuple(line.split("\t")) for line in (out / "valid_formal.tsv").read_text("utf-8").splitlines()]
    test = [tuple(line.split("\t")) for line in (out / "test_formal.tsv").read_text("utf-8").splitlines()]
    assert sorted(valid + test) == sorted(UNIQUE)  # once each, the shared ones left in training
    assert (
        valid and test and report["formal"]["valid"] == len(valid) and report["formal"]["test"] == len(test)
    )
    held = {han_only(line) for pair in valid + test for line in pair}
    train = [tuple(line.split("\t")) for line in (out / "train.tsv").read_text("utf-8").splitlines()]
    assert not {han_only(line) for pair in train for line in pair} & held
    assert ("室雅何须大", "德高自有名") not in train and report["formal"]["training_pairs_dropped"] >= 1
    # the formal pairs that are not held out train (the first as its near duplicate in wb14123)
    assert ("春风杨柳万千条", "六亿神州尽舜尧") in train and ("青山不墨千秋画", "绿水无弦万古琴") in train
    assert "valid_formal" in (out / "DATA_CARD.md").read_text("utf-8")


def rows_of(pairs: list[Pair]) -> set[str]:
    """What ``han_rows`` reads from a file of ``pairs``."""
    return {f"{han_only(upper)}\t{han_only(lower)}" for upper, lower in pairs}


def test_no_formal_file_no_formal_split(corpus: Path) -> None:
    report = run(DataConfig(valid_size=4, classical_valid_size=3))
    assert report["formal"]["present"] is False
    assert (data_dir() / "test_formal.tsv").read_text("utf-8") == ""


def test_split_does_not_depend_on_order() -> None:
    pairs = [(f"春{i:03d}山水", f"秋{i:03d}云雨") for i in range(200)]
    pairs = [(u.translate(str.maketrans("0123456789", "零一二三四五六七八九")), lo) for u, lo in pairs]
    pairs = [(u, lo.translate(str.maketrans("0123456789", "甲乙丙丁戊己庚辛壬癸"))) for u, lo in pairs]
    first = carve_formal(pairs, set())
    shuffled = pairs[:]
    random.Random(3).shuffle(shuffled)
    second = carve_formal(shuffled, set())
    assert set(first.test) == set(second.test) and set(first.valid) == set(second.valid)
    assert 70 <= len(first.test) <= 130  # about half, by a hash of the key
    # a pair in another file, either way round and with other punctuation, is not held out
    other = [(pairs[0][1], pairs[0][0].replace("山", "，山"))]
    assert (
        pairs[0] not in carve_formal(pairs, rows_of(other)).test + carve_formal(pairs, rows_of(other)).valid
    )


@pytest.mark.parametrize("name", ["other.tsv", "other.tsv.gz"])
def test_a_files_rows_read_at_once_are_its_pairs_rows(tmp_path: Path, name: str) -> None:
    rows = [
        "春风，入户\t瑞雪、迎门！",
        "山高水长\t海阔天空\r",  # a Windows line end
        "no tab here",
        "一\t二\t三",  # two tabs: not a pair
        "",
        "\t",  # two empty lines: a pair of empty keys, as read_pairs reads it
        "𫛛〇a1\t 秋 月 ",
        "last line without its newline\t末",
    ]
    path = tmp_path / name
    write = gzip.open if name.endswith(".gz") else open
    with write(path, "wt", encoding="utf-8", newline="") as fh:
        fh.write("\n".join(rows))
    pairs = read_pairs(path)
    assert len(pairs) == 5
    assert rows_of(pairs) == {row for row in han_rows(path) if row.count("\t") == 1}
    formal = [("瑞雪迎门", "春风入户"), ("春风得意马", "秋月生辉人")]  # the first stands in the file
    held = carve_formal(formal, han_rows(path))
    assert held.valid + held.test == [formal[1]]


def test_keys_ignore_punctuation_and_orientation() -> None:
    assert pair_key("春风，入户", "瑞雪、迎门！") == pair_key("瑞雪迎门", "春风入户")
    line = "春\u3007𫛛，a1！\u4dbf\u3400"
    assert han_only(line) == "".join(ch for ch in line if is_han(ch))


def test_registers_are_written_as_a_third_column(corpus: Path) -> None:
    write_tsv(corpus / "wb14123_collected.tsv.gz", made_up_pairs(5), gz=True)  # also wb14123 pairs
    registers = {"poetry_lvshi": "classical", "wb14123_collected": "formal"}
    report = run(DataConfig(valid_size=4, classical_valid_size=3, registers=registers))
    rows = [line.split("\t") for line in (data_dir() / "train.tsv").read_text("utf-8").splitlines()]
    by_pair = {(r[0], r[1]): (r[2] if len(r) == 3 else "general") for r in rows}
    assert {len(r) for r in rows} == {2, 3}
    lvshi = made_up_pairs(55)[40:55]
    assert {by_pair[p] for p in lvshi if p in by_pair} == {"classical"}
    # a wb14123 pair that the collected file also prints takes the higher register
    assert {by_pair[p] for p in made_up_pairs(5) if p in by_pair} == {"formal"}
    assert report["registers"]["formal"] == sum(v == "formal" for v in by_pair.values())
    with pytest.raises(ValueError, match="register"):
        DataConfig(registers={"poetry_lvshi": "poetic"}).validate()
