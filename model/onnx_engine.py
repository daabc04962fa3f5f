"""ONNX Runtime copies of the models' inference graphs, for decoding on a CPU.

A decoder step of the cpu-sized model is a few dozen small operations on ten beam rows;
in eager PyTorch each costs its dispatch overhead, which is most of the step. ONNX
Runtime runs the same graph with fused kernels: on this project's 2-core machine a step
of the shipped model took 1.4 ms in int8 (4.5 ms in eager fp32, 3.6 ms in eager int8).

The graphs are exported from the PyTorch modules when the engine is built (about a second
each), so a bundle holds only the PyTorch weights. ``int8`` quantises their matrix
products dynamically (int8 weights, activations quantised per call).

Decoding never pads a source line (lines of one length are decoded together), so the
graphs take no source mask: ``new_cache`` refuses a source with padding.

Shapes: N requests, B beam rows, S source length, P decoded positions, L decoder layers,
H heads, dh head width, d model width, V vocabulary.
"""

from __future__ import annotations

import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from model.tagger import CoupletTagger, LatticeCache
from model.transformer import PAD_ID, CoupletTransformer

OPSET = 17
Axes = dict[str, dict[int, str]]  # input name -> {dimension: its name}


def _export(
    module: nn.Module, args: tuple[Tensor, ...], inputs: list[str], outputs: list[str], axes: Axes
) -> bytes:
    """The ONNX graph of ``module(*args)`` with the named inputs, outputs and dynamic axes."""
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter is deprecated but kept in 2.13
        path = Path(tmp, "graph.onnx")
        torch.onnx.export(
            module.eval(),
            args,
            path,
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )
        return path.read_bytes()


def _session(graph: bytes, int8: bool, threads: int) -> Any:
    import onnxruntime as ort

    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            src, dst = Path(tmp, "fp32.onnx"), Path(tmp, "int8.onnx")
            src.write_bytes(graph)
            quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
            graph = dst.read_bytes()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # errors only
    return ort.InferenceSession(graph, so, providers=["CPUExecutionProvider"])


class _Graph:
    """One exported module: torch tensors in, torch tensors out (no copies for contiguous
    CPU tensors either way)."""

    def __init__(
        self,
        module: nn.Module,
        args: tuple[Tensor, ...],
        inputs: list[str],
        outputs: list[str],
        axes: Axes,
        int8: bool,
        threads: int,
    ) -> None:
        self.inputs = inputs
        self.session = _session(_export(module, args, inputs, outputs, axes), int8, threads)

    def __call__(self, *args: Tensor) -> list[Tensor]:
        feed = {
            name: np.ascontiguousarray(a.detach().numpy()) for name, a in zip(self.inputs, args, strict=True)
        }
        return [torch.from_numpy(out) for out in self.session.run(None, feed)]


# ---- the encoder-decoder ------------------------------------------------------------------


class _Encode(nn.Module):
    def __init__(self, model: CoupletTransformer) -> None:
        super().__init__()
        self.m = model

    def forward(self, src: Tensor) -> Tensor:
        return self.m.encode(src)


