"""The sensitive-word filter: hits, the allow-list, the hashed form, the batch pre-scan."""

from __future__ import annotations

import numpy as np

from data.chars import CharBatch
from data.sensitive import ALLOW_LIST, SensitiveFilter, hash_words, read_words, word_hash

WORDS = ["月经", "坏蛋", "恶", "大坏人"]


def test_hits_and_allow_list() -> None:
    f = SensitiveFilter(WORDS, allow=["岁月经过"])
    assert f.hits("岁月经过春风里") == []
    assert f.is_clean("岁月经过春风里")
    assert f.hits("月经来了") == ["月经"]
    # The allow-word excuses only the occurrence it covers.
    assert f.hits("岁月经过月经") == ["月经"]
    assert f.hits("大坏人") == ["大坏人"]
    assert f.hits("恶人坏蛋") == ["恶", "坏蛋"]


def test_allow_entry_equal_to_a_word_switches_it_off() -> None:
    f = SensitiveFilter(WORDS, allow=["恶"])
    assert f.is_clean("恶人")
    assert len(f) == len(WORDS) - 1


def test_committed_allow_list_keeps_the_classic_false_positive() -> None:
    allow = read_words(ALLOW_LIST)
    assert "岁月经过" in allow
    f = SensitiveFilter(["月经"], allow=allow)
    assert f.is_clean("岁月经过千山远")
    assert not f.is_clean("月经")


def test_hashes_are_stable_uint64() -> None:
    hashes = hash_words(["月经", "坏蛋", "月经"])
    assert hashes.dtype == np.uint64
    assert len(hashes) == 2
    assert list(hashes) == sorted(hashes)
    # blake2b with an 8-byte digest, little-endian: stable across runs and machines.
    assert word_hash("月经") == int.from_bytes(
        __import__("hashlib").blake2b("月经".encode(), digest_size=8).digest(), "little"
    )


def test_from_hashes_gives_the_same_hits() -> None:
    plain = SensitiveFilter(WORDS, allow=["岁月经过"])
    hashed = SensitiveFilter.from_hashes(hash_words(WORDS), allow=["岁月经过"])
    for text in ["岁月经过春风里", "月经来了", "岁月经过月经", "恶人坏蛋", "大坏人", "春风"]:
        assert hashed.hits(text) == plain.hits(text), text


def test_flag_lines_is_a_superset_of_lines_with_hits() -> None:
    f = SensitiveFilter(WORDS, allow=["岁月经过"])
    lines = ["春风入户", "月经来了", "岁月经过", "好大坏人", "坏", "坏蛋", "可恶", "大坏"]
    flagged = set(f.flag_lines(CharBatch(lines)).tolist())
    assert {i for i, line in enumerate(lines) if f.hits(line)} <= flagged
    assert 0 not in flagged and 4 not in flagged


def test_empty_list_finds_nothing() -> None:
    assert SensitiveFilter([]).is_clean("月经")
    assert len(SensitiveFilter([]).flag_lines(CharBatch(["月经"]))) == 0


def test_to_hashes_round_trip() -> None:
    plain = SensitiveFilter(WORDS, allow=["岁月经过", "恶"])
    hashed = SensitiveFilter.from_hashes(plain.to_hashes(), allow=["岁月经过"])
    assert len(hashed) == len(plain) == 3
    assert hashed.hits("岁月经过月经恶人") == plain.hits("岁月经过月经恶人") == ["月经"]
    assert np.array_equal(hashed.to_hashes(), plain.to_hashes())


def test_words_in_any_script_meet_normalised_text() -> None:
    # The list holds traditional forms (陰道); generated and corpus lines are simplified.
    assert SensitiveFilter(["陰道"]).hits("阴道") == ["阴道"]
    assert SensitiveFilter(["坏蛋"], allow=["好壞蛋"]).is_clean("好坏蛋")
    assert np.array_equal(hash_words(["陳希同"]), hash_words(["陈希同"]))
    hashed = SensitiveFilter.from_hashes(hash_words(["陰道", "月經"]), allow=["歲月經過"])
    assert hashed.hits("阴道") == ["阴道"]
    assert hashed.is_clean("岁月经过")


def test_a_hashed_filter_checks_substrings_as_long_as_its_longest_word() -> None:
    words = ["坏蛋", "大坏蛋啊"]
    short = SensitiveFilter.from_hashes(hash_words(words), max_len=2)
    full = SensitiveFilter.from_hashes(hash_words(words), max_len=4)
    assert short.hits("你这大坏蛋啊") == ["坏蛋"]  # the four-character word is out of its reach
    assert full.hits("你这大坏蛋啊") == ["大坏蛋啊", "坏蛋"]


def test_word_boundaries_let_straddling_occurrences_through() -> None:
    """With the line's word boundaries (data/segment.py) a listed word that straddles two
    words with an end inside one is no hit; inside one word, or as whole words, it is."""
    from data.segment import boundaries

    f = SensitiveFilter(["下作", "月经", "色色", "年年"])
    assert f.hits("山下作画") == ["下作"]  # plain substring matching
    assert f.hits("山下作画", boundaries("山下作画")) == []  # 山下/作画
    assert f.hits("岁月经过", boundaries("岁月经过")) == []  # 岁月/经过
    assert f.hits("水下作画", boundaries("水上吟诗")) == []  # the upper line's 水上/吟诗
    assert f.hits("色色悦耳", boundaries("声声悦耳")) == ["色色"]  # 声声/悦耳: a whole word
    assert f.hits("年年岁岁", boundaries("年年岁岁")) == ["年年"]  # inside the idiom 年年岁岁
    assert f.hits("他下作了", None) == ["下作"]
