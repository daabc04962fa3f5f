"""ONNX Runtime copies of the models' inference graphs, for decoding on a CPU.

A decoder step of the cpu-sized model is a few dozen small operations on ten beam rows;
in eager PyTorch each costs its dispatch overhead, which is most of the step. ONNX
Runtime runs the same graph with fused kernels: on this project's 2-core machine a step
of the shipped model (10 beam rows) took 1.05 ms in int8, against 4.5 ms in eager fp32 and
3.6 ms in eager int8 (docs/EXPERIMENTS.md §6).

The graphs are exported from the PyTorch modules (model/decoding/onnx_export.py) when an
engine is first built from a model, and kept between runs by ``GraphCache``, keyed by the
weights (and the traced code, the exporter's and the runtime's versions). ``int8`` quantises
their matrix products dynamically (int8 weights, activations quantised per call). An engine
whose graphs are all cached is built without the model (``OnnxTransformer.cached``): this
module and the search need no PyTorch, so the command line and the decode workers start
without importing it.

Decoding never pads a source line (lines of one length are decoded together), so the
graphs take no source mask: every way in (``encode``, ``new_cache``, the tagger's ``logits``)
refuses a source with padding.

Shapes: N requests, B beam rows, S source length, P decoded positions, L decoder layers,
H heads, dh head width, d model width, V vocabulary.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import numpy as np

from data.files import atomic_file
from data.vocab import PAD_ID
from model.decoding.graph_keys import OPSET
from model.decoding.lattice import LatticeSteps
from model.net.capabilities import LISTED_IN_GRAPH, LISTED_ROWS, LOG_PROBS, REORDER_BEAMS
from model.net.config import ModelConfig

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from model.net.tagger import CoupletTagger
    from model.net.transformer import CoupletTransformer

# the graphs of each engine, by name (model/decoding/onnx_export.py says what each is)
TRANSFORMER_GRAPHS = ("encode", "prepare", "step", "scored_step", "decode_states", "head")
TAGGER_GRAPHS = ("tag",)


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


def _threads(graph: _Graph) -> int:
    """The intra-op threads of ``graph``'s session."""
    return int(graph.session.get_session_options().intra_op_num_threads)


def _log_softmax_graph() -> bytes:
    """A graph of one LogSoftmax over the last axis of (B, V) float32: ONNX Runtime's vectorised
    exp normalises a step's logits about three times as fast as numpy's (docs/MEASUREMENTS.md)."""
    from onnx import TensorProto, helper

    node = helper.make_node("LogSoftmax", ["logits"], ["log_probs"], axis=-1)
    graph = helper.make_graph(
        [node],
        "log_softmax",
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", "V"])],
        [helper.make_tensor_value_info("log_probs", TensorProto.FLOAT, ["B", "V"])],
    )
    return bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]).SerializeToString())


class GraphCache:
    """Exported (and quantised) graphs kept in ``folder`` between runs, by a key of the model
    (``model_key``), the graph's name and its settings: a process that starts again on the same
    model reads the very bytes the export gave before, so it decodes alike, without the export
    and the quantisation (most of a start-up). A folder that cannot be written is only not used."""

    def __init__(self, folder: Path, key: str) -> None:
        self.folder, self.key = folder, key

    def path(self, name: str, int8: bool) -> Path:
        digest = hashlib.blake2b(f"{self.key}:{name}:{OPSET}:{int8}".encode(), digest_size=16).hexdigest()
        return self.folder / f"{name}-{'int8' if int8 else 'fp32'}-{digest}.onnx"

    def read(self, name: str, int8: bool) -> bytes | None:
        try:
            return self.path(name, int8).read_bytes()
        except OSError:
            return None

    @contextmanager
    def exporting(self, name: str, int8: bool) -> Iterator[None]:
        """Held while this process exports the entry: a process that wants it meanwhile (a decode
        worker started beside this one, another test worker) waits, then reads what this one
        wrote instead of exporting it too. A lock file that cannot be made is done without."""
        try:
            lock = open(self.path(name, int8).with_suffix(".lock"), "a")  # noqa: SIM115 (held across the yield)
        except OSError:
            yield
            return
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

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

    def __init__(self, session: Any) -> None:
        self.session = session
        self.inputs = [i.name for i in session.get_inputs()]

    @classmethod
    def from_cache(cls, cache: GraphCache, name: str, int8: bool, threads: int) -> _Graph | None:
        """The graph ``name`` from ``cache`` on a session of its own; None when it is not
        there, or is there but unreadable (a damaged file, said in a warning)."""
        graph = cache.read(name, int8)
        if graph is None:
            return None
        try:
            return cls(_session(graph, threads))
        except Exception:
            logging.getLogger(__name__).warning("cached ONNX graph %s unreadable", cache.path(name, int8))
            return None

    @classmethod
    def build(
        cls, export: Callable[[], bytes], int8: bool, threads: int, cache: GraphCache | None, name: str
    ) -> _Graph:
        """The graph ``name`` from the cache, else exported (``export``), quantised with ``int8``
        and cached (a damaged cached file is replaced). An int8 graph is quantised from the
        cached fp32 graph when there is one: the very bytes an export would give, without it."""
        if cache is None:
            return cls(_session(_exported(export, int8), threads))
        if (cached := cls.from_cache(cache, name, int8, threads)) is not None:
            return cached
        with cache.exporting(name, int8):
            if (cached := cls.from_cache(cache, name, int8, threads)) is not None:  # another process's
                return cached
            graph = _quantised_cached(cache, name) if int8 else None
            if graph is None:
                graph = _exported(export, int8)
            cache.write(name, int8, graph)
        return cls(_session(graph, threads))

    def arrays(self, *args: np.ndarray) -> list[np.ndarray]:
        """The graph's outputs for ``args``, its inputs in order."""
        feed = {name: np.ascontiguousarray(a) for name, a in zip(self.inputs, args, strict=True)}
        return cast(list[np.ndarray], self.session.run(None, feed))


