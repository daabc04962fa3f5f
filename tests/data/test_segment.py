"""The segmentation's dictionary read by first character gives jieba's own words."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from data.paths import corpus_dir
from data.segment import FirstCharDictionary, _new_tokenizer, jieba_words, write_dictionary

ROOT = Path(__file__).resolve().parents[2]
LINES = [
    "山下作画",
    "岁月经过",
    "春风得意马蹄疾",
    "腾飞上铁，锐意改革谋发展，勇当千里马",
    "年年岁岁花相似",
    "abc123春眠不觉晓",
    "一",
    "",
]


def test_a_dictionary_read_by_first_character_answers_as_the_whole_one(tmp_path: Path) -> None:
    words = {"春": 5, "春风": 3, "春风得": 0, "春风得意": 9, "马": 2, "abc": 1}
    write_dictionary(words, 20, tmp_path / "d.dict")
    d = FirstCharDictionary(tmp_path / "d.dict")
    assert d.total == 20
    for word, count in words.items():
        assert word in d and d[word] == count and d.get(word) == count
    for absent in ("春雨", "夏", "", "马蹄", "ab"):
        assert absent not in d and d.get(absent) is None and d.get(absent, 1) == 1
    with pytest.raises(KeyError):
        d["夏天"]


@pytest.mark.slow
def test_segmentation_is_jiebas_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUILIAN_CACHE_DIR", str(tmp_path))
    lines = list(LINES)
    test = corpus_dir() / "wb14123_test.tsv"
    if test.is_file():  # the corpus, when present: both lines of every test pair
        for row in test.read_text(encoding="utf-8").splitlines():
            lines.extend(row.split("\t")[:2])
    written = _new_tokenizer()  # writes the dictionary
    (cached,) = tmp_path.glob("jieba-*.dict")
    read = _new_tokenizer()  # reads it
    assert isinstance(read.FREQ, FirstCharDictionary)
    want = jieba_words(lines)
    assert [list(written.cut(line, HMM=False)) for line in lines] == want
    assert [list(read.cut(line, HMM=False)) for line in lines] == want
    cached.write_bytes(b"damaged")  # a damaged file is written again
    assert [list(_new_tokenizer().cut(line, HMM=False)) for line in LINES] == want[: len(LINES)]
    assert cached.read_bytes().startswith(b"DLJB1")


@pytest.mark.slow
def test_a_process_reads_only_the_parts_its_lines_need(tmp_path: Path) -> None:
    """A fresh process segments a line after reading a few parts of the dictionary, not all."""
    code = (
        "from data.segment import _tokenizer, boundaries\n"
        "boundaries('春风得意马蹄疾')\n"
        "d = _tokenizer().FREQ\n"
        "print(len(d._parts), len(d._index))\n"
    )
    env = {"DUILIAN_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for _ in range(2):  # the first run writes the dictionary, the second reads it
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, cwd=ROOT
        )
    parts, firsts = map(int, out.stdout.split())
    assert 0 < parts <= 7 < firsts
