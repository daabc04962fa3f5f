"""The 横批 of an answer or a couplet, from a bundle's 横批 table (data/banners.py): the one place
the command line and the site rank them (``Library.finish``, ``Library.banners_for``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from data.banners import BannerTable
from model.decoding.answer import Answer, Banner, tone_marks

log = logging.getLogger(__name__)
BANNERS_SHOWN = 5  # 横批 per candidate


def load_banner_table(path: Path, is_clean: Callable[[str], bool]) -> BannerTable | None:
    """A 横批 table that never gives a phrase ``is_clean`` refuses; None when the file is
    unreadable (the service works without 横批)."""
    try:
        table = BannerTable.load(path)
    except (OSError, ValueError, KeyError) as exc:
        log.warning("横批 table not loaded from %s: %s", path, exc)
        return None
    table = table.screened(is_clean)
    log.info("横批 table: %d phrases from %s", len(table.phrases), path)
    return table


def banners_for(
    table: BannerTable, upper: str, lower: str, tone_mode: str, n: int = BANNERS_SHOWN
) -> list[Banner]:
    """Up to ``n`` 横批 for the couplet, best fit to its theme first."""
    return banner_list(table.rank(upper, lower, n), tone_mode)


def banner_list(ranked: list[tuple[str, float]], tone_mode: str) -> list[Banner]:
    return [
        Banner(text=text, tones=tone_marks(text, tone_mode), score=round(score, 4)) for text, score in ranked
    ]


def with_banners(answer: Answer, table: BannerTable, tone_mode: str) -> Answer:
    """The answer with each candidate's 横批 (their fits in one product: about 2 ms for five)."""
    ranked = table.rank_many([answer.couplet(c.text) for c in answer.candidates], BANNERS_SHOWN)
    candidates = [
        replace(c, banners=banner_list(found, tone_mode))
        for c, found in zip(answer.candidates, ranked, strict=True)
    ]
    return replace(answer, candidates=candidates)
