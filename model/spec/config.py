"""A model's configuration (``ModelConfig``), without PyTorch: the ONNX engine and the
bundle's reader need it where no model is built (model/net/transformer.py builds them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar

from data.text import DIRECTIONS, REGISTERS


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 8000
    d_model: int = 256
    n_heads: int = 4
    n_enc_layers: int = 4
    n_dec_layers: int = 4
    d_ff: int = 1024
    dropout: float = 0.1
    max_len: int = 64  # longest line + BOS/EOS
    aligned: bool = True  # add the encoder state at position i to decoder input i
    tie_embeddings: bool = True  # one table for source, target and output
    kind: str = "seq2seq"  # "seq2seq": encoder-decoder; "tagger": encoder only (model/net/tagger.py)
    # which line it reads and which it writes: "upper_to_lower" (上联 -> 下联, the default model)
    # or "lower_to_upper" (下联求上联: the same pairs with the direction swapped, not the order)
    direction: str = "upper_to_lower"
    # registers the model can be asked to write in (data.text.REGISTERS, by index): a learned
    # vector per register added to every source position; 0: none (the model of every register)
    n_registers: int = 0
    # fields no computation of the net reads: models that differ only in them are one shape to the
    # ONNX tracer (model/export/onnx_templates.py), so a reverse model takes the forward's templates
    UNTRACED: ClassVar[tuple[str, ...]] = ("direction",)

    def __post_init__(self) -> None:
        check_field_types(self)
        sizes = ("vocab_size", "d_model", "n_heads", "d_ff", "max_len")
        for name in sizes:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.n_registers <= len(REGISTERS):
            raise ValueError(f"n_registers must be in [0, {len(REGISTERS)}], got {self.n_registers}")
        if self.n_enc_layers < 0 or self.n_dec_layers < 0:
            raise ValueError("layer counts must not be negative")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads})")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {self.direction!r}")

    @property
    def reverse(self) -> bool:
        """Whether the model writes upper lines for lower lines."""
        return self.direction == "lower_to_upper"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})  # type: ignore[arg-type]

    def with_(self, **changes: object) -> ModelConfig:
        return replace(self, **changes)  # type: ignore[arg-type]


_TYPES: dict[str, type | tuple[type, ...]] = {"int": int, "float": (int, float), "bool": bool, "str": str}


def check_field_types(config: Any) -> None:
    """ValueError naming the first field of the dataclass ``config`` whose value is not of its
    declared type (int, float, bool or str; an int is a float, a bool is not a number): an
    option given as ``--set lr=abc`` is refused by name, not deep in the code that uses it."""
    for f in fields(config):
        want, value = _TYPES.get(str(f.type)), getattr(config, f.name)
        if want is not None and (
            not isinstance(value, want) or (want is not bool and isinstance(value, bool))
        ):
            raise ValueError(f"{f.name} must be of type {f.type}, got {value!r}")


class CorruptCheckpoint(ValueError):
    """A checkpoint or weights file that cannot be trusted: not loadable, or its payload's sum
    differs."""
