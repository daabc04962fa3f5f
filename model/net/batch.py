"""A batch of token-id pairs as the modules read it: sources padded with PAD_ID, targets
as BOS + line (the decoder's input) and line + EOS (what it predicts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from data.vocab import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Batch:
    src: Tensor  # (B, S) source ids, PAD_ID-padded
    tgt_in: Tensor  # (B, T) BOS + target ids
    tgt_out: Tensor  # (B, T) target ids + EOS
    where: tuple[int, int] = (0, 0)  # (epoch, position in the epoch's batch list), for resuming
    register: Tensor | None = None  # (B,) register index of each pair (data.text.REGISTERS)

    @property
    def size(self) -> int:
        return int(self.src.size(0))

    def to(self, device: torch.device, non_blocking: bool = False) -> Batch:
        src, tgt_in, tgt_out = (
            t.to(device, non_blocking=non_blocking) for t in (self.src, self.tgt_in, self.tgt_out)
        )
        reg = None if self.register is None else self.register.to(device, non_blocking=non_blocking)
        return Batch(src, tgt_in, tgt_out, self.where, reg)

    def pin_memory(self) -> Batch:
        reg = None if self.register is None else self.register.pin_memory()
        return Batch(
            self.src.pin_memory(), self.tgt_in.pin_memory(), self.tgt_out.pin_memory(), self.where, reg
        )


def collate(
    pairs: Sequence[tuple[Sequence[int] | np.ndarray, Sequence[int] | np.ndarray]],
    registers: Sequence[int] | np.ndarray | None = None,
) -> Batch:
    b = len(pairs)
    s = max(len(src) for src, _ in pairs)
    t = max(len(tgt) for _, tgt in pairs) + 1
    src = np.full((b, s), PAD_ID, dtype=np.int64)
    tgt_in = np.full((b, t), PAD_ID, dtype=np.int64)
    tgt_out = np.full((b, t), PAD_ID, dtype=np.int64)
    for i, (x, y) in enumerate(pairs):
        src[i, : len(x)] = x
        tgt_in[i, 0] = BOS_ID
        tgt_in[i, 1 : len(y) + 1] = y
        tgt_out[i, : len(y)] = y
        tgt_out[i, len(y)] = EOS_ID
    reg = None if registers is None else torch.as_tensor(np.asarray(registers, dtype=np.int64))
    return Batch(torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out), register=reg)
