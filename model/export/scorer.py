"""The reranker's scorer in a bundle: ``scorer.safetensors`` and ``scorer_config.json``
(model/store/weights.py's format), its character table shared with ``model.safetensors``
(``shared_weights``: the scorer was trained on the model's table, frozen, so the bundle keeps
it once). ``add_scorer`` puts a trained scorer (model/training/rerank.py's file) into a bundle,
checked against the bundle's model; ``load_scorer`` reads it back (PyTorch); a decoder on ONNX
Runtime whose graph is cached needs neither (model/decoding/reranking.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from data.vocab import Vocab
from model.export.weights import read_model_tensors, save_model_files
from model.net.scorer import PairScorer, embed_sha256
from model.spec.config import ModelConfig
from model.store.layout import (
    SCORER_CONFIG,
    SCORER_WEIGHTS,
    VOCAB_FILE,
    WEIGHTS_FILE,
    BundleError,
    changed_copy,
    verify_bundle,
    write_manifest,
)
from model.store.weights import check_vocab, read_config

SHARED = ("embed.weight",)  # what the scorer takes from model.safetensors


def model_embedding(root: Path) -> torch.Tensor:
    """The bundle's model's character table (float32), read from ``model.safetensors``."""
    return read_model_tensors(root / WEIGHTS_FILE)[SHARED[0]].float()


def load_scorer(root: str | os.PathLike[str], vocab: Vocab, embed: torch.Tensor | None = None) -> PairScorer:
    """The bundle's scorer in eval mode, fp32, its shared table from ``model.safetensors`` (or
    ``embed``, already read); ValueError naming the file when it does not fit."""
    root = Path(root)
    config = read_config(root / SCORER_CONFIG)
    if config.get("kind") != "scorer":
        raise ValueError(f"{root / SCORER_CONFIG}: a reranker's scorer must be of kind 'scorer'")
    if set((config.get("shared_weights") or {}).values()) - {WEIGHTS_FILE}:
        raise ValueError(f"{root / SCORER_CONFIG}: the scorer may share tensors with {WEIGHTS_FILE} only")
    check_vocab(config, vocab, root / SCORER_CONFIG)
    scorer = PairScorer(ModelConfig.from_dict(config))
    state = {k: v.float() for k, v in read_model_tensors(root / SCORER_WEIGHTS).items()}
    state[SHARED[0]] = model_embedding(root) if embed is None else embed.float()
    try:
        scorer.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise ValueError(
            f"{root / SCORER_WEIGHTS}: does not fit {root / SCORER_CONFIG}: {' '.join(str(e).split())[:300]}"
        ) from e
    return scorer.eval()


def read_trained(path: Path) -> dict[str, Any]:
    """A trained scorer's file (model/training/rerank.py): its configuration, own weights,
    validation figures and the digest of the table it was trained on."""
    saved = torch.load(path, weights_only=True)
    missing = {"model_config", "state_dict", "valid", "embed_sha256"} - set(saved)
    if missing:
        raise ValueError(f"{path}: not a trained scorer (no {', '.join(sorted(missing))})")
    return dict(saved)


def trained_scorer(root: Path, trained: Path) -> PairScorer:
    """The scorer of a trained file on the bundle ``root``'s character table (eval mode), refused
    (``BundleError``) when it was trained on another table."""
    saved = read_trained(trained)
    embed = model_embedding(root)
    if saved["embed_sha256"] != embed_sha256(embed):
        raise BundleError(f"{trained}: trained on another character table than {root / WEIGHTS_FILE}'s")
    scorer = PairScorer(ModelConfig.from_dict(saved["model_config"]))
    scorer.load_state_dict({**saved["state_dict"], SHARED[0]: embed})
    return scorer.eval()


def add_scorer(
    root: str | os.PathLike[str],
    trained: str | os.PathLike[str],
    dtype: str = "float16",
    record: dict[str, Any] | None = None,
) -> Path:
    """Put the scorer of ``trained`` into the bundle ``root``, replacing its scorer if it has one:
    the bundle checked first, the scorer refused unless it was trained on the bundle's model's
    character table, ``SHA256SUMS`` rewritten, the folder swapped in with renames. Returns the
    scorer's weights file. ``record``: more for its configuration's training record (the weight
    table on validation lines)."""
    root = Path(root)
    verify_bundle(root)
    saved = read_trained(Path(trained))
    scorer = trained_scorer(root, Path(trained))
    vocab = Vocab.from_file(root / VOCAB_FILE)
    with changed_copy(root) as tmp:
        record = {"valid": saved["valid"], **saved.get("training", {}), **(record or {})}
        shared = dict.fromkeys(SHARED, WEIGHTS_FILE)
        save_model_files(
            scorer, vocab, tmp / SCORER_WEIGHTS, tmp / SCORER_CONFIG, VOCAB_FILE, record, shared, dtype
        )
        write_manifest(tmp)
        load_scorer(tmp, vocab, scorer.embed.weight)  # it reads back
    return root / SCORER_WEIGHTS
