"""The real-page test set is well formed and the benchmark scores it."""

from __future__ import annotations

from bench.realpages import key_line, pages, score


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
