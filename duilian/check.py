"""The check of a couplet a person wrote (对联检测): every rule of docs/COUPLET_RULES.md kept or
broken and where, for the whole couplet and clause by clause, each character's tone, the word
pairs with how well they pair, and whether the couplet is a known one.

Nothing here decides a rule: the verdicts are ``data.rules.check``'s (the report every candidate
carries, and the data stage's filters read the same functions), the places are the same rules'
``*_faults`` functions. ``POST /api/v1/check`` (serve/routers/check.py) answers ``CheckReport``
and ``duilian check --json`` prints the very object (``as_json``). Imports no model.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import itertools
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from data import rules
from data.pairing import PairingTable
from data.paths import cache_dir
from data.rules import RuleReport
from data.segment import FirstCharDictionary, boundaries, write_dictionary
from data.text import is_punct
from data.tones import Tone, line_tones, mark, opposed
from duilian.suggestions import NO_MODEL, Suggestions, unavailable
from model.store.fingerprint import normalise

if TYPE_CHECKING:
    from model.store.bundle import Bundle


class Library(Protocol):
    """What ``check_with`` reads of a bundle and its filters (``duilian.service.Library``)."""

    bundle: Bundle

    def known_lines(self, upper: str, found: list[str] | None = None) -> list[str]: ...


KINDS_DOC = (
    "hard: a rule no training pair or candidate breaks (hard_ok is their conjunction); search: a tone "
    "rule the search enforces where it applies (the line end; 马蹄韵 where the given line keeps it); "
    "soft: a preference, which costs a candidate score"
)
RULE_NAMES = {  # name: (中文, kind)
    "length": ("字数", "hard"),
    "punctuation": ("标点", "hard"),
    "repeats": ("叠字", "hard"),
    "no_reuse": ("不重字", "hard"),
    "tone_end": ("尾字平仄", "search"),
    "horse_hoof": ("马蹄韵", "search"),
    "rhythm": ("节奏", "soft"),
    "no_three_level_tail": ("无三平尾", "soft"),
}


def doc(description: str) -> dict[str, str]:
    """A dataclass field's metadata: its description, which the API's schema shows."""
    return {"description": description}


@dataclass(frozen=True)
class RuleCheck:
    """One rule of docs/COUPLET_RULES.md for the couplet."""

    name: str = field(metadata=doc("the rule, as in the candidates' `report`: " + ", ".join(RULE_NAMES)))
    label: str = field(metadata=doc("its Chinese name"))
    kind: str = field(metadata=doc(KINDS_DOC))
    kept: bool | None = field(
        metadata=doc("kept (true), broken (false), or not judged (null: does not apply, tone unknown)")
    )
    positions: list[int] = field(
        metadata=doc("where it is broken: character positions from 0 (the same in both lines)")
    )
    clauses: list[int] = field(metadata=doc("the clauses (from 0) where it is broken"))
    share: float | None = field(
        metadata=doc("rhythm only: the share of rhythm positions with opposed tones"), default=None
    )


@dataclass(frozen=True)
class ClauseCheck:
    """One clause (分句: between pause marks) of the upper line and the lower line's clause of
    the same rank."""

    start: int = field(metadata=doc("the upper clause's first character's position"))
    end: int = field(metadata=doc("the position after the upper clause's last character"))
    upper: str = field(metadata=doc("the upper line's clause"))
    lower: str = field(metadata=doc("the lower line's clause of the same rank (empty when it has fewer)"))
    length_ok: bool = field(metadata=doc("the two clauses are as long as each other"))
    end_tones: list[str] = field(
        metadata=doc("the tones (平/仄/中/empty) of the two clauses' last characters")
    )
    end_opposed: bool | None = field(
        metadata=doc("the two clause ends' tones are opposed (null: a tone unknown)")
    )
    hoof_wanted: list[str] = field(
        metadata=doc("马蹄韵's tones for the two clause ends (empty for a couplet of one clause)"),
        default_factory=list,
    )
    hoof_kept: bool | None = field(
        metadata=doc("both clause ends keep 马蹄韵 (null: does not apply)"), default=None
    )
    rhythm: float | None = field(
        metadata=doc("the share of the clause's rhythm positions with opposed tones"), default=None
    )
    broken: list[str] = field(metadata=doc("the rules broken inside this clause"), default_factory=list)


@dataclass(frozen=True)
class WordPair:
    """A word of the upper line (jieba's segmentation) and the lower line's characters there:
    the lines are parallel word for word, so the lower line takes the upper line's boundaries."""

    start: int = field(metadata=doc("the word's first position"))
    upper: str = field(metadata=doc("the upper line's word"))
    lower: str = field(metadata=doc("the lower line's characters at the same positions"))
    pairing: float | None = field(
        metadata=doc(
            "how well they pair: the mean, over the word's positions, of the bundle's pairing table "
            "(log observed/expected of the two characters facing each other in the training pairs; 0 for "
            "a pair never seen more than chance, about 3 for 天/地); null without a table"
        )
    )
    upper_pos: str | None = field(
        metadata=doc("the upper word's part of speech in jieba's dictionary (null: not a word there)")
    )
    lower_pos: str | None = field(
        metadata=doc("the lower characters' part of speech, as a word of jieba's dictionary")
    )
    pos_match: bool | None = field(
        metadata=doc("the two parts of speech agree in kind (n, v, a ...; null: one unknown)")
    )


@dataclass(frozen=True)
class KnownCouplet:
    """Whether the couplet is one of the model's training pairs (the bundle's known lines)."""

    upper_known: bool = field(
        metadata=doc("the upper line is a training upper line (whatever its punctuation)")
    )
    couplet_known: bool = field(metadata=doc("the lower line is one of that line's training lower lines"))
    known_lower_lines: list[str] = field(
        metadata=doc("the upper line's known lower lines (at most 5)"), default_factory=list
    )


@dataclass(frozen=True)
class CheckReport:
    """A couplet checked against the couplet rules (docs/COUPLET_RULES.md), as a whole and clause
    by clause."""

    upper: str = field(metadata=doc("the upper line, normalised as the training data was"))
    lower: str = field(metadata=doc("the lower line, normalised likewise"))
    tone_mode: str = field(
        metadata=doc("modern, lenient or classical (古声: the 平水韵's 入声 characters oblique)")
    )
    hard_ok: bool = field(metadata=doc("every hard rule kept (length, punctuation, repeats, no reuse)"))
    report: RuleReport = field(
        metadata=doc("the per-rule report a candidate of POST /generate carries, for this couplet")
    )
    rules: list[RuleCheck] = field(metadata=doc("every rule, kept or broken, and where"))
    clauses: list[ClauseCheck] = field(metadata=doc("clause by clause (分句, between pause marks)"))
    upper_tones: list[str] = field(
        metadata=doc("平, 仄, 中 (either) or empty, one per character of the upper line")
    )
    lower_tones: list[str] = field(metadata=doc("likewise for the lower line"))
    words: list[WordPair] = field(metadata=doc("the word pairs (empty when the lines differ in length)"))
    known: KnownCouplet | None = field(
        metadata=doc("whether the couplet is a known one (null: no bundle to ask)")
    )
    suggestions: Suggestions = field(
        metadata=doc(
            "characters to change in the lower line where it is weak (a broken rule first, then the weakest "
            "word pairs), each with what it mends and the line with it; or why there are none"
        ),
        default_factory=lambda: unavailable(NO_MODEL),
    )

    def as_json(self) -> dict[str, Any]:
        """The JSON object POST /api/v1/check answers."""
        return asdict(self)


def check_couplet(
    upper: str,
    lower: str,
    mode: str = "modern",
    pairing: PairingTable | None = None,
    known: KnownCouplet | None = None,
) -> CheckReport:
    """The check of two cleaned lines (``duilian.inputs.clean_line``; they may differ in length);
    ``pairing``: the bundle's table, ``known``: ``known_couplet``'s answer. Raises ValueError for
    a tone mode without its table."""
    ut, lt = line_tones(upper, mode), line_tones(lower, mode)
    report = rules.check(upper, lower, mode, ut)
    checks = _rules(upper, lower, ut, lt, report)
    return CheckReport(
        upper=upper,
        lower=lower,
        tone_mode=mode,
        hard_ok=report.hard_ok,
        report=report,
        rules=checks,
        clauses=_clauses(upper, lower, ut, lt, checks),
        upper_tones=[mark(t) for t in ut],
        lower_tones=[mark(t) for t in lt],
        words=_words(upper, lower, pairing) if len(upper) == len(lower) else [],
        known=known,
    )


def check_with(library: Library, upper: str, lower: str, mode: str) -> CheckReport:
    """The check with a bundle's pairing table and known lines, those listed passed through its
    word filters (``Library.known_lines``): the one way the site and the command line check."""
    bundle = library.bundle
    lowers = bundle.known_lowers(upper)
    shown = library.known_lines(upper, lowers)
    known = known_couplet(upper, lower, lowers, bundle.in_training_data(upper), shown)
    return check_couplet(upper, lower, mode, bundle.pairing, known)


def known_couplet(
    upper: str, lower: str, lowers: Sequence[str], in_training: bool, shown: Sequence[str] | None = None
) -> KnownCouplet:
    """``lowers``: every known lower line of ``upper``; the couplet is known when one of them is
    the lower line whatever the punctuation (``model.store.fingerprint.normalise``). ``shown``:
    the ones to list (the service's, through its word filters), by default the first five."""
    want = normalise(lower)
    return KnownCouplet(
        upper_known=in_training,
        couplet_known=any(normalise(w) == want for w in lowers),
        known_lower_lines=list(lowers[:5] if shown is None else shown),
    )


def _rules(upper: str, lower: str, ut: list[Tone], lt: list[Tone], report: RuleReport) -> list[RuleCheck]:
    where = rules.rule_faults(upper, lower, report, ut, lt)
    spans = rules.clause_spans(upper)
    low_spans = rules.clause_spans(lower)
    out = []
    for name, (label, kind) in RULE_NAMES.items():
        value = getattr(report, name)
        kept = value == 1.0 if name == "rhythm" and value is not None else value
        clauses = sorted({k for p in where[name] for k, (s, e) in enumerate(spans) if s <= p < e})
        if name == "length":
            sizes = [[e - s for s, e in found] for found in (spans, low_spans)]
            clauses = [k for k in range(max(map(len, sizes))) if _at(sizes[0], k) != _at(sizes[1], k)]
        share = value if name == "rhythm" else None
        out.append(RuleCheck(name, label, kind, kept, where[name], clauses, share))
    return out


def _at(items: list[int], k: int) -> int | None:
    return items[k] if k < len(items) else None


def _clauses(
    upper: str, lower: str, ut: list[Tone], lt: list[Tone], checks: list[RuleCheck]
) -> list[ClauseCheck]:
    spans, low_spans = rules.clause_spans(upper), rules.clause_spans(lower)
    hoof = len(spans) >= 2 and len(spans) == len(low_spans)
    wanted = list(
        zip(rules.hoof_pattern(len(spans)), rules.hoof_pattern(len(spans), lower=True), strict=True)
    )
    rhythm = set(rules.rhythm_positions(upper)) if len(upper) == len(lower) else set()
    out = []
    for k, (s, e) in enumerate(spans):
        ls, le = low_spans[k] if k < len(low_spans) else (0, 0)
        up_end, low_end = ut[e - 1], (lt[le - 1] if le else Tone.NONE)
        judged = [opposed(ut[i], lt[i]) for i in range(s, e) if i in rhythm and ut[i] and lt[i]]
        kept = [bool(t & w) if t else None for t, w in zip((up_end, low_end), wanted[k], strict=True)]
        out.append(
            ClauseCheck(
                start=s,
                end=e,
                upper=upper[s:e],
                lower=lower[ls:le],
                length_ok=e - s == le - ls,
                end_tones=[mark(up_end), mark(low_end)],
                end_opposed=opposed(up_end, low_end) if up_end and low_end else None,
                hoof_wanted=[mark(w) for w in wanted[k]] if hoof else [],
                hoof_kept=rules.verdict(kept) if hoof else None,
                rhythm=sum(judged) / len(judged) if judged else None,
                broken=[c.name for c in checks if k in c.clauses and c.kept is not True],
            )
        )
    return out


def _words(upper: str, lower: str, pairing: PairingTable | None) -> list[WordPair]:
    bounds = boundaries(upper)
    cuts = [i for i, b in enumerate(bounds) if b]
    out = []
    for s, e in itertools.pairwise(cuts):
        if all(is_punct(ch) for ch in upper[s:e]):
            continue
        score = (
            None
            if pairing is None
            else sum(pairing.get(u, w) for u, w in zip(upper[s:e], lower[s:e], strict=True)) / (e - s)
        )
        up_pos, low_pos = part_of_speech(upper[s:e]), part_of_speech(lower[s:e])
        match = up_pos[0] == low_pos[0] if up_pos and low_pos else None
        out.append(
            WordPair(
                s, upper[s:e], lower[s:e], None if score is None else round(score, 3), up_pos, low_pos, match
            )
        )
    return out


@functools.lru_cache(maxsize=1)
def _word_tags() -> Any:
    """jieba's dictionary's part-of-speech tags, read by first character (data.segment's
    ``FirstCharDictionary``): only the parts a check asks for, not jieba.posseg's whole tables
    (64 MB and 0.8 s at import). Written once into the cache folder from jieba's dictionary file,
    keyed by jieba's version and the file's bytes; empty when jieba is not installed."""
    spec = importlib.util.find_spec("jieba")
    if spec is None or spec.origin is None:
        logging.getLogger(__name__).warning("no parts of speech: jieba is not installed")
        return {}
    dict_file = Path(spec.origin).parent / "dict.txt"  # (jieba.DEFAULT_DICT_NAME)
    digest = hashlib.blake2b(importlib.metadata.version("jieba").encode(), digest_size=8)
    digest.update(dict_file.read_bytes())
    path = cache_dir() / f"jieba-tags-{digest.hexdigest()}.dict"
    try:
        return FirstCharDictionary(path)
    except (OSError, ValueError, EOFError, TypeError):
        tags: dict[str, str] = {}
        with open(dict_file, encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 3:  # word, frequency, tag: as jieba.posseg reads them
                    tags[fields[0]] = fields[2]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_dictionary(cast(Any, tags), 0, path)
            return FirstCharDictionary(path)
        except OSError as exc:
            logging.getLogger(__name__).warning("parts of speech not cached at %s: %s", path, exc)
            return tags


def part_of_speech(word: str) -> str | None:
    """The word's tag in jieba's dictionary (n, v, a, nr ...), or None when it is not a word there."""
    tag: str | None = _word_tags().get(word)
    return tag
