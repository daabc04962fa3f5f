"""PyTorch models speaking the search's numpy protocol (model/decoding/search.py).

The search runs on numpy arrays; a PyTorch model (eager, or its dynamically quantised int8
copy) is wrapped here: arrays become tensors on the way in and arrays on the way out
(``torch.from_numpy`` and ``Tensor.numpy`` share memory, so these are not copies for
contiguous float32 and int64 data). The ONNX engine (model/decoding/onnx_engine.py) needs no
adapter: ONNX Runtime takes and gives arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from model.decoding.lattice import LatticeSteps
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, DecoderCache, LayerCache


def _array(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().numpy()


def _ids(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64))


class TorchTransformer:
    """A CoupletTransformer's decoding protocol on arrays."""

    def __init__(self, model: CoupletTransformer) -> None:
        self.module = model.eval()
        self.cfg = model.cfg
        self.capabilities: frozenset[str] = model.capabilities

    @torch.inference_mode()
    def encode(self, src: np.ndarray, register: np.ndarray | None = None) -> np.ndarray:
        return _array(self.module.encode(_ids(src), None if register is None else _ids(register)))

    @torch.inference_mode()
    def new_cache(self, memory: np.ndarray, src: np.ndarray, steps: int) -> DecoderCache:
        """The model's cache, its self-attention buffers (allocated for the longest line) cut
        to the ``steps`` positions the search writes, so that reordering beams copies only those."""
        cache = self.module.new_cache(torch.from_numpy(memory), _ids(src))
        layers = [LayerCache(c.k[:, :, :steps], c.v[:, :, :steps], c.ck, c.cv) for c in cache.layers]
        aligned = None if cache.aligned is None else cache.aligned[:, :steps]
        return DecoderCache(layers, cache.mem_mask, aligned)

    @torch.inference_mode()
    def step(self, cache: DecoderCache, prev: np.ndarray, pos: int) -> np.ndarray:
        return _array(self.module.step(cache, _ids(prev), pos))

    @torch.inference_mode()
    def step_states(self, cache: DecoderCache, prev: np.ndarray, pos: int) -> np.ndarray:
        return _array(self.module.step_states(cache, _ids(prev), pos))

    def reorder_cache(self, cache: DecoderCache, index: np.ndarray) -> DecoderCache:
        return self.module.reorder_cache(cache, _ids(index))

    def reorder_beams(self, cache: DecoderCache, parent: np.ndarray) -> DecoderCache:
        return self.module.reorder_beams(cache, _ids(parent))

    @torch.inference_mode()
    def decode_states(self, memory: np.ndarray, src: np.ndarray, tgt_in: np.ndarray) -> np.ndarray:
        """The teacher-forced states, normalised (``dec_norm``), as the output layer reads them."""
        states = self.module.decode_states(torch.from_numpy(memory), _ids(src), _ids(tgt_in))
        return _array(self.module.dec_norm(states))

    @torch.inference_mode()
    def head(self, states: np.ndarray) -> np.ndarray:
        return _array(self.module.head(torch.from_numpy(states)))


class TorchTagger(LatticeSteps):
    """A CoupletTagger's one pass in PyTorch, its lattice steps on arrays."""

    def __init__(self, model: CoupletTagger) -> None:
        self.module = model.eval()
        self.cfg = model.cfg
        self.max_len = model.cfg.max_len

    @torch.inference_mode()
    def logits(self, src: np.ndarray) -> np.ndarray:
        return _array(self.module.encode(_ids(src)))


def wrap(model: Any) -> Any:
    """The adapter for a PyTorch model (eager or quantised)."""
    if isinstance(model, CoupletTagger):
        return TorchTagger(model)
    return TorchTransformer(model)
