"""The pairing table: position-wise association of upper and lower characters."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from data.pairing import FLOOR, MAX_SCORE, PSEUDO_COUNT, PairingTable

PAIRS = [("天高", "地厚")] * 30 + [("天长", "水远")] * 3 + [("山高", "水低")] * 20 + [("风来", "雨去")] * 12


def test_scores_follow_the_formula() -> None:
    table = PairingTable.count(PAIRS)
    # aligned positions: 65 pairs x 2; 天 faces 地 30 times, 水 3 times
    total = 2 * len(PAIRS)
    n_tian, n_di = 33, 30
    expected = n_tian * n_di / total
    want = min(MAX_SCORE, math.log((30 + PSEUDO_COUNT) / (expected + PSEUDO_COUNT)))
    assert table.get("天", "地") == pytest.approx(want, abs=2e-3)
    # 水 faces 天 (3) and 山 (20): 天 -> 水 is below chance, so it is not kept
    assert table.get("天", "水") == 0.0
    assert table.get("山", "水") > FLOOR
    assert table.get("天", "雨") == 0.0  # never together
    assert table.get("龙", "虎") == 0.0  # unknown characters
    assert table.get("风", "雨") > table.get("天", "厚")


def test_punctuation_identity_and_unequal_lengths_are_not_counted() -> None:
    table = PairingTable.count([("春，风", "秋，雨")] * 10 + [("月月", "月年")] * 10 + [("日", "星辰")] * 10)
    assert table.get("，", "，") == 0.0
    assert table.get("月", "月") == 0.0
    assert table.get("日", "星") == 0.0
    assert table.get("春", "秋") > 0 and table.get("月", "年") > 0


def test_rows_are_sorted_and_consistent() -> None:
    table = PairingTable.count(PAIRS)
    table.check()
    assert (np.diff(table.upper.astype(np.int64)) > 0).all()
    for i in range(len(table.upper)):
        row = table.lower[table.indptr[i] : table.indptr[i + 1]].astype(np.int64)
        assert (np.diff(row) > 0).all()
    assert (table.score.astype(np.float32) > FLOOR).all()


def test_save_and_load_round_trip(tmp_path) -> None:
    table = PairingTable.count(PAIRS)
    path = tmp_path / "pairing.npz"
    table.save(path)
    back = PairingTable.load(path)
    for name in ("upper", "indptr", "lower", "score"):
        assert np.array_equal(getattr(table, name), getattr(back, name))
    assert back.line_score("天高", "地厚") == pytest.approx(table.line_score("天高", "地厚"))


def test_a_broken_file_is_refused(tmp_path) -> None:
    path = tmp_path / "pairing.npz"
    path.write_bytes(b"not a table")
    with pytest.raises(ValueError, match="not a pairing table"):
        PairingTable.load(path)
    table = PairingTable.count(PAIRS)
    short: dict[str, Any] = {"upper": table.upper, "indptr": table.indptr[:-1]}
    short |= {"lower": table.lower, "score": table.score}
    np.savez_compressed(path, format=np.array(1), **short)
    with pytest.raises(ValueError, match="shapes"):
        PairingTable.load(path)


def test_for_vocab_maps_characters_to_token_ids() -> None:
    table = PairingTable.count(PAIRS)
    pieces = ["<pad>", "<s>", "</s>", "<unk>", "地", "天", "山", "水", "风", "雨"]
    indptr, cols, vals = table.for_vocab(pieces)
    assert indptr.shape == (len(pieces) + 1,)
    row = dict(zip(cols[indptr[5] : indptr[6]].tolist(), vals[indptr[5] : indptr[6]].tolist(), strict=True))
    assert row == {4: pytest.approx(table.get("天", "地"))}  # 厚 is not in the vocabulary
    assert indptr[1] == indptr[0]  # special tokens have no row
    assert cols[indptr[8] : indptr[9]].tolist() == [9]
