"""Dynamically quantised int8 copies of the models, for decoding on a CPU."""

from __future__ import annotations

import copy
import warnings
from typing import TypeVar, cast

import torch
from torch import nn

M = TypeVar("M", bound=nn.Module)


def quantized(model: M) -> M:
    """A copy of ``model`` with int8 dynamically quantised linear layers, for the CPU."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated but kept in 2.13
        q = torch.ao.quantization.quantize_dynamic(
            copy.deepcopy(model).eval(), {nn.Linear}, dtype=torch.qint8
        )
    return cast(M, q)