def _quantised_cached(cache: GraphCache, name: str) -> bytes | None:
    """The cached fp32 graph ``name`` quantised; None when there is none, or it is damaged."""
    fp32 = cache.read(name, False)
    if fp32 is None:
        return None
    try:
        return _quantised(fp32)
    except Exception:
        logging.getLogger(__name__).warning("cached ONNX graph %s unreadable", cache.path(name, False))
        return None


def _exported(export: Callable[[], bytes], int8: bool) -> bytes:
    graph = export()
    return _quantised(graph) if int8 else graph


def _built(
    exports: dict[str, Callable[[], bytes]], int8: bool, threads: int, cache: GraphCache | None, what: str
) -> dict[str, _Graph]:
    """Each graph from the cache, else exported (``_Graph.build``); the first export of a model
    says so, once it starts and once it is done, with its time: the only lines of a first run."""
    started: list[float] = []

    def timed(name: str) -> Callable[[], bytes]:
        def export() -> bytes:
            if not started:
                started.append(time.perf_counter())
                where = f"; kept in {cache.folder}" if cache is not None else ""
                log.info("ONNX: exporting the %s model's graphs (the first run only%s) ...", what, where)
            return exports[name]()

        return export

    graphs = {name: _Graph.build(timed(name), int8, threads, cache, name) for name in exports}
    if started:
        log.info("ONNX: the %s model's graphs exported in %.1f s", what, time.perf_counter() - started[0])
    return graphs


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
    """An engine that can be built from its cached graphs alone (``cached``)."""

    GRAPHS: ClassVar[tuple[str, ...]]

    def _init(self, cfg: ModelConfig, graphs: dict[str, _Graph]) -> None:
        raise NotImplementedError

    @classmethod
    def cached(
        cls: type[E], cfg: ModelConfig, key: str, cache_dir: Path, int8: bool = False, threads: int = 1
    ) -> E | None:
        """The engine from its cached graphs alone (no model, no PyTorch), or None when one of
        them is not in ``cache_dir`` under ``key`` or cannot be read (``_Graph.from_cache``)."""
        cache, graphs = GraphCache(cache_dir, key), {}
        for name in cls.GRAPHS:
            if (graph := _Graph.from_cache(cache, name, int8, threads)) is None:
                return None
            graphs[name] = graph
        engine = cls.__new__(cls)
        engine._init(cfg, graphs)
        return engine


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

    def __init__(
        self,
        model: CoupletTransformer,
        int8: bool = False,
        threads: int = 1,
        cache_dir: Path | None = None,
        key: str | None = None,
    ) -> None:
        """The engine of ``model``, its graphs exported (or read from ``cache_dir``, where they
        are kept between runs (``GraphCache``), under ``key``; None: ``onnx_export.model_key``)."""
        from model.decoding.onnx_export import exporter, model_key, transformer_specs

        cache = GraphCache(cache_dir, key or model_key(model)) if cache_dir is not None else None
        specs = transformer_specs(model)
        exports = {name: exporter(specs[name]) for name in TRANSFORMER_GRAPHS}
        self._init(
            model.cfg, _built(exports, int8, threads, cache, "reverse" if model.cfg.reverse else "main")
        )

    def _init(self, cfg: ModelConfig, graphs: dict[str, _Graph]) -> None:
        self.cfg = cfg
        self._encode, self._prepare, self._step, self._scored, self._states, self._head = (
            graphs[name] for name in TRANSFORMER_GRAPHS
        )
        self._log_softmax = _Graph(_session(_log_softmax_graph(), _threads(self._head)))

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

    def __init__(
        self,
        model: CoupletTagger,
        int8: bool = False,
        threads: int = 1,
        cache_dir: Path | None = None,
        key: str | None = None,
    ) -> None:
        from model.decoding.onnx_export import exporter, model_key, tagger_specs

        cache = GraphCache(cache_dir, key or model_key(model)) if cache_dir is not None else None
        exports = {name: exporter(spec) for name, spec in tagger_specs(model).items()}
        self._init(model.cfg, _built(exports, int8, threads, cache, "proposer"))

    def _init(self, cfg: ModelConfig, graphs: dict[str, _Graph]) -> None:
        self.cfg = cfg
        self.max_len = cfg.max_len
        self._tag = graphs["tag"]

    def logits(self, src: np.ndarray) -> np.ndarray:
        return self._tag.arrays(_unpadded(src))[0]
