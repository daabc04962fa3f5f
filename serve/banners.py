"""横批 for a couplet: the phrase table the data stage built (data/banners.py), ranked by theme.

The table is read from ``Settings.banners`` when set, else from the served bundle's
``banners.npz`` (the data stage writes one to ``work/data/banners.npz``); it is loaded once per
file and model (its phrases checked against the model's sensitive-word filters too), so a
reloaded bundle brings its own. No table: no 横批, and the rest of the service as before.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from data.banners import BANNERS_FILE, BannerTable
from serve.couplets import Served, tone_marks
from serve.schemas import Banner, Candidate
from serve.settings import Settings

log = logging.getLogger(__name__)
BANNERS_SHOWN = 5

_tables: dict[tuple[str, float, str], BannerTable | None] = {}
_lock = threading.Lock()


def table_path(settings: Settings, model: Served) -> Path | None:
    if settings.banners is not None:
        return settings.banners
    path = model.bundle.path / BANNERS_FILE
    return path if path.is_file() else None


def banner_table(settings: Settings, model: Served) -> BannerTable | None:
    """The table for this model, loaded on first use; None when there is none (or it is unreadable)."""
    path = table_path(settings, model)
    try:
        key = (str(path), path.stat().st_mtime, model.version) if path is not None else None
    except OSError:
        key = None
    if path is None or key is None:
        return None
    with _lock:
        if key not in _tables:
            try:
                table: BannerTable | None = BannerTable.load(path)
            except (OSError, ValueError, KeyError) as exc:  # a broken file: the site works without it
                log.warning("横批 table not loaded from %s: %s", path, exc)
                table = None
            if table is not None:
                table = table.filtered(model.is_clean(p) for p in table.phrases)
                log.info("横批 table: %d phrases from %s", len(table.phrases), path)
            _tables[key] = table
        return _tables[key]


def banners_for(
    table: BannerTable, upper: str, lower: str, tone_mode: str, n: int = BANNERS_SHOWN
) -> list[Banner]:
    return [
        Banner(text=text, tones=tone_marks(text, tone_mode), score=round(score, 4))
        for text, score in table.rank(upper, lower, n)
    ]


def with_banners(
    candidates: list[Candidate], table: BannerTable, upper: str, tone_mode: str
) -> list[Candidate]:
    return [
        c.model_copy(update={"banners": banners_for(table, upper, c.text, tone_mode)}) for c in candidates
    ]
