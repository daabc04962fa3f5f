"""横批 phrases and their theme ranking (data/banners.py) on small hand-written pairs."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from data import banners
from data.banners import BannerConfig, BannerTable, build_banners, clauses
from data.sensitive import SensitiveFilter
from data.text import is_han

# Three themes whose characters never meet: spring, study, landscape (our own phrases).
THEMES = {
    "spring": ["春满人间", "红梅报喜", "绿柳迎新", "燕舞莺歌", "花开富贵", "瑞雪丰年"],
    "study": ["书香门第", "学海无涯", "勤能补拙", "笔墨文章", "读经明理", "诗礼传家"],
    "land": ["山高水长", "松柏常青", "云开雾散", "清泉石上", "海阔天空", "江河万里"],
}
SMALL = BannerConfig(min_count=2, min_char_docs=1, dims=8)


def theme_pairs() -> list[tuple[str, str]]:
    pairs = []
    for phrases in THEMES.values():
        for i in range(6):
            pairs.append((phrases[i], phrases[(i + 1) % 6]))
            pairs.append(
                (f"{phrases[i]}，{phrases[(i + 2) % 6]}", f"{phrases[(i + 3) % 6]}，{phrases[(i + 4) % 6]}")
            )
    return pairs


FIXTURE_PAIRS = [
    *theme_pairs(),
    ("坏蛋横行", "好人难做"),  # a phrase with a listed word: never offered
    ("坏蛋横行", "天地不容"),
    ("坏蛋横行", "人神共愤"),
    ("哈哈哈哈", "嘻嘻嘻嘻"),  # a character three times: no 横批
    ("哈哈哈哈", "呵呵呵呵"),
    ("三言两语", "一心一意"),  # once each: not common enough
]


@pytest.fixture(scope="module")
def table() -> BannerTable:
    return build_banners(FIXTURE_PAIRS, SensitiveFilter(["坏蛋"]), SMALL)


def theme_of(phrase: str) -> str:
    return next(name for name, phrases in THEMES.items() if phrase in phrases)


def test_clauses_split_at_punctuation() -> None:
    assert clauses("绿水青山，千秋画卷。") == ["绿水青山", "千秋画卷"]
    assert clauses("春风得意") == ["春风得意"]


def test_phrases_are_common_clean_four_character_clauses(table: BannerTable) -> None:
    assert set(table.phrases) == {p for phrases in THEMES.values() for p in phrases}
    assert "坏蛋横行" not in table.phrases and "哈哈哈哈" not in table.phrases
    assert "三言两语" not in table.phrases
    assert all(n >= SMALL.min_count for n in table.counts)
    assert np.allclose(np.linalg.norm(table.vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    ("upper", "lower", "theme"),
    [("红梅报喜", "绿柳迎新", "spring"), ("读经明理", "勤能补拙", "study"), ("云开雾散", "海阔天空", "land")],
)
def test_ranked_by_the_couplets_theme(table: BannerTable, upper: str, lower: str, theme: str) -> None:
    ranked = table.rank(upper, lower, n=5)
    assert len(ranked) == 5
    assert [theme_of(p) for p, _ in ranked[:3]] == [theme] * 3  # the three best are of its theme
    scores = [s for _, s in ranked]
    assert scores == sorted(scores, reverse=True)
    assert upper not in dict(ranked) and lower not in dict(ranked)  # not its own clauses


def test_no_two_offered_share_three_characters() -> None:
    pairs = [*theme_pairs(), *[("春满人家", "山高水远")] * 3]
    table = build_banners(pairs, None, SMALL)
    ranked = [p for p, _ in table.rank("红梅报喜", "绿柳迎新", n=5)]
    assert not ("春满人间" in ranked and "春满人家" in ranked)
    assert table.rank("鑫淼", "犇羴") == []  # no character it knows: nothing to rank by


def test_saved_and_loaded_unchanged(table: BannerTable, tmp_path: Path) -> None:
    loaded = BannerTable.load(table.save(tmp_path / "banners.npz"))
    assert loaded.phrases == table.phrases and loaded.chars == table.chars
    assert [p for p, _ in loaded.rank("红梅报喜", "绿柳迎新")] == [
        p for p, _ in table.rank("红梅报喜", "绿柳迎新")
    ]
    kept = loaded.filtered(p != "春满人间" for p in loaded.phrases)
    assert "春满人间" not in kept.phrases and len(kept.phrases) == len(loaded.phrases) - 1
    # the kept rows taken over, not computed again: the very scores of a table built of them
    built = BannerTable(kept.phrases, kept.counts, kept.chars, kept.vectors, kept.prior, kept.same_chars)
    assert kept.rank("红梅报喜", "绿柳迎新") == built.rank("红梅报喜", "绿柳迎新")
    assert np.array_equal(kept.scores("红梅报喜绿柳迎新"), built.scores("红梅报喜绿柳迎新"))
    assert loaded.filtered(False for _ in loaded.phrases).rank("红梅报喜", "绿柳迎新") == []


def test_ranking_several_couplets_at_once_ranks_each_as_alone(table: BannerTable) -> None:
    couplets = [
        ("红梅报喜", "绿柳迎新"),
        ("鑫淼", "犇羴"),
        ("春风得意", "喜气盈门"),
        ("红梅报喜", "绿柳迎新"),
    ]
    together = table.rank_many(couplets, n=3)
    alone = [table.rank(up, low, n=3) for up, low in couplets]
    assert [[p for p, _ in r] for r in together] == [[p for p, _ in r] for r in alone]
    assert together[1] == [] and together[0] and together[0] == together[3]
    for r, a in zip(together, alone, strict=True):
        assert [round(s, 5) for _, s in r] == [round(s, 5) for _, s in a]


def test_a_screened_table_skips_refused_phrases_and_asks_only_about_those_it_reaches(
    table: BannerTable,
) -> None:
    first = [p for p, _ in table.rank("红梅报喜", "绿柳迎新", n=3)]
    asked: list[str] = []

    def allowed(phrase: str) -> bool:
        asked.append(phrase)
        return phrase != first[0]

    screened = table.screened(allowed)
    ranked = [p for p, _ in screened.rank("红梅报喜", "绿柳迎新", n=3)]
    assert first[0] not in ranked and ranked[:2] == first[1:]  # the rest keep their order
    assert len(asked) < len(table.phrases) and len(set(asked)) == len(asked)
    again = [p for p, _ in screened.rank("红梅报喜", "绿柳迎新", n=3)]
    assert again == ranked and len(set(asked)) == len(asked)  # each verdict asked once
    assert [p for p, _ in table.rank("红梅报喜", "绿柳迎新", n=3)] == first  # the table itself unchanged


@pytest.mark.parametrize("buffer", [1 << 25, 40])  # 40: the keys counted in many small goes
def test_character_counts_are_the_documents_sets_counted_one_by_one(
    buffer: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vectorised counts (``_doc_chars``, ``_co_counts``) against the definition, document by
    document with Python sets, on seeded random documents: repeats, punctuation, Latin letters,
    characters past the BMP, empty and one-character documents, rows of many lengths."""
    monkeypatch.setattr(banners, "_KEYS", buffer)
    rng = np.random.default_rng(7)
    alphabet = list("春夏秋冬山水风月花鸟天地人和，。！a𠀀〇") + [chr(0x4E00 + i) for i in range(40)]
    docs = [
        "",
        "春",
        "春春",
        "，。",
        *("".join(rng.choice(alphabet, rng.integers(0, 30))) for _ in range(400)),
    ]
    chars, x = banners._doc_chars(docs, min_docs=3)
    sets = [set(d) for d in docs]
    df = Counter(ch for s in sets for ch in s)
    assert chars == "".join(sorted(ch for ch, n in df.items() if n >= 3 and is_han(ch)))
    assert [set(chars[i] for i in x.indices[x.indptr[d] : x.indptr[d + 1]]) for d in range(len(docs))] == [
        s & set(chars) for s in sets
    ]
    co = banners._co_counts(x, len(chars)).reshape(len(chars), len(chars))
    want = np.zeros_like(co)
    for s in sets:
        for a, b in itertools.permutations(sorted(ch for ch in s if ch in chars), 2):
            want[chars.index(a), chars.index(b)] += 1
    assert np.array_equal(co, want) and co.sum() > 0


def test_phrases_are_counted_line_by_line() -> None:
    counts = banners.count_phrases(FIXTURE_PAIRS)
    want: Counter[str] = Counter()
    for pair in FIXTURE_PAIRS:
        for line in pair:
            want.update(c for c in clauses(line) if len(c) == 4)
    assert counts.most_common() == want.most_common()
