"""The real-page test set is well formed and the benchmark scores it."""

from __future__ import annotations

from bench.realpages import (
    FUNCTION_WORDS,
    Page,
    key_line,
    mirrored_words,
    page_range,
    pages,
    passes_with_exemption,
    policy_drops,
    score,
)


def test_realpages_cover_every_layout_with_sources() -> None:
    all_pages = pages()
    assert len(all_pages) >= 30
    assert len({p.source.split("/")[2] for p in all_pages}) >= 10
    layouts = {p.layout for p in all_pages}
    assert layouts == {
        "labelled_lines",
        "labelled_one_line",
        "bare_lines",
        "one_line",
        "quoted",
        "story",
        "none",
    }
    for page in all_pages:
        assert page.source.startswith("http") and page.split in ("tune", "heldout") and page.text
        assert bool(page.pairs) == (page.layout != "none"), page.name
    assert {p.layout for p in all_pages if p.split == "heldout"} == layouts


def test_score_counts_right_found_and_missed() -> None:
    page = next(p for p in pages() if p.name.startswith("07-"))
    result = score([page])
    row = result["layouts"]["all"]
    assert row["truth"] == 3 and row["right"] <= row["found"]
    assert len(result["misses"]) == row["truth"] - row["right"]
    assert key_line("門對千根竹;") == "门对千根竹"


def test_page_range() -> None:
    selected = page_range(pages(), "54-72")
    assert [p.name[:2] for p in selected] == [str(n) for n in range(54, 73)]
    assert [p.name[:2] for p in page_range(pages(), "7")] == ["07"]


def test_function_word_exemption_needs_the_same_positions() -> None:
    # 之 at the same position in both halves: exempt, and nothing else is reused
    assert mirrored_words("山高之处", "水远之乡", FUNCTION_WORDS) == {"之"}
    assert passes_with_exemption("山高之处", "水远之乡", FUNCTION_WORDS)
    assert not passes_with_exemption("之山高处", "水远之乡", FUNCTION_WORDS)  # 之 elsewhere
    assert not passes_with_exemption("春到人间", "春回大地", FUNCTION_WORDS)  # 春: no function word
    assert not passes_with_exemption("山高之处山", "水远之乡河", FUNCTION_WORDS)  # 山 repeats alone


def test_policy_drops_counts_each_rule_and_the_exemption() -> None:
    page = Page("99-test", "http://example.org/", "bare_lines", "heldout")
    page.pairs = {("山高之处", "水远之乡"), ("春到人间", "春回大地"), ("海阔凭鱼跃", "天高任鸟飞")}
    result = policy_drops([page])
    assert result["pairs"] == 3 and result["refused"] == 2
    assert result["counts"] == {"reused_chars": 2}
    assert result["pass_with_exemption"] == {"function_words": 1, "wide_function_words": 1}
    assert result["exempted_pairs"]["function_words"] == ["99-test: 山高之处 / 水远之乡 (之)"]
