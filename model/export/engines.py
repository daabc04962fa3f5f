"""PyTorch models as the search runs them: ``engine_of`` gives the engine of a model (eager,
an int8 copy, or its graphs exported to ONNX Runtime), ``torch_decoder`` a Decoder of PyTorch
models, ``reranker_of`` the reranker of a scorer. The Decoder itself (model/decoding/decoder.py)
takes engines only and never imports PyTorch: a decoder on cached graphs is built without it
(duilian/engine.py's ``build_decoder``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, overload

import numpy as np

from data.pairing import PairingTable
from data.vocab import Vocab
from model.decoding.blocked import BlockedWords
from model.decoding.decoder import Decoder
from model.decoding.onnx_engine import OnnxTagger, OnnxTransformer
from model.decoding.onnx_graphs import GraphCache
from model.decoding.options import RUNTIMES, Runtime
from model.decoding.reranking import DEFAULT_WEIGHT, SCORER_GRAPHS, Reranker
from model.export.graphs import built
from model.export.onnx_export import exporter, model_key, scorer_specs, tagger_specs, transformer_specs
from model.export.quantize import quantized
from model.export.torch_engine import wrap
from model.net.scorer import PairScorer
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer

Model = CoupletTransformer | CoupletTagger


@overload
def onnx_copy(
    model: CoupletTransformer,
    int8: bool = False,
    threads: int = 1,
    cache_dir: Path | None = None,
    key: str | None = None,
) -> OnnxTransformer: ...
@overload
def onnx_copy(
    model: CoupletTagger,
    int8: bool = False,
    threads: int = 1,
    cache_dir: Path | None = None,
    key: str | None = None,
) -> OnnxTagger: ...
def onnx_copy(
    model: Model, int8: bool = False, threads: int = 1, cache_dir: Path | None = None, key: str | None = None
) -> OnnxTransformer | OnnxTagger:
    """The ONNX engine of ``model``: its graphs exported, or read from ``cache_dir`` where they
    are kept between runs under ``key`` (None: ``onnx_export.model_key``, a digest of the model)."""
    cache = GraphCache(cache_dir, key or model_key(model)) if cache_dir is not None else None
    if isinstance(model, CoupletTagger):
        exports = {name: exporter(spec, cache_dir) for name, spec in tagger_specs(model).items()}
        return OnnxTagger(model.cfg, built(exports, int8, threads, cache, "proposer"))
    specs = transformer_specs(model)
    exports = {name: exporter(specs[name], cache_dir) for name in OnnxTransformer.GRAPHS}
    what = "reverse" if model.cfg.reverse else "main"
    return OnnxTransformer(model.cfg, built(exports, int8, threads, cache, what))


def engine_of(
    model: Model, int8: bool, runtime: Runtime, graph_cache: Path | None = None, key: str | None = None
) -> Any:
    """``model`` as the search runs it: on ONNX Runtime (one thread: a step is too small to
    split, docs/EXPERIMENTS.md §4), or eager PyTorch (an int8 copy with ``int8``) behind its
    array adapter (model/export/torch_engine.py)."""
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if runtime == "onnx":
        return onnx_copy(model, int8, cache_dir=graph_cache, key=key)
    return wrap(quantized(model) if int8 else model.eval())


def transposed_head(model: CoupletTransformer) -> np.ndarray:
    """The output layer's weight of an encoder-decoder, transposed (d, V): the shortlists' columns."""
    return np.ascontiguousarray(model.head.weight.detach().float().numpy().T)


def torch_decoder(
    model: Model,
    vocab: Vocab,
    int8: bool = False,
    proposer: CoupletTagger | None = None,
    runtime: Runtime = "torch",
    pairing: PairingTable | None = None,
    blocked: BlockedWords | None = None,
    graph_cache: Path | None = None,
    graph_keys: tuple[str | None, str | None] = (None, None),
    reranker: Reranker | None = None,
) -> Decoder:
    """The Decoder of PyTorch models: ``model`` and ``proposer`` as ``engine_of`` copies them for
    ``runtime`` (``torch``: eager; ``onnx``: their graphs, kept in ``graph_cache`` under
    ``graph_keys`` when given), ``int8`` copies where asked (docs/EXPERIMENTS.md §4); the rest as
    Decoder takes it."""
    engine, proposer_engine, head_t = engine_of(model, int8, runtime, graph_cache, graph_keys[0]), None, None
    if proposer is not None:
        if not isinstance(model, CoupletTransformer):
            raise ValueError("a proposer's candidates are rescored by an encoder-decoder model")
        proposer_engine = engine_of(proposer, int8, runtime, graph_cache, graph_keys[1])
        head_t = transposed_head(model)
    return Decoder(engine, vocab, proposer_engine, head_t, pairing, blocked, reranker)


def reranker_of(
    scorer: PairScorer,
    vocab: Vocab,
    cache_dir: Path | None = None,
    key: str | None = None,
    weight: float = DEFAULT_WEIGHT,
    threads: int = 1,
) -> Reranker:
    """The reranker of a PyTorch scorer: its graph from the cache under ``key`` (a digest of the
    scorer when None), else exported (and cached)."""
    exports = {n: exporter(s, cache_dir) for n, s in scorer_specs(scorer).items()}
    cache = None if cache_dir is None else GraphCache(cache_dir, key or model_key(scorer))
    graphs = built(exports, False, threads, cache, "reranker")
    return Reranker(graphs[SCORER_GRAPHS[0]], scorer.cfg, vocab, weight)
