"""Request and response bodies of the API."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from data.rules import RuleReport

ToneMode = Literal["modern", "lenient", "classical"]
Direction = Literal["upper_to_lower", "lower_to_upper"]
DIRECTION_DOC = (
    "upper_to_lower (the default): lower lines for the upper line given in `upper`; lower_to_upper "
    "(下联求上联): upper lines for the lower line given in `lower`, under the mirrored rules (the upper "
    "line ends 仄 where the lower ends 平), by the bundle's second model; inferred from which line is "
    "given when left out"
)
MODEL_VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+:-]{0,63}$"  # step59000-1a2b3c4d, test-a


class Request(BaseModel):
    """A request body: a field it does not know (a misspelt ``required_char``) is refused,
    not ignored, so a constraint is never silently left out. Types are strict: ``"5"`` or
    ``true`` is no count, ``"yes"`` no boolean."""

    model_config = ConfigDict(extra="forbid", strict=True)


class GenerateRequest(Request):
    upper: str | None = Field(
        None,
        max_length=200,
        description="上联, at most 100 characters (from 33 on, a 长联, answered clause by clause); "
        "required unless `lower` is given",
        examples=["春风得意"],
    )
    lower: str | None = Field(
        None,
        max_length=200,
        description="下联, for upper lines written for it (下联求上联, direction lower_to_upper): "
        "given instead of `upper`",
        examples=["家和万事兴"],
    )
    direction: Direction | None = Field(None, description=DIRECTION_DOC)
    n: int = Field(5, ge=1, description="number of candidates, at most the server's limit (10 by default)")
    tone_mode: ToneMode = "modern"
    locks: str | None = Field(
        None,
        max_length=200,
        description="a pattern as long as the line given: _ free, a character fixed there in the line "
        "written (the lower line; with `lower`, the upper line)",
    )
    required_first: str | None = Field(
        None,
        max_length=32,
        description="藏头: the written line's first character (the lower line's; with `lower`, the upper "
        "line's; after an opening quote or bracket, "
        "which is mirrored)",
    )
    required_chars: str | None = Field(
        None, max_length=32, description="嵌字: characters the written line must contain"
    )
    fast: bool = Field(
        False,
        description="快速模式: the model's one-pass proposer suggests, the full model rescores (faster, "
        "lines a little less apt); the normal search when the model has no proposer",
    )
    diverse: bool = Field(
        False,
        description="多样候选: diverse beam search, one candidate per beam group, each group paying for "
        "the characters earlier groups chose at the same position: lines that differ in more than a "
        "character or two, the first as apt as the plain search's; ignored in the fast mode",
    )


@pydantic_dataclass(frozen=True)
class RuleReportOut(RuleReport):
    """A pair checked against the couplet rules: ``data.rules.RuleReport``'s fields (derived,
    so the two cannot drift) and its ``hard_ok`` verdict."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def hard_ok(self) -> bool:
        return super().hard_ok


class Banner(BaseModel):
    text: str = Field(description="横批: four characters")
    tones: list[str] = Field(description="平, 仄, 中 (either) or empty, one per character")
    score: float = Field(
        description="fit to the couplet's theme: the cosine between the mean character vectors of the "
        "phrase and of the couplet (vectors learned from character co-occurrence in the corpora), plus "
        "a small bonus for common phrases; higher fits better"
    )


class Candidate(BaseModel):
    text: str
    rank_score: float = Field(
        description="the search's score per character, by which the candidates come best first: the "
        "model's log-probability (`score`) plus the weighted opinion of the tagger, when the model has "
        "one, and the rhythm and 三平尾 preferences' penalties"
    )
    score: float = Field(
        description="the model's own log-probability per character (normalised over the characters the "
        "tagger shortlisted); not the order of the candidates, which is `rank_score`'s"
    )
    tones: list[str] = Field(description="平, 仄, 中 (either) or empty, one per character")
    report: RuleReportOut
    banners: list[Banner] = Field(
        default_factory=list,
        description="up to 5 横批 for the couplet of the upper line and this candidate, best fit first "
        "(empty when the model has no 横批 table)",
    )


class GenerateResponse(BaseModel):
    direction: Direction = Field(description="which line was given: " + DIRECTION_DOC)
    upper: str | None = Field(
        None, description="the upper line as normalised and decoded (direction upper_to_lower)"
    )
    upper_tones: list[str] | None = None
    lower: str | None = Field(
        None,
        description="the lower line given, as normalised (direction lower_to_upper: the candidates are "
        "upper lines, and the training-set flag and known lower lines are not looked up)",
    )
    lower_tones: list[str] | None = None
    candidates: list[Candidate]
    in_training_set: bool = Field(
        description="the upper line is a training upper line (fingerprint index); false for lower lines"
    )
    known_lower_lines: list[str] = Field(
        description="its lower lines in the training pairs (the bundle's, or the corpus's when configured)"
    )
    unknown_chars: list[str] = Field(description="characters the model does not know")
    upper_ends_level: bool = Field(
        description="the upper line ends 平: it is probably the lower line of a pair (ask again with "
        "direction lower_to_upper); false in that direction"
    )
    reads_reversed: bool = Field(
        description="the given line reads like the other side of its couplet: an upper line ending 平, "
        "or in direction lower_to_upper a lower line ending 仄"
    )
    filtered: int = Field(description="candidates withheld by the sensitive-word filter")
    model_version: str


