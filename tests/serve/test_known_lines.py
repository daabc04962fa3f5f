"""The known lower lines index: lookups by upper line in plain and gzip files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from serve.known_lines import KnownLines

TSV = "春风得意\t秋月生辉\n山高水长\t海阔天空\n春风得意\t夏雨催诗\n春风得意\t秋月生辉\n没有下联\n春风\t秋月\n"


@pytest.mark.parametrize("gz", [False, True])
def test_lookup(tmp_path: Path, gz: bool) -> None:
    path = tmp_path / ("train.tsv.gz" if gz else "train.tsv")
    data = TSV.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    index = KnownLines.from_file(path)
    assert len(index) == 5  # the line without a tab is no pair
    assert index.lowers("春风得意") == ["秋月生辉", "夏雨催诗"]  # distinct, in file order
    assert index.lowers("春风得意", limit=1) == ["秋月生辉"]
    assert index.lowers("春风") == ["秋月"]  # a prefix of another upper line is its own key
    assert index.lowers("山高水长") == ["海阔天空"] and index.lowers("东西南北") == []


def test_an_upper_line_is_found_by_its_characters_whatever_its_punctuation(tmp_path: Path) -> None:
    path = tmp_path / "train.tsv"
    path.write_text("东风引紫气，一元复始\t大地发春华，万物更新\n春风得意\t秋月生辉\n", encoding="utf-8")
    index = KnownLines.from_file(path)
    assert index.lowers("东风引紫气一元复始") == ["大地发春华，万物更新"]  # its own marks kept
    assert index.lowers("东风引紫气、一元复始。") == ["大地发春华，万物更新"]
    assert index.lowers("春风，得意！") == ["秋月生辉"] and index.lowers("东风引紫气") == []
