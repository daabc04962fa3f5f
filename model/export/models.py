"""A bundle's models read into PyTorch (model/store/bundle.py reads the rest without it): for a
decoder whose ONNX graphs are not cached yet (``decoder_from_models``), and to evaluate, export
or train on them. Read once and kept with the bundle (``Bundle.loaded``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch

from data.pairing import PairingTable
from data.vocab import Vocab
from model.decoding.blocked import BlockedWords
from model.decoding.decoder import Decoder
from model.decoding.options import Runtime
from model.export.engines import reranker_of, torch_decoder
from model.export.scorer import load_scorer
from model.export.weights import load_model_files
from model.net.checkpoint import CoupletModel
from model.net.scorer import PairScorer
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer
from model.store.bundle import (
    Bundle,
    bundle_vocab,
    decoder_graph_keys,
    proposer_kind,
    read_config,
    reverse_kind,
    scorer_graph_key,
    scorer_weight,
)
from model.store.layout import (
    CONFIG_FILE,
    PROPOSER_CONFIG,
    PROPOSER_WEIGHTS,
    REVERSE_CONFIG,
    REVERSE_WEIGHTS,
    WEIGHTS_FILE,
)


@dataclass(frozen=True)
class Models:
    """A bundle's couplet models in PyTorch: its model, and its proposer and reverse
    (lower_to_upper, 下联求上联) model where it has them."""

    model: CoupletModel
    proposer: CoupletTagger | None
    reverse: CoupletTransformer | None


def load_models(
    root: str | os.PathLike[str], dtype: torch.dtype = torch.float32
) -> tuple[CoupletModel, Vocab, CoupletTagger | None]:
    """(model, vocabulary, proposer or None) of the bundle ``root``, each model from its
    safetensors files; no manifest check."""
    root = Path(root)
    vocab = bundle_vocab(root)
    model, _ = load_model_files(root / WEIGHTS_FILE, root / CONFIG_FILE, vocab, dtype)
    proposer: CoupletTagger | None = None
    if (root / PROPOSER_WEIGHTS).is_file():
        proposer_kind(read_config(root / PROPOSER_CONFIG)["kind"], root / PROPOSER_CONFIG)
        loaded, _ = load_model_files(root / PROPOSER_WEIGHTS, root / PROPOSER_CONFIG, vocab, dtype)
        proposer = cast("CoupletTagger", loaded)
    return model, vocab, proposer


def load_reverse(
    root: Path, vocab: Vocab, dtype: torch.dtype = torch.float32, model: CoupletModel | None = None
) -> CoupletTransformer | None:
    """The bundle's lower_to_upper model, or None when it has none. ``model``: the bundle's
    model already loaded, whose tensors the reverse model shares (``model.safetensors`` is
    then not read a second time)."""
    if not (root / REVERSE_WEIGHTS).is_file():
        return None
    config = read_config(root / REVERSE_CONFIG)
    reverse_kind(config, root / REVERSE_CONFIG)
    shared = None if model is None else {WEIGHTS_FILE: model.state_dict()}
    loaded, _ = load_model_files(root / REVERSE_WEIGHTS, root / REVERSE_CONFIG, vocab, dtype, shared)
    return cast("CoupletTransformer", loaded)


def models_of(bundle: Bundle) -> Models:
    """The bundle's couplet models in PyTorch (fp32, eval mode), read on the first call."""
    with bundle.lock:
        if "models" not in bundle.loaded:
            model, _, proposer = load_models(bundle.path)
            reverse = load_reverse(bundle.path, bundle.vocab, model=model)
            bundle.loaded["models"] = Models(model, proposer, reverse)
        return cast(Models, bundle.loaded["models"])


def scorer_of(bundle: Bundle) -> PairScorer | None:
    """The bundle's reranker's scorer (model/export/scorer.py), read on the first call; None
    without one."""
    if not bundle.has_scorer:
        return None
    with bundle.lock:
        if "scorer" not in bundle.loaded:
            bundle.loaded["scorer"] = load_scorer(bundle.path, bundle.vocab)
        return cast(PairScorer, bundle.loaded["scorer"])


def decoder_from_models(
    bundle: Bundle,
    int8: bool,
    runtime: Runtime,
    graph_cache: Path | None,
    pairing: PairingTable | None,
    blocked: BlockedWords | None,
    reverse: bool = False,
) -> Decoder:
    """The decoder of the bundle's model (``reverse``: its lower_to_upper model, without a
    proposer) from its PyTorch models, their graphs exported where they are not cached (under
    the keys of the bundle's files, ``decoder_graph_keys``), with the bundle's reranker (never a
    reverse decoder's)."""
    models = models_of(bundle)
    model = models.reverse if reverse else models.model
    if model is None:
        raise ValueError(f"{bundle.path}: no reverse model")
    scorer = None if reverse else scorer_of(bundle)
    reranker = None
    if scorer is not None:
        weight = scorer_weight(bundle.path)
        reranker = reranker_of(scorer, bundle.vocab, graph_cache, scorer_graph_key(bundle), weight)
    return torch_decoder(
        model,
        bundle.vocab,
        int8=int8,
        proposer=None if reverse else models.proposer,
        runtime=runtime,
        pairing=pairing,
        blocked=blocked,
        graph_cache=graph_cache,
        graph_keys=decoder_graph_keys(bundle, reverse),
        reranker=reranker,
    )