class AlternativesRequest(Request):
    upper: str = Field(
        ...,
        max_length=200,
        description="上联, at most 100 characters (from 33 on, a 长联, answered clause by clause)",
        examples=["春风得意"],
    )
    lower: str = Field(
        ...,
        max_length=200,
        description="a lower line (a candidate; with direction lower_to_upper, the lower line given), as "
        "long as the upper line",
        examples=["秋月生辉"],
    )
    position: int = Field(
        ...,
        ge=0,
        description="the character to replace, counted from 0 in the lower line; not a punctuation mark",
        examples=[2],
    )
    n: int = Field(10, ge=1, description="how many characters besides the line's own, at most 16")
    tone_mode: ToneMode = "modern"
    locks: str | None = Field(
        None,
        max_length=200,
        description="as in /generate: a pattern as long as the upper line, _ free; kept by every alternative",
    )
    required_first: str | None = Field(None, max_length=32, description="藏头, as in /generate")
    required_chars: str | None = Field(None, max_length=32, description="嵌字, as in /generate")
    direction: Direction = Field(
        "upper_to_lower",
        description="upper_to_lower: `position` is in the lower line (a candidate for `upper`); "
        "lower_to_upper: in the upper line (a candidate written for `lower`); locks, 藏头 and 嵌字 "
        "then apply to the upper line",
    )


class Alternative(BaseModel):
    char: str = Field(description="the character for the position (at each place of its repeat group)")
    text: str = Field(
        description="the whole written line with it (the lower line; in lower_to_upper, the upper)"
    )
    rank_score: float = Field(
        description="the search's score of that line per character (the model's log-probability of the "
        "whole line over the whole vocabulary, the pairing table, the tagger's opinion and the tone "
        "preferences), by which the list is ordered; compare it with the line's own (`original`)"
    )
    score: float = Field(description="the model's own log-probability of the line per character")
    tones: list[str] = Field(description="平, 仄, 中 (either) or empty, one per character of `text`")
    report: RuleReportOut
    original: bool = Field(description="the lower line's own character")


class AlternativesResponse(BaseModel):
    direction: Direction = Field(description="as asked: which line `position` is in (the written one)")
    upper: str = Field(description="the upper line as normalised")
    lower: str = Field(description="the lower line as normalised")
    position: int
    positions: list[int] = Field(
        description="every position that changes with it: where the upper line repeats a character, the "
        "lower line repeats its own"
    )
    alternatives: list[Alternative] = Field(
        description="best first, each keeping every hard rule; the line's own character among them when it "
        "keeps the rules"
    )
    filtered: int = Field(description="characters withheld by the sensitive-word filter")
    model_version: str


class BannersResponse(BaseModel):
    upper: str = Field(description="the upper line as normalised")
    lower: str = Field(description="the lower line as normalised")
    banners: list[Banner] = Field(description="横批, best fit to the couplet's theme first")


class FeedbackRequest(Request):
    kind: Literal["vote", "own"] = Field(description="a vote on a candidate, or the person's own lower line")
    upper: str = Field(..., max_length=200)
    lower: str = Field(..., max_length=200)
    vote: Literal[1, -1] | None = Field(None, description="+1 or -1 (integers), for kind vote")
    model_version: str | None = Field(
        None,
        max_length=64,
        pattern=MODEL_VERSION_PATTERN,
        description="the model_version of the answer voted on: letters, digits and . _ + : -",
    )

    @field_validator("vote", mode="before")
    @classmethod
    def _an_integer(cls, value: Any) -> Any:
        """``true`` and ``1.0`` are not votes (the literal alone would take them for 1)."""
        if value is not None and type(value) is not int:
            raise ValueError("vote must be the integer 1 or -1")
        return value


class FeedbackResponse(BaseModel):
    id: int
    kind: str
    report: RuleReportOut = Field(description="the pair checked against the couplet rules")


class Health(BaseModel):
    status: Literal["ok", "degraded"] = Field(
        description="degraded (with HTTP 503): a decode worker died and its replacement is starting"
    )
    model_version: str
    known_lines: int = Field(description="training pairs indexed for known lower lines (0: none yet)")
    decode_workers: int = Field(description="decode worker processes alive (0: the server decodes itself)")
    decode_workers_wanted: int = Field(description="decode worker processes configured")


class ModelInfo(BaseModel):
    version: str
    path: str
    parameters: int
    vocab_size: int
    fingerprints: int
    config: dict[str, Any] = Field(description="the model's configuration, from its checkpoint")
    model_card: str
    data_card: str
    eval: dict[str, Any] = Field(description="evaluation figures of the bundle (eval.json)")
    fast_mode: bool = Field(description="the bundle has a proposer, so `fast` requests are faster")
    reverse_model: bool = Field(
        False, description="the bundle has a lower_to_upper model: /generate takes `lower` (下联求上联)"
    )


class ReloadRequest(Request):
    model_dir: str | None = Field(
        None, max_length=1000, description="bundle folder (default: the configured one)"
    )


class ReloadResponse(BaseModel):
    version: str
    previous_version: str
    seconds: float
