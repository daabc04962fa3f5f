"""ONNX Runtime copies of the models' inference graphs, for decoding on a CPU.

A decoder step of the cpu-sized model is a few dozen small operations on ten beam rows;
in eager PyTorch each costs its dispatch overhead, which is most of the step. ONNX
Runtime runs the same graph with fused kernels: on this project's 2-core machine a step
of the shipped model (10 beam rows) took 1.05 ms in int8, against 4.5 ms in eager fp32 and
3.6 ms in eager int8 (docs/EXPERIMENTS.md §6).

The graphs are exported from the PyTorch modules (model/export/engines.py's ``onnx_copy``,
model/export/onnx_export.py) when an engine is first built from a model, and kept between
runs by ``GraphCache``, keyed by the weights (and the traced code, the exporter's and the
runtime's versions). ``int8`` quantises their matrix products dynamically (int8 weights,
activations quantised per call). An engine is made of its graphs (``OnnxTransformer(cfg,
graphs)``) and built from a cache without the model (``OnnxTransformer.cached``): this module
and the search need no PyTorch, so the command line and the decode workers start without it.

Decoding never pads a source line (lines of one length are decoded together), so the
graphs take no source mask: every way in (``encode``, ``new_cache``, the tagger's ``logits``)
refuses a source with padding.

Shapes: N requests, B beam rows, S source length, P decoded positions, L decoder layers,
H heads, dh head width, d model width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

import numpy as np

from data.vocab import PAD_ID
from model.decoding.lattice import LatticeSteps
from model.decoding.onnx_graphs import Graph, GraphCache, log_softmax_graph, session, session_threads
from model.spec.capabilities import LISTED_IN_GRAPH, LISTED_ROWS, LOG_PROBS, REORDER_BEAMS
from model.spec.config import ModelConfig

__all__ = ["TAGGER_GRAPHS", "TRANSFORMER_GRAPHS", "GraphCache", "OnnxCache", "OnnxTagger", "OnnxTransformer"]

# the graphs of each engine, by name (model/export/onnx_export.py says what each is)
TRANSFORMER_GRAPHS = ("encode", "prepare", "step", "scored_step", "decode_states", "head")
TAGGER_GRAPHS = ("tag",)


def _unpadded(src: np.ndarray) -> np.ndarray:
    if (src == PAD_ID).any():
        raise ValueError("the ONNX engine decodes unpadded sources only (one length per batch)")
    return src


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


class _CachedEngine:
    """An engine made of its graphs (``GRAPHS``, by name), which ``cached`` reads from a cache
    (model/export/engines.py exports them from a PyTorch model)."""

    GRAPHS: ClassVar[tuple[str, ...]]

    def __init__(self, cfg: ModelConfig, graphs: dict[str, Graph]) -> None:
        raise NotImplementedError

    @classmethod
    def cached(
        cls: type[E], cfg: ModelConfig, key: str, cache_dir: Path, int8: bool = False, threads: int = 1
    ) -> E | None:
        """The engine from its cached graphs alone (no model, no PyTorch), or None when one of
        them is not in ``cache_dir`` under ``key`` or cannot be read (``Graph.from_cache``)."""
        cache, graphs = GraphCache(cache_dir, key), {}
        for name in cls.GRAPHS:
            if (graph := Graph.from_cache(cache, name, int8, threads)) is None:
                return None
            graphs[name] = graph
        return cls(cfg, graphs)


E = TypeVar("E", bound=_CachedEngine)


class OnnxTransformer(_CachedEngine):
    """A CoupletTransformer's decoding protocol (``encode``, ``new_cache``, ``step``,
    ``step_states``, ``reorder_cache``, ``decode_states``, ``head``) on ONNX Runtime, and
    ``step_log_probs``: a step that scores a shortlist (the listed rows of the output layer,
    ``Decoder.head_t``) in the same graph. Over the whole vocabulary the output layer is a
    graph of its own (``head``). Scoring the list in the graph is faster than three calls after
    it (docs/EXPERIMENTS.md). Arrays in, arrays out: the search's own."""

    # ``step`` gives log-probabilities (``LOG_PROBS``): the output layer, then a LogSoftmax graph
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {LISTED_ROWS, LISTED_IN_GRAPH, REORDER_BEAMS, LOG_PROBS}
    )
    GRAPHS = TRANSFORMER_GRAPHS

    def __init__(self, cfg: ModelConfig, graphs: dict[str, Graph]) -> None:
        self.cfg = cfg
        self._encode, self._prepare, self._step, self._scored, self._states, self._head = (
            graphs[name] for name in TRANSFORMER_GRAPHS
        )
        self._log_softmax = Graph(session(log_softmax_graph(), session_threads(self._head)))

    def encode(self, src: np.ndarray, register: np.ndarray | None = None) -> np.ndarray:
        """src (N, S) -> memory (N, S, d); ``register`` (N,): each line's register, for a model
        with registers (None: the first, general); a model without them has one register."""
        src = _unpadded(src)
        if "register" not in self._encode.inputs:
            return self._encode.arrays(src)[0]
        if register is None:
            register = np.zeros(len(src), dtype=np.int64)
        return self._encode.arrays(src, register.astype(np.int64))[0]

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
        self, graph: Graph, cache: OnnxCache, prev: np.ndarray, pos: int, extra: tuple[np.ndarray, ...]
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
        """The step's log-probabilities over the whole vocabulary (B, V)."""
        return self._log_softmax.arrays(self.head(self.step_states(cache, prev, pos)))[0]

    @staticmethod
    def reorder_cache(cache: OnnxCache, index: np.ndarray) -> OnnxCache:
        return cache.select(index)

    @staticmethod
    def reorder_beams(cache: OnnxCache, parent: np.ndarray) -> OnnxCache:
        """Beams that stay within their request: only the self-attention keys/values move."""
        return OnnxCache(_rows(cache.k, parent), _rows(cache.v, parent), cache.ck, cache.cv, cache.aligned)

    def decode_states(self, memory: np.ndarray, src: np.ndarray, tgt_in: np.ndarray) -> np.ndarray:
        """The teacher-forced states, normalised: memory (N, S, d), src (N, S), tgt_in (N, T)
        -> (N, T, d)."""
        return self._states.arrays(memory, src, tgt_in)[0]

    def head(self, states: np.ndarray) -> np.ndarray:
        """The output layer over the whole vocabulary: normalised states (B, d) -> logits (B, V)."""
        return self._head.arrays(states)[0]


# ---- the tagger ---------------------------------------------------------------------------


class OnnxTagger(LatticeSteps, _CachedEngine):
    """A CoupletTagger whose one pass (``encode``) runs on ONNX Runtime; the lattice steps
    read its output and have no weights (model/decoding/lattice.py)."""

    GRAPHS = TAGGER_GRAPHS

    def __init__(self, cfg: ModelConfig, graphs: dict[str, Graph]) -> None:
        self.cfg = cfg
        self.max_len = cfg.max_len
        self._tag = graphs["tag"]

    def logits(self, src: np.ndarray) -> np.ndarray:
        return self._tag.arrays(_unpadded(src))[0]
