"""How a bundle is decoded: ``Engine`` (int8 or not, on which runtime, where the ONNX graphs
are kept), and the decoder built from a bundle under it (``build_decoder``: from the cached
graphs alone when they are all there, without PyTorch; else from the models), with the words
the search may not complete and the bundle's reranker; ``set_decode_threads``, the thread
count a decoding process runs with (the command line's, the site's decode workers', the
benchmarks'). duilian/service.py's ``LoadedModel`` builds its decoders with them."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from data.sensitive import SensitiveFilter
from model.decoding.blocked import BlockedWords
from model.decoding.decoder import Decoder
from model.decoding.onnx_engine import OnnxTagger, OnnxTransformer
from model.decoding.options import Runtime
from model.decoding.reranking import Reranker
from model.store.bundle import (
    Bundle,
    decoder_graph_keys,
    head_weight_t,
    model_config,
    scorer_graph_key,
    scorer_weight,
)


@dataclass(frozen=True)
class Engine:
    """How a bundle is decoded: int8 copies of the models, on what (model.decoding.options.RUNTIMES),
    and where the ONNX graphs are kept between runs (None: exported anew at every start)."""

    int8: bool = False
    runtime: Runtime = "torch"
    graph_cache: Path | None = None


DEFAULT_ENGINE = Engine()  # eager PyTorch in fp32 (the site's default is SERVE_INT8 on SERVE_RUNTIME)


def blocked_words(bundle: Bundle, extra: SensitiveFilter | None) -> BlockedWords | None:
    """The words the search may not complete: the bundle's table and the extra list's."""
    tables = [t for t in (bundle.blocked,) if t is not None]
    if extra is not None and extra.words():
        tables.append(BlockedWords.from_words(extra.words(), bundle.vocab.pieces))
    if not tables:
        return None
    return tables[0] if len(tables) == 1 else tables[0].merged(tables[1])


def set_decode_threads(threads: int) -> Any:
    """Decoding's thread count in this process: the BLAS libraries' (numpy's OpenBLAS, which
    multiplies the fast mode's rescoring and the shortlist's rows; with a second thread it spun
    beside the first, doubling the fast mode's CPU for no shorter wait, and under load the
    decode workers' spinning threads took each other's cores), and PyTorch's when it is
    imported. ONNX Runtime's sessions take theirs when made (``Engine``'s graphs). The
    threadpoolctl limiter, whose ``restore_original_limits()`` undoes the BLAS part."""
    limiter = threadpool_limits(limits=threads, user_api="blas")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    return limiter


def build_decoder(
    bundle: Bundle,
    engine: Engine,
    blocked: BlockedWords | None,
    reverse: bool = False,
) -> Decoder:
    """The decoder of the bundle's model (``reverse``: its lower_to_upper model, without a
    proposer, on the pairing table swapped) as ``engine`` asks, with the bundle's reranker
    (never a reverse decoder's). On ONNX Runtime with a graph cache, the graphs are kept under
    keys of the bundle's files (``bundle.decoder_graph_keys``); when they are all there the
    decoder is built from them and the weights' few arrays it needs, without reading the
    PyTorch models (nor importing PyTorch): the command line's start and a decode worker's.
    Otherwise the models are read and the graphs exported (and cached)."""
    pairing = bundle.pairing if not reverse or bundle.pairing is None else bundle.pairing.swapped()
    role = "reverse" if reverse else "model"
    with_proposer = bundle.has_proposer and not reverse
    keys = decoder_graph_keys(bundle, reverse)
    reranker = None if reverse else cached_reranker(bundle, engine)
    if engine.runtime == "onnx" and engine.graph_cache is not None and keys[0] is not None:
        cache = engine.graph_cache
        model = OnnxTransformer.cached(model_config(bundle.path, role), keys[0], cache, engine.int8)
        proposer = None
        if with_proposer and keys[1] is not None:
            proposer = OnnxTagger.cached(model_config(bundle.path, "proposer"), keys[1], cache, engine.int8)
        if model is not None and (proposer is not None or not with_proposer):
            head_t = head_weight_t(bundle.path) if proposer is not None else None
            if reranker is not None or not bundle.has_scorer or reverse:
                return Decoder(model, bundle.vocab, proposer, head_t, pairing, blocked, reranker)
    # PyTorch only here: the bundle's models are read and their graphs exported (and cached)
    from model.export.models import decoder_from_models

    return decoder_from_models(
        bundle, engine.int8, engine.runtime, engine.graph_cache, pairing, blocked, reverse
    )


def cached_reranker(bundle: Bundle, engine: Engine) -> Reranker | None:
    """The bundle's reranker (model/decoding/reranking.py) from its cached graph, None when the
    bundle has no scorer or its graph is not cached (then ``build_decoder`` exports it)."""
    key = scorer_graph_key(bundle)
    if key is None or engine.graph_cache is None:
        return None
    cfg = model_config(bundle.path, "scorer")
    return Reranker.cached(cfg, key, engine.graph_cache, bundle.vocab, scorer_weight(bundle.path))
