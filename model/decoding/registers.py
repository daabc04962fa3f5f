"""The register a line is written in (data.text.REGISTERS: general, classical, formal), for a
model trained with a register embedding (``ModelConfig.n_registers``): the engine's encoder
adds that register's vector to every source position; nothing else in the search changes."""

from __future__ import annotations

from typing import Any

import numpy as np

from data.text import REGISTERS
from model.decoding.plan import ConstraintError

GENERAL = REGISTERS[0]


def register_index(register: str, n_registers: int) -> int:
    """The index of ``register`` for a model with ``n_registers`` (0: it has one, general), or a
    ConstraintError (Chinese and English) when the model does not write in it."""
    if register not in REGISTERS:
        raise ConstraintError(
            "register",
            f"语体只能是 {'、'.join(REGISTERS)}",
            f"The register is one of {', '.join(REGISTERS)}, not {register!r}.",
        )
    index = REGISTERS.index(register)
    if index >= max(n_registers, 1):
        written = "、".join(REGISTERS[: max(n_registers, 1)])
        raise ConstraintError(
            "register",
            f"本模型不分此语体（只写 {written}）",
            f"This model does not write in the {register} register (only {written.replace('、', ', ')}).",
        )
    return index


class InRegister:
    """An engine (the search's array protocol) whose encoder writes every line in one register;
    every other call goes to the engine itself."""

    def __init__(self, engine: Any, index: int) -> None:
        self.engine, self.index = engine, index

    def encode(self, src: np.ndarray) -> np.ndarray:
        memory: np.ndarray = self.engine.encode(src, np.full(len(src), self.index, dtype=np.int64))
        return memory

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def in_register(engine: Any, register: str, n_registers: int) -> Any:
    """``engine`` writing in ``register`` (itself for the general register)."""
    index = register_index(register, n_registers)
    return engine if index == 0 else InRegister(engine, index)
