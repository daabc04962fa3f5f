"""The one answer type, from the search to the JSON: ``Banner``, ``Candidate``, ``Answer``,
``Alternative`` and ``Alternatives``.

The decoder fills what the search knows (lines, scores, tones, rule reports); the service
(duilian/service.py) adds the 横批, the known lower lines, the training-set flag, the filter's
count and the model's version with ``dataclasses.replace``. ``as_json`` is the JSON form that
the REST API answers and ``duilian generate --json`` prints; the API's schemas (serve/schemas.py)
are made from these classes, each field's ``description`` read from its metadata.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Any

from data.rules import RuleReport, check_answer
from data.text import DIRECTIONS
from data.tones import line_tones, mark

FORWARD, REVERSE = DIRECTIONS  # 上联 -> 下联, and 下联求上联 (the given line is the lower one)
TONES_DOC = "平, 仄, 中 (either) or empty, one per character"


def doc(description: str, **kwargs: Any) -> Any:
    """A dataclass field with its description, which the API's schema shows."""
    return field(metadata={"description": description}, **kwargs)


@functools.lru_cache(maxsize=65536)
def _marks(line: str, mode: str) -> tuple[str, ...]:
    return tuple(mark(t) for t in line_tones(line, mode))


def tone_marks(line: str, mode: str) -> list[str]:
    """平/仄/中/'' per character (cached: pypinyin costs as much as a small decode)."""
    return list(_marks(line, mode))


def report_json(report: RuleReport) -> dict[str, Any]:
    """A rule report's JSON form: its fields and its ``hard_ok`` verdict."""
    return {**report.as_dict(), "hard_ok": report.hard_ok}


@dataclass(frozen=True)
class Banner:
    """A 横批 for a couplet."""

    text: str = doc("横批: four characters")
    tones: list[str] = doc(TONES_DOC)
    score: float = doc(
        "fit to the couplet's theme: the cosine between the mean character vectors of the phrase and "
        "of the couplet (vectors learned from character co-occurrence in the corpora), plus a small "
        "bonus for common phrases; higher fits better"
    )


@dataclass(frozen=True)
class Candidate:
    """A line written for the given one, with its scores, tones, rule report and 横批."""

    text: str = doc("the line written (the lower line; in direction lower_to_upper, the upper)")
    rank_score: float = doc(
        "the score by which the candidates come best first: the search's score per character (the "
        "model's log-probability, `score`, plus the weighted opinion of the tagger, when the model has "
        "one, and the rhythm and 三平尾 preferences' penalties) plus the reranker's weighted "
        "`rerank_score`, when the model has a reranker"
    )
    score: float = doc(
        "the model's own log-probability per character (normalised over the characters the tagger "
        "shortlisted); not the order of the candidates, which is `rank_score`'s"
    )
    tones: list[str] = doc(TONES_DOC)
    report: RuleReport = doc("the couplet (upper, lower) checked against the couplet rules")
    banners: list[Banner] = doc(
        "up to 5 横批 for the couplet of the upper line and this candidate, best fit first (empty when "
        "the model has no 横批 table)",
        default_factory=list,
    )
    rerank_score: float | None = doc(
        "the reranker's opinion of the couplet: how much it reads like a couplet people wrote rather "
        "than the model's own line (higher: more so; a score, not a probability), added to `rank_score` "
        "with a small weight; null when the model has no reranker or it is turned off",
        default=None,
    )


DIRECTION_DOC = (
    "upper_to_lower (the default): lower lines for the upper line given in `upper`; lower_to_upper "
    "(下联求上联): upper lines for the lower line given in `lower`, under the mirrored rules (the upper "
    "line ends 仄 where the lower ends 平), by the bundle's second model; inferred from which line is "
    "given when left out"
)


