"""Making a model's ONNX graphs (the PyTorch side of model/decoding/onnx_graphs.py): each from
the cache, else exported (model/export/onnx_export.py) and, for int8, quantised dynamically
(ONNX Runtime's ``quantize_dynamic``), then cached for the next run (``built``)."""

from __future__ import annotations

import logging
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from onnxruntime.quantization import QuantType, quantize_dynamic

from model.decoding.onnx_graphs import Graph, GraphCache, session

log = logging.getLogger(__name__)


def _quantised(graph: bytes) -> bytes:
    """``graph`` with its matrix products in int8 (ONNX Runtime's dynamic quantisation)."""
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


def build_graph(
    export: Callable[[], bytes], int8: bool, threads: int, cache: GraphCache | None, name: str
) -> Graph:
    """The graph ``name`` from the cache, else exported (``export``), quantised with ``int8``
    and cached (a damaged cached file is replaced). An int8 graph is quantised from the
    cached fp32 graph when there is one: the very bytes an export would give, without it."""
    if cache is None:
        return Graph(session(_exported(export, int8), threads))
    if (cached := Graph.from_cache(cache, name, int8, threads)) is not None:
        return cached
    with cache.exporting(name, int8):
        if (cached := Graph.from_cache(cache, name, int8, threads)) is not None:  # another process's
            return cached
        graph = _quantised_cached(cache, name) if int8 else None
        if graph is None:
            graph = _exported(export, int8)
        cache.write(name, int8, graph)
    return Graph(session(graph, threads))


def _quantised_cached(cache: GraphCache, name: str) -> bytes | None:
    """The cached fp32 graph ``name`` quantised; None when there is none, or it is damaged."""
    fp32 = cache.read(name, False)
    if fp32 is None:
        return None
    try:
        return _quantised(fp32)
    except Exception:
        log.warning("cached ONNX graph %s unreadable", cache.path(name, False))
        return None


def _exported(export: Callable[[], bytes], int8: bool) -> bytes:
    graph = export()
    return _quantised(graph) if int8 else graph


def built(
    exports: dict[str, Callable[[], bytes]], int8: bool, threads: int, cache: GraphCache | None, what: str
) -> dict[str, Graph]:
    """Each graph from the cache, else exported (``build_graph``); the first export of a model
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

    graphs = {name: build_graph(timed(name), int8, threads, cache, name) for name in exports}
    if started:
        log.info("ONNX: the %s model's graphs exported in %.1f s", what, time.perf_counter() - started[0])
    return graphs
