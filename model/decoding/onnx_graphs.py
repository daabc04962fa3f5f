"""ONNX graphs on ONNX Runtime: a session per graph (``Graph``) and the cache of exported
graphs between runs (``GraphCache``). The engines (model/decoding/onnx_engine.py) and the
reranker's scorer (model/decoding/reranking.py) run on them; making them (the export, the
int8 quantisation, the cache filled) is model/export/graphs.py's, on the PyTorch side.

ONNX Runtime is imported where a session is made, not with this module: its import starts
threads, and the decode workers' forkserver, which imports the service, forks.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import numpy as np

from data.files import atomic_file, held_lock
from model.decoding.graph_keys import OPSET


def session(graph: bytes, threads: int) -> Any:
    import onnxruntime as ort  # here, not at the top: see the module's docstring

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # errors only
    return ort.InferenceSession(graph, so, providers=["CPUExecutionProvider"])


def session_threads(graph: Graph) -> int:
    """The intra-op threads of ``graph``'s session."""
    return int(graph.session.get_session_options().intra_op_num_threads)


def log_softmax_graph() -> bytes:
    """A graph of one LogSoftmax over the last axis of (B, V) float32: ONNX Runtime's vectorised
    exp normalises a step's logits about three times as fast as numpy's (docs/MEASUREMENTS.md)."""
    from onnx import TensorProto, helper  # half a second to import, for this graph alone

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
        with held_lock(self.path(name, int8).with_suffix(".lock")):
            yield

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


class Graph:
    """One exported module on ONNX Runtime: arrays in, arrays out."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.inputs = [i.name for i in session.get_inputs()]

    @classmethod
    def from_cache(cls, cache: GraphCache, name: str, int8: bool, threads: int) -> Graph | None:
        """The graph ``name`` from ``cache`` on a session of its own; None when it is not
        there, or is there but unreadable (a damaged file, said in a warning)."""
        graph = cache.read(name, int8)
        if graph is None:
            return None
        try:
            return cls(session(graph, threads))
        except Exception:
            logging.getLogger(__name__).warning("cached ONNX graph %s unreadable", cache.path(name, int8))
            return None

    def arrays(self, *args: np.ndarray) -> list[np.ndarray]:
        """The graph's outputs for ``args``, its inputs in order."""
        feed = {name: np.ascontiguousarray(a) for name, a in zip(self.inputs, args, strict=True)}
        return cast(list[np.ndarray], self.session.run(None, feed))