class _Prepare(nn.Module):
    """memory (N, S, d) -> the cross-attention keys and values of every decoder layer
    (L, N, H, S, dh) each, and the aligned encoder state (N, S, d)."""

    def __init__(self, model: CoupletTransformer) -> None:
        super().__init__()
        self.m = model

    def forward(self, memory: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        kv = [layer.cross_attn.keys_values(memory) for layer in self.m.decoder_layers()]
        aligned = self.m.align(memory) if self.m.align is not None else torch.zeros_like(memory)
        return torch.stack([k for k, _ in kv]), torch.stack([v for _, v in kv]), aligned


class _Step(nn.Module):
    """One decoder position for B rows: prev (B,) tokens, pos (1,), aligned (B, 1, d), the
    past self-attention keys/values (L, B, H, P, dh), the cross keys/values (L, B, H, S, dh)
    -> the normalised state (B, d) and the present keys/values (L, B, H, P+1, dh)."""

    def __init__(self, model: CoupletTransformer) -> None:
        super().__init__()
        self.m = model

    def forward(
        self,
        prev: Tensor,
        pos: Tensor,
        aligned: Tensor,
        past_k: Tensor,
        past_v: Tensor,
        ck: Tensor,
        cv: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        m = self.m
        x = m.tgt_embed(prev)[:, None] + m.tgt_pos(pos)[None] + aligned  # (B, 1, d)
        present_k, present_v = [], []
        for i, layer in enumerate(m.decoder_layers()):
            h = layer.norm1(x)
            k, v = layer.self_attn.keys_values(h)  # (B, H, 1, dh)
            ks, vs = torch.cat([past_k[i], k], 2), torch.cat([past_v[i], v], 2)
            present_k.append(ks)
            present_v.append(vs)
            x = x + layer.self_attn.attend(h, ks, vs, None, causal=False)
            x = x + layer.cross_attn.attend(layer.norm2(x), ck[i], cv[i], None, False)
            x = x + layer.ff(layer.norm3(x))
        return m.dec_norm(x)[:, 0], torch.stack(present_k), torch.stack(present_v)


class _DecodeStates(nn.Module):
    def __init__(self, model: CoupletTransformer) -> None:
        super().__init__()
        self.m = model

    def forward(self, memory: Tensor, src: Tensor, tgt_in: Tensor) -> Tensor:
        return self.m.decode_states(memory, src, tgt_in)


@dataclass
class OnnxCache:
    """The search's state between steps: past self-attention keys/values (L, B, H, P, dh),
    cross keys/values (L, B, H, S, dh), aligned encoder states (B, S, d)."""

    k: Tensor
    v: Tensor
    ck: Tensor
    cv: Tensor
    aligned: Tensor

    def select(self, index: Tensor) -> OnnxCache:
        return OnnxCache(
            self.k.index_select(1, index),
            self.v.index_select(1, index),
            self.ck.index_select(1, index),
            self.cv.index_select(1, index),
            self.aligned.index_select(0, index),
        )


class OnnxTransformer:
    """A CoupletTransformer's decoding protocol (``encode``, ``new_cache``, ``step``,
    ``step_states``, ``reorder_cache``, ``decode_states``, ``logits``) on ONNX Runtime.
    The output layer stays in PyTorch (fp32; int8 with ``int8``): with a shortlist only
    its listed rows are used (``Decoder.head_weight``)."""

    def __init__(self, model: CoupletTransformer, int8: bool = False, threads: int = 1) -> None:
        model = model.eval()  # fp32 weights: the graphs take and give float32
        cfg = self.cfg = model.cfg
        h, dh, n_layers = cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.n_dec_layers
        src = torch.full((2, 3), 5, dtype=torch.long)  # any ids: shapes are what the export records
        with torch.no_grad():
            memory = model.encode(src)
        self._encode = _Graph(
            _Encode(model), (src,), ["src"], ["memory"], {"src": {0: "N", 1: "S"}}, int8, threads
        )
        self._prepare = _Graph(
            _Prepare(model),
            (memory,),
            ["memory"],
            ["ck", "cv", "aligned"],
            {"memory": {0: "N", 1: "S"}},
            int8,
            threads,
        )
        past = torch.zeros(n_layers, 2, h, 1, dh)
        cross = torch.zeros(n_layers, 2, h, 3, dh)
        self._step = _Graph(
            _Step(model),
            (src[:, 0], torch.tensor([1]), memory[:, :1], past, past, cross, cross),
            ["prev", "pos", "aligned", "past_k", "past_v", "ck", "cv"],
            ["state", "k", "v"],
            {
                "prev": {0: "B"},
                "aligned": {0: "B"},
                **{name: {1: "B", 3: "P"} for name in ("past_k", "past_v")},
                **{name: {1: "B", 3: "S"} for name in ("ck", "cv")},
            },
            int8,
            threads,
        )
        self._states = _Graph(
            _DecodeStates(model),
            (memory, src, src),
            ["memory", "src", "tgt_in"],
            ["states"],
            {"memory": {0: "N", 1: "S"}, "src": {0: "N", 1: "S"}, "tgt_in": {0: "N", 1: "T"}},
            int8,
            threads,
        )
        self.dec_norm = model.dec_norm
        self.head: nn.Module = model.head
        if int8:
            from model.decode import quantized

            self.head = quantized(nn.Sequential(model.head))[0]

    def encode(self, src: Tensor) -> Tensor:
        return self._encode(src)[0]

    def new_cache(self, memory: Tensor, src: Tensor) -> OnnxCache:
        if bool((src == PAD_ID).any()):
            raise ValueError("the ONNX engine decodes unpadded sources only (one length per batch)")
        ck, cv, aligned = self._prepare(memory)
        n_layers, n, h, _, dh = ck.shape
        empty = ck.new_zeros(n_layers, n, h, 0, dh)
        return OnnxCache(empty, empty, ck, cv, aligned)

    def step_states(self, cache: OnnxCache, prev: Tensor, pos: int) -> Tensor:
        if not 0 <= pos < self.cfg.max_len:
            raise ValueError(f"position {pos} outside 0..{self.cfg.max_len - 1}")
        if pos < cache.aligned.size(1):
            aligned = cache.aligned[:, pos : pos + 1]
        else:  # the end of sequence after the line: no source character there
            aligned = cache.aligned.new_zeros(cache.aligned.size(0), 1, cache.aligned.size(2))
        past_k, past_v = cache.k[:, :, :, :pos], cache.v[:, :, :, :pos]  # a step again at pos replaces it
        state, cache.k, cache.v = self._step(
            prev, torch.tensor([pos]), aligned, past_k, past_v, cache.ck, cache.cv
        )
        return state

    def step(self, cache: OnnxCache, prev: Tensor, pos: int) -> Tensor:
        return self.head(self.step_states(cache, prev, pos))

    @staticmethod
    def reorder_cache(cache: OnnxCache, index: Tensor) -> OnnxCache:
        return cache.select(index)

    @staticmethod
    def reorder_beams(cache: OnnxCache, parent: Tensor) -> OnnxCache:
        """Beams that stay within their request: only the self-attention keys/values move."""
        return OnnxCache(
            cache.k.index_select(1, parent),
            cache.v.index_select(1, parent),
            cache.ck,
            cache.cv,
            cache.aligned,
        )

    def decode_states(self, memory: Tensor, src: Tensor, tgt_in: Tensor) -> Tensor:
        return self._states(memory, src, tgt_in)[0]

    def logits(self, x: Tensor) -> Tensor:
        return self.head(self.dec_norm(x))


# ---- the tagger ---------------------------------------------------------------------------


class _Tag(nn.Module):
    def __init__(self, model: CoupletTagger) -> None:
        super().__init__()
        self.m = model

    def forward(self, src: Tensor) -> Tensor:
        return self.m.tag(src)


class OnnxTagger:
    """A CoupletTagger whose one pass (``encode``) runs on ONNX Runtime; the lattice steps
    read its output and have no weights, so they are the tagger's own."""

    steps_are_log_probs = True

    def __init__(self, model: CoupletTagger, int8: bool = False, threads: int = 1) -> None:
        model = model.eval()
        self.cfg = model.cfg
        self._torch = model
        src = torch.full((2, 3), 5, dtype=torch.long)
        self._tag = _Graph(_Tag(model), (src,), ["src"], ["logits"], {"src": {0: "N", 1: "S"}}, int8, threads)

    def encode(self, src: Tensor) -> Tensor:
        return self._tag(src)[0]

    def new_cache(self, memory: Tensor, src: Tensor) -> LatticeCache:
        return self._torch.new_cache(memory, src)

    def step(self, cache: LatticeCache, prev: Tensor, pos: int) -> Tensor:
        return self._torch.step(cache, prev, pos)

    @staticmethod
    def reorder_cache(cache: LatticeCache, index: Tensor) -> LatticeCache:
        return CoupletTagger.reorder_cache(cache, index)