@dataclass(frozen=True)
class Answer:
    """The candidates for one given line, best first, and what is known about the line. The given
    line is ``upper`` (direction upper_to_lower) or ``lower`` (lower_to_upper), the other None."""

    direction: str = doc("which line was given: " + DIRECTION_DOC)
    upper: str | None = doc("the upper line as normalised and decoded (direction upper_to_lower)")
    upper_tones: list[str] | None = doc(TONES_DOC + " of `upper`")
    lower: str | None = doc(
        "the lower line given, as normalised (direction lower_to_upper: the candidates are upper lines, "
        "and the training-set flag and known lower lines are not looked up)"
    )
    lower_tones: list[str] | None = doc(TONES_DOC + " of `lower`")
    candidates: list[Candidate] = doc("best first")
    in_training_set: bool = doc(
        "the upper line is a training upper line (fingerprint index); false for lower lines", default=False
    )
    known_lower_lines: list[str] = doc(
        "its lower lines in the training pairs (the bundle's, or the corpus's when configured)",
        default_factory=list,
    )
    unknown_chars: list[str] = doc("characters the model does not know", default_factory=list)
    reads_reversed: bool = doc(
        "the given line reads like the other side of its couplet: an upper line ending 平, or in "
        "direction lower_to_upper a lower line ending 仄",
        default=False,
    )
    filtered: int = doc("candidates withheld by the sensitive-word filter", default=0)
    model_version: str = doc("the served model's version", default="")

    @classmethod
    def given_line(cls, direction: str, line: str, tones: list[str], **fields: Any) -> Answer:
        """The answer for ``line`` given in ``direction``, its tones beside it."""
        if direction == REVERSE:
            return cls(direction, None, None, line, tones, **fields)
        return cls(direction, line, tones, None, None, **fields)

    @property
    def given(self) -> str:
        """The line given (the upper line, or the lower line in direction lower_to_upper)."""
        return (self.lower if self.direction == REVERSE else self.upper) or ""

    @property
    def given_tones(self) -> list[str]:
        return (self.lower_tones if self.direction == REVERSE else self.upper_tones) or []

    @property
    def upper_ends_level(self) -> bool:
        """Deprecated alias of ``reads_reversed`` for direction upper_to_lower (false in the other)."""
        return self.reads_reversed and self.direction != REVERSE

    def couplet(self, written: str) -> tuple[str, str]:
        """(upper, lower) of the given line and a line ``written`` for it, in either direction."""
        return (written, self.given) if self.direction == REVERSE else (self.given, written)

    def as_json(self) -> dict[str, Any]:
        """The JSON form: the fields, each report's ``hard_ok`` and the deprecated ``upper_ends_level``."""
        out = asdict(self)
        for c, raw in zip(self.candidates, out["candidates"], strict=True):
            raw["report"] = report_json(c.report)
        out["upper_ends_level"] = self.upper_ends_level
        return out

    @classmethod
    def from_json(cls, found: dict[str, Any]) -> Answer:
        """An answer read back from its JSON form (the command line asking a server)."""
        fields = {k: v for k, v in found.items() if k in _ANSWER_FIELDS}
        fields["candidates"] = [
            Candidate(
                **{
                    **c,
                    "report": _report(c["report"]),
                    "banners": [Banner(**b) for b in c.get("banners", [])],
                }
            )
            for c in found["candidates"]
        ]
        return cls(**fields)


@dataclass(frozen=True)
class Alternative:
    """A character for one position of a written line, the rest of the line kept."""

    char: str = doc("the character for the position (at each place of its repeat group)")
    text: str = doc("the whole written line with it (the lower line; in lower_to_upper, the upper)")
    rank_score: float = doc(
        "the search's score of that line per character (the model's log-probability of the whole line "
        "over the whole vocabulary, the pairing table, the tagger's opinion and the tone preferences), "
        "by which the list is ordered; compare it with the line's own (`original`)"
    )
    score: float = doc("the model's own log-probability of the line per character")
    tones: list[str] = doc(TONES_DOC + " of `text`")
    report: RuleReport = doc("the couplet checked against the couplet rules")
    original: bool = doc("the written line's own character")


@dataclass(frozen=True)
class Alternatives:
    """The characters that may stand at ``position`` of the written line, best first."""

    direction: str = doc("as asked: which line `position` is in (the written one)")
    upper: str = doc("the upper line as normalised")
    lower: str = doc("the lower line as normalised")
    position: int = doc("the place of the character replaced, from 0")
    positions: list[int] = doc(
        "every position that changes with it: where the upper line repeats a character, the lower line "
        "repeats its own"
    )
    alternatives: list[Alternative] = doc(
        "best first, each keeping every hard rule; the line's own character among them when it keeps "
        "the rules"
    )
    filtered: int = doc("characters withheld by the sensitive-word filter", default=0)
    model_version: str = doc("the served model's version", default="")

    def as_json(self) -> dict[str, Any]:
        """The JSON form: the fields and each report's ``hard_ok``."""
        out = asdict(self)
        for a, raw in zip(self.alternatives, out["alternatives"], strict=True):
            raw["report"] = report_json(a.report)
        return out


_ANSWER_FIELDS = {f for f in Answer.__dataclass_fields__}
_REPORT_FIELDS = {f for f in RuleReport.__dataclass_fields__}


def _report(raw: dict[str, Any]) -> RuleReport:
    return RuleReport(**{k: v for k, v in raw.items() if k in _REPORT_FIELDS})


def judged(
    given: str, text: str, mode: str, given_tones: Any, reverse: bool, rank_score: float, score: float
) -> Candidate:
    """A candidate ``text`` written for ``given``, its tones and the couplet's rule report
    (``data.rules.check_answer``, given the given line's tones read once)."""
    report = check_answer(given, text, mode, given_tones, reverse)
    return Candidate(text, rank_score, score, tone_marks(text, mode), report)
