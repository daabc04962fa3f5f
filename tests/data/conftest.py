"""A tiny hand-written corpus in the shared layout (no line of the real corpora)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

HEADS, TAILS = "春夏秋冬东南西北", "山水花鸟风云雨雪"  # the upper lines' alphabets
LOW_HEADS, LOW_TAILS = "江河湖海日星辰露", "青红紫白金银铜铁"  # the lower lines': no reuse


def made_up_pairs(n: int, offset: int = 0) -> list[tuple[str, str]]:
    """Distinct, well-formed five-character pairs built from small alphabets: the lower line
    shares no character with its upper line, and its repeats mirror the upper line's."""
    pairs = []
    for k in range(offset, offset + n):
        a, b = HEADS[k % 8], TAILS[(k // 8) % 8]
        c, d = LOW_TAILS[k % 8], LOW_HEADS[(k // 8) % 8]
        pairs.append((f"{a}{b}{k:03d}", f"{c}{d}{k:03d}"))
    # Digits are foreign characters: map them to Han numerals (another set in the lower line,
    # the same pattern) so the pairs are valid.
    upper_digits = str.maketrans("0123456789", "零一二三四五六七八九")
    lower_digits = str.maketrans("0123456789", "甲乙丙丁戊己庚辛壬癸")
    return [(u.translate(upper_digits), w.translate(lower_digits)) for u, w in pairs]


def write_tsv(path: Path, pairs: list[tuple[str, str]], gz: bool = False) -> None:
    text = "".join(f"{u}\t{w}\n" for u, w in pairs)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A corpus folder with every default source; work and data folders point into tmp."""
    root = tmp_path / "corpus"
    root.mkdir()
    train = made_up_pairs(60)
    extra = [
        ("春风入户來", "瑞雪迎門到"),  # traditional: becomes simplified
        ("春风入户来", "瑞雪迎门到"),  # then an exact duplicate of the line above
        ("春风,入户", "瑞雪,迎门"),  # ASCII commas: become full-width
        ("春风入户", "瑞雪迎门来"),  # unequal length
        ("月经来了", "瑞雪迎门"),  # sensitive
        ("岁月经过", "山河依旧"),  # innocent: allow-listed
    ]
    write_tsv(root / "wb14123_train.tsv.gz", train[:40] + extra, gz=True)
    write_tsv(root / "poetry_lvshi.tsv.gz", train[40:55], gz=True)
    write_tsv(root / "classical_duiyun.tsv", [*train[55:], ("云", "雨")])
    test = [train[3], *made_up_pairs(5, offset=200)]  # the first shares an upper line with train
    write_tsv(root / "wb14123_test.tsv", test)
    (root / "badwords.txt").write_text("月经\n坏蛋\n", encoding="utf-8")
    work = tmp_path / "work"
    (work / "crawl").mkdir(parents=True)
    (work / "feedback").mkdir()
    crawl = made_up_pairs(3, offset=300)
    (work / "crawl" / "site.jsonl").write_text(
        "".join(
            f'{{"upper": "{u}", "lower": "{w}", "url": "http://example.org/{i}", '
            f'"spider": "example", "fetched_at": "2026-01-01T00:00:00Z"}}\n'
            for i, (u, w) in enumerate(crawl)
        )
        + "not json\n",
        encoding="utf-8",
    )
    write_tsv(work / "feedback" / "accepted.tsv", made_up_pairs(2, offset=400))
    monkeypatch.setenv("DUILIAN_CORPUS_DIR", str(root))
    monkeypatch.setenv("DUILIAN_WORK_DIR", str(work))
    monkeypatch.setenv("DUILIAN_DATA_DIR", str(tmp_path / "data"))
    return root
