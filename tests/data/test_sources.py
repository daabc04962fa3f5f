"""Readers of every source kind, on hand-written files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from data.sources import Source, read_source, source_present


def test_tsv_plain_and_gz_with_a_malformed_line(tmp_path: Path) -> None:
    text = "春风入户\t瑞雪迎门\n没有制表符\n花开\t竹报\t多余\n山高\t水长\n"
    (tmp_path / "a.tsv").write_text(text, encoding="utf-8")
    with gzip.open(tmp_path / "a.tsv.gz", "wt", encoding="utf-8") as fh:
        fh.write(text)
    want = [("春风入户", "瑞雪迎门"), None, None, ("山高", "水长")]
    for name in ("a.tsv", "a.tsv.gz"):
        assert list(read_source(Source("x", "tsv", name), tmp_path / name)) == want


def test_tsv_fast_path_keeps_crlf_and_empty_fields_right(tmp_path: Path) -> None:
    (tmp_path / "b.tsv").write_bytes("春风\t瑞雪\r\n山高\t\r\n".encode())
    assert list(read_source(Source("x", "tsv", "b.tsv"), tmp_path / "b.tsv")) == [
        ("春风", "瑞雪"),
        ("山高", ""),
    ]


def test_jsonl_needs_upper_and_lower(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(
        '{"upper": "春风", "lower": "瑞雪", "url": "u", "spider": "s", "fetched_at": "t"}\n'
        '{"upper": "春风"}\n'
        "[1, 2]\n"
        "{broken\n",
        encoding="utf-8",
    )
    assert list(read_source(Source("c", "jsonl", "c.jsonl"), path)) == [("春风", "瑞雪"), None, None, None]


def test_jsonl_values_never_hold_a_tab_or_newline(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"upper": "春\\n风", "lower": "瑞\\t雪"}\n', encoding="utf-8")
    assert list(read_source(Source("d", "jsonl", "d.jsonl"), path)) == [("春 风", "瑞 雪")]


def test_wb14123_release_layout(tmp_path: Path) -> None:
    for split in ("train", "test"):
        (tmp_path / split).mkdir()
        (tmp_path / split / "in.txt").write_text("春 风 入 户\n花 开\n", encoding="utf-8")
        (tmp_path / split / "out.txt").write_text("瑞 雪 迎 门\n竹 报\n", encoding="utf-8")
    source = Source("wb", "wb14123", ".", split="test")
    assert source_present(source, tmp_path)
    assert list(read_source(source, tmp_path)) == [("春风入户", "瑞雪迎门"), ("花开", "竹报")]
    assert not source_present(Source("wb", "wb14123", ".", split="valid"), tmp_path)


def test_glob_and_absent_files(tmp_path: Path) -> None:
    (tmp_path / "one.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "two.jsonl").write_text("", encoding="utf-8")
    assert [p.name for p in Source("c", "jsonl", "*.jsonl").files(tmp_path)] == ["one.jsonl", "two.jsonl"]
    assert Source("f", "feedback", str(tmp_path / "feedback" / "*.tsv")).files(tmp_path) == []


def test_unknown_kind(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown source kind"):
        read_source(Source("z", "xml", "z.xml"), tmp_path / "z.xml")
