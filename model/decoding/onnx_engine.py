"""ONNX Runtime copies of the models' inference graphs, for decoding on a CPU.

A decoder step of the cpu-sized model is a few dozen small operations on ten beam rows;
in eager PyTorch each costs its dispatch overhead, which is most of the step. ONNX
Runtime runs the same graph with fused kernels: on this project's 2-core machine a step
of the shipped model (10 beam rows) took 1.05 ms in int8, against 4.5 ms in eager fp32 and
3.6 ms in eager int8 (docs/EXPERIMENTS.md §6).

The graphs are exported from the PyTorch modules when the engine is built, with the
``torch.export``-based exporter (several seconds a model; ``GraphCache`` keeps them between
runs), so a bundle holds only the PyTorch weights. The export traces one path through the
Python code, so the traced functions branch on nothing but fixed settings. ``int8`` quantises their matrix
products dynamically (int8 weights, activations quantised per call).

Decoding never pads a source line (lines of one length are decoded together), so the
graphs take no source mask: ``new_cache`` refuses a source with padding.

Shapes: N requests, B beam rows, S source length, P decoded positions, L decoder layers,
H heads, dh head width, d model width, V vocabulary.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import logging
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np
import torch
from torch import Tensor, nn

from data.files import atomic_file
from model.decoding.lattice import LatticeSteps
from model.net.capabilities import LISTED_IN_GRAPH, LISTED_ROWS, REORDER_BEAMS
from model.net.tagger import CoupletTagger
from model.net.transformer import PAD_ID, CoupletTransformer, EncoderLayer

OPSET = 18  # the torch.export-based exporter writes opset 18 and later
Axes = dict[str, dict[int, str]]  # input name -> {dimension: its name}


def _dynamic_shapes(module: nn.Module, inputs: list[str], axes: Axes) -> tuple[Any, ...]:
    """``axes`` as ``torch.export`` takes them: one ``Dim`` per name, shared by every input
    whose dimension bears it (so the exporter knows those sizes are equal), shaped like the
    arguments of ``module.forward`` (its ``*args`` one tuple). Any dimension may be 0 (the empty
    KV cache of the first step)."""
    dims = {name: torch.export.Dim(name, min=0) for named in axes.values() for name in named.values()}
    specs = [{d: dims[name] for d, name in axes[i].items()} if i in axes else None for i in inputs]
    params = inspect.signature(module.forward).parameters.values()
    if not any(p.kind is p.VAR_POSITIONAL for p in params):
        return tuple(specs)
    fixed = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    return (*specs[:fixed], tuple(specs[fixed:]))


def _export(
    module: nn.Module, args: tuple[Tensor, ...], inputs: list[str], outputs: list[str], axes: Axes
) -> bytes:
    """The ONNX graph of ``module(*args)`` with the named inputs and outputs, the dimensions
    ``axes`` names dynamic. ``torch.export`` traces the module (non-strict: the Python runs as
    it is, its tensor operations recorded; so every dynamic dimension of ``args`` must be at
    least 2, since a size of 0 or 1 would be taken for a constant), then the ``torch.export``-based
    ONNX exporter translates the program, its optimiser folding constants and removing dead
    nodes."""
    # one tensor object given for two inputs is taken for one input aliased twice (the graph
    # would read the first layer's cache for every layer): every input its own copy
    args = tuple(a.clone() for a in args)
    quiet = logging.getLogger("torch.onnx")  # it logs a warning per torchvision operator it lacks
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # notes on the opset it converts to, and on torch.export
            exported = torch.export.export(
                module.eval(), args, dynamic_shapes=_dynamic_shapes(module, inputs, axes), strict=False
            )
            program = torch.onnx.export(
                exported,
                input_names=inputs,
                output_names=outputs,
                opset_version=OPSET,
                dynamo=True,
                external_data=False,
                verbose=False,
            )
    finally:
        quiet.setLevel(level)
    if program is None:  # only the TorchScript exporter, writing to a file, returns None
        raise RuntimeError("the ONNX exporter gave no program")
    return cast(bytes, program.model_proto.SerializeToString())


def _quantised(graph: bytes) -> bytes:
    """``graph`` with its matrix products in int8 (ONNX Runtime's dynamic quantisation)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src, dst = Path(tmp, "fp32.onnx"), Path(tmp, "int8.onnx")
        src.write_bytes(graph)
        logging.disable(logging.WARNING)  # it logs a pre-processing hint per graph on the root logger
        try:
            quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
        finally:
            logging.disable(logging.NOTSET)
        return dst.read_bytes()


def _session(graph: bytes, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # errors only
    return ort.InferenceSession(graph, so, providers=["CPUExecutionProvider"])


# The code an exported graph is traced from: a change to any of them makes new cache keys.
_TRACED_SOURCES = (
    Path(__file__),
    Path(sys.modules[CoupletTransformer.__module__].__file__ or ""),
    Path(sys.modules[CoupletTagger.__module__].__file__ or ""),
)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


def model_key(model: nn.Module) -> str:
    """A digest of everything an exported graph of ``model`` depends on: its configuration and
    weights, the traced code, the exporter's and the runtime's versions (a few ms a model)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr(getattr(model, "cfg", None)).encode())
    for path in _TRACED_SOURCES:
        h.update(path.read_bytes())
    for package in ("torch", "onnx", "onnxscript", "onnxruntime"):
        h.update(f"{package}={_version(package)};".encode())
    for name, tensor in model.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class GraphCache:
    """Exported (and quantised) graphs kept in ``folder`` between runs, by a key of the model
    (``model_key``), the graph's name and its settings: a process that starts again on the same
    model reads the very bytes the export gave before, so it decodes alike, without the export
    and the quantisation (most of a start-up). A folder that cannot be written is only not used."""

    def __init__(self, folder: Path, model: nn.Module) -> None:
        self.folder, self.key = folder, model_key(model)

    def path(self, name: str, int8: bool) -> Path:
        digest = hashlib.blake2b(f"{self.key}:{name}:{OPSET}:{int8}".encode(), digest_size=16).hexdigest()
        return self.folder / f"{name}-{'int8' if int8 else 'fp32'}-{digest}.onnx"

    def read(self, name: str, int8: bool) -> bytes | None:
        try:
            return self.path(name, int8).read_bytes()
        except OSError:
            return None

    def write(self, name: str, int8: bool, graph: bytes) -> None:
        """Publish ``graph`` under its name whole or not at all: written to a file of this process's
        own (``mkstemp``), synced, then renamed over the name. Two processes that write the same
        entry at once (the server's decode workers starting together) each rename a whole file of
        the same bytes; a reader opens the one or the other, never a part."""
        try:
            with atomic_file(self.path(name, int8)) as f:
                f.write(graph)
        except OSError as exc:
            logging.getLogger(__name__).warning("ONNX graph not cached in %s: %s", self.folder, exc)


class _Graph:
    """One exported module on ONNX Runtime: arrays in, arrays out."""

    def __init__(
        self,
        module: nn.Module,
        args: tuple[Tensor, ...],
        inputs: list[str],
        outputs: list[str],
        axes: Axes,
        int8: bool,
        threads: int,
        cache: GraphCache | None = None,
        name: str = "",
    ) -> None:
        self.inputs = inputs
        graph = cache.read(name, int8) if cache is not None else None
        if cache is not None and graph is not None:
            try:
                self.session = _session(graph, threads)
                return
            except Exception:  # a damaged file: export it again, and replace it
                logging.getLogger(__name__).warning("cached ONNX graph %s unreadable", cache.path(name, int8))
        graph = _export(module, args, inputs, outputs, axes)
        if int8:
            graph = _quantised(graph)
        if cache is not None:
            cache.write(name, int8, graph)
        self.session = _session(graph, threads)

    def arrays(self, *args: np.ndarray) -> list[np.ndarray]:
        """The graph's outputs for ``args``, its inputs in order."""
        feed = {name: np.ascontiguousarray(a) for name, a in zip(self.inputs, args, strict=True)}
        return cast(list[np.ndarray], self.session.run(None, feed))


# ---- the encoder-decoder ------------------------------------------------------------------


class _Call(nn.Module):
    """A model's method as a module's forward, for the exporter."""

    def __init__(self, model: nn.Module, method: str) -> None:
        super().__init__()
        self.m, self.method = model, method

    def forward(self, *args: Tensor) -> Tensor:
        return cast(Tensor, getattr(self.m, self.method)(*args))


class _Encoder(nn.Module):
    """An encoder stack without a source mask, for unpadded sources: src (N, S) -> the
    normalised states (N, S, d), or with ``head`` its logits (N, S, V). The same function as
    ``CoupletTransformer.encode`` (with ``CoupletTagger.tag``'s head), written out for a
    source without padding: no mask, heads split by reshapes. Exported from the masked
    ``scaled_dot_product_attention``, the optimised int8 graphs had 262 nodes (the six-layer
    tagger) and 114 (the three-layer encoder); written out, 161 and 88, and a pass over a
    7-character line takes 1.37 instead of 1.71 ms and 0.51 instead of 0.60 ms on one thread.
    (The query and key-value projections stay apart: fused, their int8 weights would share
    one scale and the query's lose precision.)"""

    def __init__(
        self,
        embed: nn.Module,
        pos: nn.Module,
        stack: nn.ModuleList,
        norm: nn.Module,
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        attn = cast(EncoderLayer, stack[0]).attn
        self.embed, self.pos, self.layers, self.norm = embed, pos, stack, norm
        self.head = None if head is None else _Projection(head)
        self.h, self.dh = attn.h, attn.dh

    def forward(self, src: Tensor) -> Tensor:
        n, s = src.shape
        h, dh = self.h, self.dh
        x = self.embed(src) + self.pos(torch.arange(s))  # (N, S, d)
        for module in self.layers:
            layer = cast(EncoderLayer, module)
            y = layer.norm1(x)
            q = layer.attn.q(y).reshape(n, s, h, dh).transpose(1, 2)  # (N, H, S, dh)
            k, v = layer.attn.kv(y).reshape(n, s, 2, h, dh).unbind(2)  # (N, S, H, dh) each
            att = torch.softmax((q @ k.permute(0, 2, 3, 1)) * dh**-0.5, dim=-1)  # (N, H, S, S)
            x = x + layer.attn.out((att @ v.transpose(1, 2)).transpose(1, 2).reshape(n, s, h * dh))
            x = x + layer.ff(layer.norm2(x))
        x = self.norm(x)
        return x if self.head is None else self.head(x)


class _Projection(nn.Module):
    """A linear layer with its weight stored transposed, (d, V), for the exporter. A head tied
    to the embedding is exported as a product with the embedding's weight transposed inside
    the graph; the exporter's optimiser folds no constant that large (the tagger's 7,683 x 192),
    so the product's weight is no initializer and dynamic quantisation leaves it in fp32: 2.4
    of the tagger's 4.1 ms on one thread. A weight of its own, already transposed, is an
    initializer (one more copy in the graph, none in the bundle)."""

    def __init__(self, linear: nn.Module) -> None:
        super().__init__()
        lin = cast(nn.Linear, linear)
        self.weight_t = nn.Parameter(lin.weight.detach().t().contiguous(), requires_grad=False)
        self.bias = None if lin.bias is None else nn.Parameter(lin.bias.detach().clone(), requires_grad=False)

    def forward(self, x: Tensor) -> Tensor:
        y = x @ self.weight_t
        return y if self.bias is None else y + self.bias


def _unpadded(src: np.ndarray) -> np.ndarray:
    if (src == PAD_ID).any():
        raise ValueError("the ONNX engine decodes unpadded sources only (one length per batch)")
    return src


class _Prepare(nn.Module):
    """memory (N, S, d) -> the aligned encoder state (N, S, d), then each decoder layer's
    cross-attention keys, transposed, (N, H, dh, S), then each layer's values (N, H, S, dh)."""

    def __init__(self, model: CoupletTransformer) -> None:
        super().__init__()
        self.m = model

    def forward(self, memory: Tensor) -> tuple[Tensor, ...]:
        kv = [layer.cross_attn.keys_values(memory) for layer in self.m.decoder_layers()]
        aligned = self.m.align(memory) if self.m.align is not None else torch.zeros_like(memory)
        return aligned, *(k.transpose(2, 3) for k, _ in kv), *(v for _, v in kv)


def _scaled_linear(parts: list[nn.Linear], scale: list[float]) -> nn.Linear:
    """One linear layer computing ``parts`` side by side, each output scaled."""
    weight = torch.cat([p.weight.detach() * s for p, s in zip(parts, scale, strict=True)])
    bias = torch.cat([cast(Tensor, p.bias).detach() * s for p, s in zip(parts, scale, strict=True)])
    fused = nn.Linear(weight.size(1), weight.size(0))
    with torch.no_grad():
        fused.weight.copy_(weight)
        fused.bias.copy_(bias)
    return fused


class _Step(nn.Module):
    """One decoder position for B rows: prev (B,) tokens, pos (1,), aligned (B, d), then
    per decoder layer the past self-attention keys, transposed, (B, H, dh, P), the past values
    (B, H, P, dh), the cross keys and the cross values from ``_Prepare`` -> the normalised
    state (B, d), then per layer the present keys (B, H, dh, P+1) and values (B, H, P+1, dh).
    (One input per layer and tensor: a stacked cache was split and stacked again at every
    step, copies that took about an eighth of a step of 112 rows, less of a smaller one;
    docs/EXPERIMENTS.md §10.)

    The same function as ``DecoderLayer.step``, written for one query so that the exported
    graph is small: the query, key and value projections in one product (the query scaled
    by 1/sqrt(dh) in its weights), heads split by reshapes alone, keys kept transposed."""

    def __init__(self, model: CoupletTransformer) -> None:
        super().__init__()
        self.m = model
        cfg = model.cfg
        self.h, self.dh, self.d = cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.d_model
        scale = self.dh**-0.5
        layers = model.decoder_layers()
        self.qkv = nn.ModuleList(
            _scaled_linear([la.self_attn.q, la.self_attn.kv], [scale, 1.0]) for la in layers
        )
        self.cross_q = nn.ModuleList(_scaled_linear([la.cross_attn.q], [scale]) for la in layers)

    def forward(self, prev: Tensor, pos: Tensor, aligned: Tensor, *cache: Tensor) -> tuple[Tensor, ...]:
        m, h, dh, d = self.m, self.h, self.dh, self.d
        n = len(cache) // 4
        past_k, past_v, ck, cv = (cache[i * n : (i + 1) * n] for i in range(4))
        x = m.tgt_embed(prev) + m.tgt_pos(pos) + aligned  # (B, d)
        present_k, present_v = [], []
        # shapes by -1, never by B: no shape arithmetic in the graph
        for i, layer in enumerate(m.decoder_layers()):
            q, k, v = self.qkv[i](layer.norm1(x)).split(d, dim=-1)  # (B, d) each
            ks = torch.cat([past_k[i], k.reshape(-1, h, dh, 1)], 3)  # (B, H, dh, P+1)
            vs = torch.cat([past_v[i], v.reshape(-1, h, 1, dh)], 2)  # (B, H, P+1, dh)
            present_k.append(ks)
            present_v.append(vs)
            att = torch.softmax(q.reshape(-1, h, 1, dh) @ ks, dim=-1)  # (B, H, 1, P+1)
            x = x + layer.self_attn.out((att @ vs).reshape(-1, d))
            q = self.cross_q[i](layer.norm2(x))
            att = torch.softmax(q.reshape(-1, h, 1, dh) @ ck[i], dim=-1)  # (B, H, 1, S)
            x = x + layer.cross_attn.out((att @ cv[i]).reshape(-1, d))
            x = x + layer.ff(layer.norm3(x))
        return m.dec_norm(x), *present_k, *present_v


class _ScoredStep(_Step):
    """``_Step`` with the output layer of a shortlist: prev, pos, aligned, then the listed rows
    of the output layer, transposed, weight (N, d, M), and bias (N, 1, M) (-inf at a list's
    padding), then the cache -> log-probabilities (B, M) over each request's list, the rows
    of a request together (B = N * beams), then the present keys and values. What
    ``Shortlist.log_probs`` does after a step in three PyTorch calls, inside the graph."""

    def forward(self, prev: Tensor, pos: Tensor, aligned: Tensor, *rest: Tensor) -> tuple[Tensor, ...]:
        weight, bias, *cache = rest
        state, *present = super().forward(prev, pos, aligned, *cache)
        n, d, m = weight.shape
        logits = state.reshape(n, -1, d) @ weight + bias  # (N, beams, M)
        return torch.log_softmax(logits, dim=-1).reshape(-1, m), *present


Layers = tuple[np.ndarray, ...]  # one array per decoder layer


def _rows(arrays: Layers, index: np.ndarray) -> Layers:
    return tuple(a.take(index, axis=0) for a in arrays)


@dataclass
class OnnxCache:
    """The search's state between steps, per decoder layer: past self-attention keys
    (B, H, dh, P) and values (B, H, P, dh), cross keys (B, H, dh, S) and values (B, H, S, dh);
    and the aligned encoder states (B, S, d). Keys are kept transposed, as the step
    multiplies by them. Arrays, as ONNX Runtime takes and gives them."""

    k: Layers
    v: Layers
    ck: Layers
    cv: Layers
    aligned: np.ndarray

    def select(self, rows: np.ndarray) -> OnnxCache:
        return OnnxCache(
            _rows(self.k, rows),
            _rows(self.v, rows),
            _rows(self.ck, rows),
            _rows(self.cv, rows),
            self.aligned.take(rows, axis=0),
        )


class OnnxTransformer:
    """A CoupletTransformer's decoding protocol (``encode``, ``new_cache``, ``step``,
    ``step_states``, ``reorder_cache``, ``decode_states``, ``logits``) on ONNX Runtime, and
    ``step_log_probs``: a step that scores a shortlist (the listed rows of the output layer,
    ``Decoder.head_t``) in the same graph. Over the whole vocabulary the output layer is a
    graph of its own (``head``). Scoring the list in the graph, not in three
    PyTorch calls after it, took a served request from 19.2-21.2 to 18.6-19.6 ms of CPU
    (two A/B runs alternating on 500 test lines). Arrays in, arrays out: the search's own."""

    capabilities: ClassVar[frozenset[str]] = frozenset({LISTED_ROWS, LISTED_IN_GRAPH, REORDER_BEAMS})

    def __init__(
        self, model: CoupletTransformer, int8: bool = False, threads: int = 1, cache_dir: Path | None = None
    ) -> None:
        """``cache_dir``: where the graphs are kept between runs (``GraphCache``); None: none."""
        model = model.eval()  # fp32 weights: the graphs take and give float32
        graphs = GraphCache(cache_dir, model) if cache_dir is not None else None
        cfg = self.cfg = model.cfg
        h, dh, n_layers = cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.n_dec_layers
        src = torch.full((2, 3), 5, dtype=torch.long)  # any ids: shapes are what the export records
        with torch.no_grad():
            memory = model.encode(src)
        encoder = _Encoder(model.embed, model.src_pos, model.encoder, model.enc_norm)
        self._encode = _Graph(
            encoder, (src,), ["src"], ["memory"], {"src": {0: "N", 1: "S"}}, int8, threads, graphs, "encode"
        )
        layers = range(n_layers)
        self._prepare = _Graph(
            _Prepare(model),
            (memory,),
            ["memory"],
            ["aligned", *(f"ck{i}" for i in layers), *(f"cv{i}" for i in layers)],
            {"memory": {0: "N", 1: "S"}},
            int8,
            threads,
            graphs,
            "prepare",
        )
        # B = 4 rows of N = 2 requests, P = 2 past positions: every dynamic size at least 2 and
        # the sizes that may differ different (the exporter would take a 1 for a constant)
        rows = torch.full((4,), 5, dtype=torch.long)
        key, value = torch.zeros(4, h, dh, 2), torch.zeros(4, h, 2, dh)
        cross_k, cross_v = torch.zeros(4, h, dh, 3), torch.zeros(4, h, 3, dh)
        cache = [key] * n_layers + [value] * n_layers + [cross_k] * n_layers + [cross_v] * n_layers
        axes: Axes = {"prev": {0: "B"}, "aligned": {0: "B"}}
        for i in layers:
            axes |= {f"past_k{i}": {0: "B", 3: "P"}, f"past_v{i}": {0: "B", 2: "P"}}
            axes |= {f"ck{i}": {0: "B", 3: "S"}, f"cv{i}": {0: "B", 2: "S"}}
        self._step = _Graph(
            _Step(model),
            (rows, torch.tensor([2]), torch.zeros(4, cfg.d_model), *cache),
            [
                "prev",
                "pos",
                "aligned",
                *(f"{name}{i}" for name in ("past_k", "past_v", "ck", "cv") for i in layers),
            ],
            ["state", *(f"k{i}" for i in layers), *(f"v{i}" for i in layers)],
            axes,
            int8,
            threads,
            graphs,
            "step",
        )
        listed = {"weight": {0: "N", 2: "M"}, "bias": {0: "N", 2: "M"}}
        self._scored = _Graph(
            _ScoredStep(model),
            (
                rows,
                torch.tensor([2]),
                torch.zeros(4, cfg.d_model),
                torch.zeros(2, cfg.d_model, 5),
                torch.zeros(2, 1, 5),
                *cache,
            ),
            [
                "prev",
                "pos",
                "aligned",
                "weight",
                "bias",
                *(f"{name}{i}" for name in ("past_k", "past_v", "ck", "cv") for i in layers),
            ],
            ["logp", *(f"k{i}" for i in layers), *(f"v{i}" for i in layers)],
            axes | listed,
            int8,
            threads,
            graphs,
            "scored_step",
        )
        self._states = _Graph(
            _Call(model, "decode_states"),
            (memory, src, torch.full((2, 4), 5, dtype=torch.long)),
            ["memory", "src", "tgt_in"],
            ["states"],
            {"memory": {0: "N", 1: "S"}, "src": {0: "N", 1: "S"}, "tgt_in": {0: "N", 1: "T"}},
            int8,
            threads,
            graphs,
            "decode_states",
        )
        self._head = _Graph(
            _Projection(model.head),
            (torch.zeros(4, cfg.d_model),),
            ["state"],
            ["logits"],
            {"state": {0: "B"}},
            int8,
            threads,
            graphs,
            "head",
        )
        norm = model.dec_norm
        self._norm = (_array(norm.weight), _array(norm.bias), float(norm.eps))

    def encode(self, src: np.ndarray) -> np.ndarray:
        return self._encode.arrays(_unpadded(src))[0]

    def new_cache(self, memory: np.ndarray, src: np.ndarray, steps: int = 0) -> OnnxCache:
        _unpadded(src)
        aligned, *kv = self._prepare.arrays(memory)
        n_layers = len(kv) // 2
        n, h, dh, _ = kv[0].shape
        empty_k, empty_v = np.zeros((n, h, dh, 0), aligned.dtype), np.zeros((n, h, 0, dh), aligned.dtype)
        return OnnxCache(
            (empty_k,) * n_layers, (empty_v,) * n_layers, tuple(kv[:n_layers]), tuple(kv[n_layers:]), aligned
        )

    def step_states(self, cache: OnnxCache, prev: np.ndarray, pos: int) -> np.ndarray:
        return self._run_step(self._step, cache, prev, pos, ())

    def step_log_probs(
        self, cache: OnnxCache, prev: np.ndarray, pos: int, listed: tuple[np.ndarray, np.ndarray]
    ) -> np.ndarray:
        """``step_states`` then the output layer over each request's shortlist, normalised there:
        ``listed`` = its weight (N, d, M) and bias (N, 1, M) -> log-probabilities (B, M)."""
        return self._run_step(self._scored, cache, prev, pos, listed)

    def _run_step(
        self, graph: _Graph, cache: OnnxCache, prev: np.ndarray, pos: int, extra: tuple[np.ndarray, ...]
    ) -> np.ndarray:
        if not 0 <= pos < self.cfg.max_len:
            raise ValueError(f"position {pos} outside 0..{self.cfg.max_len - 1}")
        if pos < cache.aligned.shape[1]:
            aligned = cache.aligned[:, pos]
        else:  # the end of sequence after the line: no source character there
            aligned = np.zeros((cache.aligned.shape[0], cache.aligned.shape[2]), cache.aligned.dtype)
        past_k = [k[..., :pos] for k in cache.k]  # a step again at pos replaces it
        past_v = [v[:, :, :pos] for v in cache.v]
        out, *present = graph.arrays(
            prev,
            np.array([pos], dtype=np.int64),
            aligned,
            *extra,
            *past_k,
            *past_v,
            *cache.ck,
            *cache.cv,
        )
        n_layers = len(present) // 2
        cache.k, cache.v = tuple(present[:n_layers]), tuple(present[n_layers:])
        return out

    def step(self, cache: OnnxCache, prev: np.ndarray, pos: int) -> np.ndarray:
        return self._head.arrays(self.step_states(cache, prev, pos))[0]

    @staticmethod
    def reorder_cache(cache: OnnxCache, index: np.ndarray) -> OnnxCache:
        return cache.select(index)

    @staticmethod
    def reorder_beams(cache: OnnxCache, parent: np.ndarray) -> OnnxCache:
        """Beams that stay within their request: only the self-attention keys/values move."""
        return OnnxCache(_rows(cache.k, parent), _rows(cache.v, parent), cache.ck, cache.cv, cache.aligned)

    def decode_states(self, memory: np.ndarray, src: np.ndarray, tgt_in: np.ndarray) -> np.ndarray:
        return self._states.arrays(memory, src, tgt_in)[0]

    def normed(self, x: np.ndarray) -> np.ndarray:
        """The decoder's final layer norm, in numpy (as ``nn.LayerNorm`` computes it)."""
        weight, bias, eps = self._norm
        mean = x.mean(-1, keepdims=True)
        var = np.square(x - mean).mean(-1, keepdims=True)
        return ((x - mean) / np.sqrt(var + np.float32(eps)) * weight + bias).astype(np.float32)

    def logits(self, x: np.ndarray) -> np.ndarray:
        return self._head.arrays(self.normed(x))[0]


# ---- the tagger ---------------------------------------------------------------------------


class OnnxTagger(LatticeSteps):
    """A CoupletTagger whose one pass (``encode``) runs on ONNX Runtime; the lattice steps
    read its output and have no weights (model/decoding/lattice.py)."""

    def __init__(
        self, model: CoupletTagger, int8: bool = False, threads: int = 1, cache_dir: Path | None = None
    ) -> None:
        model = model.eval()
        graphs = GraphCache(cache_dir, model) if cache_dir is not None else None
        self.cfg = model.cfg
        self.max_len = model.cfg.max_len
        src = torch.full((2, 3), 5, dtype=torch.long)
        tagger = _Encoder(model.embed, model.src_pos, model.encoder, model.enc_norm, model.head)
        self._tag = _Graph(
            tagger, (src,), ["src"], ["logits"], {"src": {0: "N", 1: "S"}}, int8, threads, graphs, "tag"
        )

    def encode(self, src: np.ndarray) -> np.ndarray:
        return self._tag.arrays(_unpadded(src))[0]


def _array(t: Tensor) -> np.ndarray:
    return t.detach().float().numpy().copy()
