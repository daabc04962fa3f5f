"""Each normalisation step on hand-written lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from data.normalize import Normalizer, variant_table


def test_whitespace_removed_and_counted() -> None:
    norm = Normalizer()
    assert norm(" 春 风\u3000入户\t") == "春风入户"
    assert norm.counts["whitespace"] == 1


def test_ascii_punctuation_becomes_full_width() -> None:
    norm = Normalizer()
    assert norm("春风,入户!") == "春风，入户！"
    assert norm("花开?鸟语;") == "花开？鸟语；"
    # The corpus writes the dash as two hyphens: one em dash each, so lengths stay.
    assert norm("春来--花开") == "春来——花开"


def test_compatibility_forms_folded_but_chinese_punctuation_kept() -> None:
    norm = Normalizer()
    # Full-width Latin and digits fold (NFKC); full-width Chinese marks stay as they are.
    assert norm("ＡＢ１２") == "AB12"
    assert norm("春风，入户。") == "春风，入户。"
    assert norm.counts["compat"] == 1
    # Half-width ideographic marks and compatibility ideographs fold too.
    assert norm("春｡") == "春。"
    assert Normalizer(t2s=False)("\uf900") == "豈"
    assert norm("\uf900") == "岂"  # then simplified


def test_traditional_to_simplified_with_phrase_context() -> None:
    norm = Normalizer()
    assert norm("後來龍飛") == "后来龙飞"
    # 乾坤 keeps 乾 (phrase), while 乾燥 becomes 干燥: OpenCC sees the whole line.
    assert norm("乾坤") == "乾坤"
    assert norm("乾燥") == "干燥"
    assert norm.counts["t2s"] == 2


def test_t2s_can_be_switched_off() -> None:
    assert Normalizer(t2s=False)("後來") == "後來"
    assert Normalizer(t2s=False)("疎影") == "疎影"  # the variants go with it


def test_variant_forms_that_opencc_keeps_become_standard() -> None:
    norm = Normalizer()
    # 疎 and 隠 are left by OpenCC's t2s; 鴈 and 髪 too (data/variants.txt)
    assert norm("疎影横斜") == "疏影横斜"
    assert norm("隠隠青山") == "隐隐青山"
    assert norm("鴈字回时") == "雁字回时" and norm("白髪三千") == "白发三千"
    assert norm("後來鴈") == "后来雁"  # after OpenCC, in one line
    assert norm.counts["variants"] == 5 and norm.counts["t2s"] == 1
    assert Normalizer(variants=False)("疎影") == "疎影"


def test_variant_table_is_well_formed(tmp_path: Path) -> None:
    table = variant_table()
    assert len(table) > 50 and all(len(v) == 1 and chr(k) != v for k, v in table.items())
    assert not set(table.values()) & {chr(k) for k in table}  # no standard form is itself a variant
    bad = tmp_path / "v.txt"
    bad.write_text("# a comment\n疎疏\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"v\.txt:2"):
        variant_table(bad)


def test_clean_line_is_untouched_and_uncounted() -> None:
    norm = Normalizer()
    assert norm("春风入户") == "春风入户"
    assert sum(norm.counts.values()) == 0


def test_batch_equals_line_by_line() -> None:
    lines = ["春风入户", " 後來,", "ＡＢ", "瑞雪迎门", "", "乾坤 清", "花开!", "疎影", "後來鴈"]
    one, many = Normalizer(), Normalizer()
    assert many.normalize_many(lines) == [one(x) for x in lines]
    assert many.counts == one.counts
