"""横批 for a couplet on the site: which table, loaded once per file and model.

The table is read from ``Settings.banners`` when set, else from the served bundle's
``banners.npz`` (the data stage writes one to ``work/data/banners.npz``); it is loaded once per
file and model (its phrases checked against the model's sensitive-word filters too), so a
reloaded bundle brings its own. No table: no 横批, and the rest of the service as before. The
ranking itself is the in-process service's (duilian/service.py: ``banners_for``, ``with_banners``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from data import tones
from data.banners import BANNERS_FILE, BannerTable
from duilian.inputs import Query
from duilian.service import load_banner_table, with_banners
from model.decoding.answer import Answer
from serve.couplets import Served
from serve.settings import Settings

_tables: dict[tuple[str, float, str], BannerTable | None] = {}
RECHECK = 1.0  # seconds between looks at a table's file
_checked: dict[tuple[Path | None, Path, str], tuple[float, tuple[str, float, str] | None]] = {}
_lock = threading.Lock()


def table_path(settings: Settings, model: Served) -> Path | None:
    if settings.banners is not None:
        return settings.banners
    path = model.bundle.path / BANNERS_FILE
    return path if path.is_file() else None


def banner_table(settings: Settings, model: Served) -> BannerTable | None:
    """The table for this model, loaded on first use; None when there is none (or it is unreadable).
    A file replaced while serving is read again, noticed within ``RECHECK`` seconds: the file
    is looked at once in that time, not by every request (4% of a busy server's samples)."""
    now = time.monotonic()
    which = (settings.banners, model.bundle.path, model.version)
    seen = _checked.get(which)
    if seen is None or now - seen[0] > RECHECK:
        path = table_path(settings, model)
        try:
            key = (str(path), path.stat().st_mtime, model.version) if path is not None else None
        except OSError:
            key = None
        seen = _checked[which] = (now, key)
    key = seen[1]
    if key is None:
        return None
    with _lock:
        if key not in _tables:
            _tables[key] = load_banner_table(Path(key[0]), model.is_clean)
        return _tables[key]


def warm(settings: Settings, model: Served) -> None:
    """Load the model's table, and the tone tables its 横批's marks read, now (at start-up and
    on a reload, before the model serves) rather than in its first requests: loaded there,
    a burst of first requests waited on them for most of a minute under load."""
    if banner_table(settings, model) is not None:
        tones.warm()


def banners_added(settings: Settings, model: Served, query: Query, answer: Answer) -> Answer:
    """The answer with each candidate's 横批, when there is a table (``DecodeBatcher.finish``:
    in the decode thread, about a millisecond for five candidates)."""
    table = banner_table(settings, model)
    return answer if table is None else with_banners(answer, table, query.tone_mode)
