"""Request and response bodies of the API."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic.json_schema import JsonDict

from data.rules import RuleReport
from model.decoding import answer
from model.decoding.answer import DIRECTION_DOC

ToneMode = Literal["modern", "lenient", "classical"]
Direction = Literal["upper_to_lower", "lower_to_upper"]
Register = Literal["general", "classical", "formal"]  # data.text.REGISTERS
MODEL_VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+:-]{0,63}$"  # step59000-1a2b3c4d, test-a
# What a line may hold, as far as a schema can say it: no Latin letter or Arabic digit (half- or
# full-width) and no control character. In the document only (``LINE``): the server checks the
# line itself (duilian.inputs.clean_line), with a message naming the fault, and refuses what a
# pattern cannot state (no Chinese character, more than 100 characters once normalised).
LINE_PATTERN = r"^[^A-Za-z0-9\uFF10-\uFF19\uFF21-\uFF3A\uFF41-\uFF5A\u0000-\u0008\u000E-\u001F\u007F]*$"
LINE: JsonDict = {"pattern": LINE_PATTERN}


class Request(BaseModel):
    """A request body: a field it does not know (a misspelt ``required_char``) is refused,
    not ignored, so a constraint is never silently left out. Types are strict: ``"5"`` or
    ``true`` is no count, ``"yes"`` no boolean."""

    model_config = ConfigDict(extra="forbid", strict=True)


class GenerateRequest(Request):
    upper: str | None = Field(
        None,
        max_length=200,
        json_schema_extra=LINE,
        description="上联, at most 100 characters (from 33 on, a 长联, answered clause by clause); "
        "required unless `lower` is given",
        examples=["春风得意"],
    )
    lower: str | None = Field(
        None,
        max_length=200,
        json_schema_extra=LINE,
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
    # (named register_ in Python: pydantic's model classes have a ``register`` method)
    register_: Register = Field(
        "general",
        alias="register",
        description="语体: the register the model writes in, general (everyday couplets), classical "
        "(regulated verse) or formal (楹联 of halls, temples, birthdays, mourning), for a model with "
        "registers (GET /api/v1/model lists them); a model without them writes general only (422 otherwise)",
    )
    diverse: bool = Field(
        False,
        description="多样候选: diverse beam search, one candidate per beam group, each group paying for "
        "the characters earlier groups chose at the same position: lines that differ in more than a "
        "character or two, the first as apt as the plain search's; ignored in the fast mode",
    )


def _as_in(cls: type, name: str) -> Any:
    """A field narrowed in a schema, with the description it has in the answer type."""
    return dataclasses.field(metadata=next(f for f in dataclasses.fields(cls) if f.name == name).metadata)


@pydantic_dataclass(frozen=True)
class RuleReportOut(RuleReport):
    """A pair checked against the couplet rules: ``data.rules.RuleReport``'s fields (derived,
    so the two cannot drift) and its ``hard_ok`` verdict."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def hard_ok(self) -> bool:
        return super().hard_ok


@pydantic_dataclass(frozen=True)
class Candidate(answer.Candidate):
    """A candidate as ``model.decoding.answer.Candidate`` (its fields and their descriptions),
    its report with the hard-rule verdict."""

    report: RuleReportOut = _as_in(answer.Candidate, "report")


# The schemas narrow the answer's lists to the items above (invariant lists: hence the ignores).
@pydantic_dataclass(frozen=True)
class GenerateResponse(answer.Answer):
    """``model.decoding.answer.Answer`` as the API gives it (``Answer.as_json``)."""

    direction: Direction = _as_in(answer.Answer, "direction")
    candidates: list[Candidate] = _as_in(answer.Answer, "candidates")  # type: ignore[assignment]

    @computed_field(  # type: ignore[prop-decorator]
        description="deprecated alias of `reads_reversed` in direction upper_to_lower (false in the "
        "other): the upper line ends 平, so it is probably the lower line of a pair"
    )
    @property
    def upper_ends_level(self) -> bool:
        return super().upper_ends_level


class AlternativesRequest(Request):
    upper: str = Field(
        ...,
        max_length=200,
        json_schema_extra=LINE,
        description="上联, at most 100 characters (from 33 on, a 长联, answered clause by clause)",
        examples=["春风得意"],
    )
    lower: str = Field(
        ...,
        max_length=200,
        json_schema_extra=LINE,
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


@pydantic_dataclass(frozen=True)
class Alternative(answer.Alternative):
    """An alternative as ``model.decoding.answer.Alternative``, its report with the hard-rule verdict."""

    report: RuleReportOut = _as_in(answer.Alternative, "report")


@pydantic_dataclass(frozen=True)
class AlternativesResponse(answer.Alternatives):
    """``model.decoding.answer.Alternatives`` as the API gives it (``Alternatives.as_json``)."""

    direction: Direction = _as_in(answer.Alternatives, "direction")
    alternatives: list[Alternative] = _as_in(answer.Alternatives, "alternatives")  # type: ignore[assignment]


class BannersResponse(BaseModel):
    upper: str = Field(description="the upper line as normalised")
    lower: str = Field(description="the lower line as normalised")
    banners: list[answer.Banner] = Field(description="横批, best fit to the couplet's theme first")


class FeedbackRequest(Request):
    kind: Literal["vote", "own"] = Field(description="a vote on a candidate, or the person's own lower line")
    upper: str = Field(..., max_length=200, json_schema_extra=LINE)
    lower: str = Field(..., max_length=200, json_schema_extra=LINE)
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
    registers: list[Register] = Field(
        ["general"],
        description="the registers the model writes in (/generate's `register`): general alone "
        "for a model without registers",
    )


class ReloadRequest(Request):
    model_dir: str | None = Field(
        None, max_length=1000, description="bundle folder (default: the configured one)"
    )


class ReloadResponse(BaseModel):
    version: str
    previous_version: str
    seconds: float
