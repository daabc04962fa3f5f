"""A model as a decoder keeps it and as the search runs it. ``runtime_copy`` gives the copy a
decoder keeps of a PyTorch model (eager, an int8 copy, or its graphs on ONNX Runtime) and keeps
an engine already built (an ONNX engine from cached graphs) as it is; ``as_engine`` has either
speak arrays; ``transposed_head`` reads the output layer's weight the shortlists need.

A process that has not imported PyTorch holds no PyTorch module: these import PyTorch's
modules only when given one, so a decoder on cached ONNX graphs runs without it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from model.decoding.onnx_engine import OnnxTagger, OnnxTransformer
from model.decoding.options import Runtime


def is_module(model: Any) -> bool:
    """Whether ``model`` is a PyTorch module (not an engine already built)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def is_encoder_decoder(model: Any) -> bool:
    """Whether ``model``, a PyTorch module or an engine, is an encoder-decoder (not a tagger)."""
    if is_module(model):
        from model.net.transformer import CoupletTransformer

        return isinstance(model, CoupletTransformer)
    return isinstance(model, OnnxTransformer)


def runtime_copy(
    model: Any, int8: bool, runtime: Runtime, graph_cache: Path | None = None, key: str | None = None
) -> Any:
    """A PyTorch ``model`` as the search runs it: eager (an int8 copy with ``int8``), or its
    graphs on ONNX Runtime (kept in ``graph_cache`` between runs when given, under ``key``:
    by default a digest of the model, onnx_engine.model_key); an engine as it is."""
    if not is_module(model):
        return model
    if runtime == "onnx":  # one thread: a step is too small to split (docs/EXPERIMENTS.md §4)
        engine = OnnxTransformer if is_encoder_decoder(model) else OnnxTagger
        return engine(model, int8, cache_dir=graph_cache, key=key)
    from model.decoding.quantize import quantized

    return quantized(model) if int8 else model.eval()


def as_engine(model: Any) -> Any:
    """``model`` speaking arrays, as the search asks: an ONNX engine does; a PyTorch module
    gets its adapter (model/decoding/torch_engine.py)."""
    if is_module(model):
        from model.decoding.torch_engine import wrap

        return wrap(model)
    return model


def transposed_head(model: Any) -> np.ndarray:
    """The output layer's weight of a PyTorch encoder-decoder, transposed (d, V), for the
    shortlists' columns; an engine's must be given (``bundle.head_weight_t`` reads it)."""
    if not is_module(model):
        raise ValueError("a proposer's shortlists need the output layer's weight (head_t)")
    return np.ascontiguousarray(model.head.weight.detach().float().numpy().T)
