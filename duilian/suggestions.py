"""What the check of a couplet says about mending its lower line (``CheckReport.suggestions``):
the answer types and the reasons there may be none. duilian/suggest.py finds them."""

from __future__ import annotations

from dataclasses import dataclass, field

NO_MODEL = "未载入模型，没有改字建议 / No model was loaded, so no characters are suggested"
NOT_ASKED = "未要求改字建议 / Suggestions were not asked for (suggest: false)"
BUSY = "服务器正忙，没有改字建议，请稍后再试 / The server is busy: no suggestions; please retry shortly"
NOT_ALIGNED = (
    "上下联须先字数相等、标点相对，才能逐字建议 / The lines must first be as long as each other with "
    "their marks mirrored before characters can be suggested"
)
NOTHING_WEAK = (
    "规则都已守住，词对也都不弱，没有要改的字 / Every rule is kept and no word pair is weak: nothing to mend"
)
NONE_MENDS = (
    "其余字不变时，没有一个字能补救这里而不破坏别的规则 / No character here mends it, with the rest of the "
    "line kept, without breaking another rule"
)
NONE_AS_GOOD = (
    "能改善这里的字，整句读来都不如原句，故不建议改 / The characters that would mend this place make a line "
    "the model ranks below this one: better left as it is"
)


def doc(description: str) -> dict[str, str]:
    return {"description": description}


@dataclass(frozen=True)
class Replacement:
    """A character for the place, and the line with it."""

    char: str = field(metadata=doc("the replacement (at every place of its repeat group)"))
    text: str = field(metadata=doc("the lower line with it applied"))
    mends: list[str] = field(
        metadata=doc(
            "what it mends there: the rules (as in `rules`) no longer broken, and `pair` when it "
            "pairs better with the upper line's character"
        )
    )
    pairing: float | None = field(
        metadata=doc("the pairing table's score of it facing the upper line's character (null: no table)")
    )
    rank_score: float = field(
        metadata=doc("the alternatives search's score of the line with it, per character")
    )


@dataclass(frozen=True)
class Suggestion:
    """One weak place of the lower line and the best characters for it, best first."""

    position: int = field(metadata=doc("the place, from 0"))
    positions: list[int] = field(metadata=doc("every place that changes with it (a repeat group)"))
    current: str = field(metadata=doc("the lower line's character there"))
    weakness: list[str] = field(
        metadata=doc("what is weak there: the rules broken at the place, or `pair` (a weak word pair)")
    )
    upper_word: str = field(metadata=doc("the upper line's word at the place (jieba's segmentation)"))
    lower_word: str = field(metadata=doc("the lower line's characters facing it"))
    pairing: float | None = field(
        metadata=doc("the pairing table's score of the current character facing the upper's (null: no table)")
    )
    replacements: list[Replacement] = field(metadata=doc("the characters that mend it, best first"))
    note: str | None = field(
        metadata=doc("why there is no replacement, in Chinese and English"), default=None
    )


@dataclass(frozen=True)
class Suggestions:
    """Characters to change in the lower line, or why there are none."""

    searched: bool = field(metadata=doc("the alternatives search was asked (false: `reason` says why not)"))
    reason: str | None = field(metadata=doc("why there are no suggestions, in Chinese and English"))
    items: list[Suggestion] = field(
        metadata=doc("the weakest places, a broken rule's first, then the weakest word pairs"),
        default_factory=list,
    )


def unavailable(reason: str) -> Suggestions:
    return Suggestions(searched=False, reason=reason)
