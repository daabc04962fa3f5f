"""A bundle folder read without PyTorch: the vocabulary, fingerprints, known lower lines,
tables, cards and the models' configurations, checked against SHA256SUMS first
(model/store/layout.py: the files; model/export/models.py: its models read into PyTorch;
model/release/export.py: writing one; ``python -m model.bundle``: its command line,
model/release/bundle_cli.py)."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from data.pairing import PairingTable
from data.sensitive import SensitiveFilter
from data.vocab import Vocab
from model.decoding.blocked import BLOCKED_FILE, BlockedWords
from model.decoding.graph_keys import files_key
from model.decoding.reranking import DEFAULT_WEIGHT
from model.spec.config import ModelConfig
from model.store.fingerprint import FingerprintIndex, KnownLowers
from model.store.layout import (
    CONFIG_FILE,
    DATA_CARD,
    EVAL_FILE,
    FINGERPRINTS_FILE,
    MODEL_CARD,
    PAIRING_FILE,
    PROPOSER_CONFIG,
    PROPOSER_WEIGHTS,
    REVERSE_CONFIG,
    REVERSE_WEIGHTS,
    ROLE_FILES,
    SCORER_CONFIG,
    SCORER_WEIGHTS,
    SENSITIVE_FILE,
    VOCAB_FILE,
    WEIGHTS_FILE,
    BundleError,
    has_model,
    known_file,
    missing_model,
    old_format_files,
    verified_sums,
)
from model.store.weights import (
    check_vocab,
    config_meta,
    count_parameters,
    read_arrays,
    read_config,
    read_model_arrays,
    shared_files,
)

log = logging.getLogger(__name__)


@dataclass
class Bundle:
    """A loaded bundle, without its models' weights: ``has_proposer``, ``has_reverse`` and
    ``has_scorer`` say which models it holds; model/export/models.py reads them into PyTorch
    (kept in ``loaded``) when a decoder's graphs are not cached, or to train and evaluate."""

    path: Path
    vocab: Vocab
    meta: dict[str, Any]
    fingerprints: FingerprintIndex
    sensitive_hashes: np.ndarray
    model_card: str = ""
    data_card: str = ""
    eval: dict[str, Any] = field(default_factory=dict)
    known: KnownLowers | None = None
    pairing: PairingTable | None = None
    blocked: BlockedWords | None = None
    has_proposer: bool = False
    has_reverse: bool = False
    has_scorer: bool = False
    sums: dict[str, str] = field(default_factory=dict)  # the manifest's sums, checked at load
    loaded: dict[str, Any] = field(default_factory=dict, repr=False)  # its PyTorch models, once read
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def in_training_data(self, upper: str) -> bool:
        return self.fingerprints.contains(upper)

    def known_lowers(self, upper: str) -> list[str]:
        """The lower lines ``upper`` has in the training pairs (none when the bundle has no
        known_lowers file)."""
        return self.known.lowers(upper) if self.known is not None else []

    def sensitive_filter(self, allow: Iterable[str] = ()) -> Any:
        """``data.sensitive.SensitiveFilter`` built from the stored hashes, checking substrings
        as long as the longest hashed word (up to 8 characters in bundles that do not say)."""
        max_len = int(self.meta.get("sensitive_max_len") or 8)
        return SensitiveFilter.from_hashes(self.sensitive_hashes, allow=allow, max_len=max_len)


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def bundle_vocab(root: Path) -> Vocab:
    """The bundle's vocabulary: ``spm.model``."""
    path = root / VOCAB_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (the vocabulary of {root / WEIGHTS_FILE})")
    try:
        return Vocab.from_file(path)
    except (RuntimeError, ValueError, OSError) as e:
        raise BundleError(f"{path}: not a sentencepiece model ({' '.join(str(e).split())[:200]})") from e


def proposer_kind(kind: str, path: Path) -> None:
    if kind != "tagger":
        raise ValueError(f"{path}: a proposer must be an encoder-only tagger, not a {kind} model")


def reverse_kind(config: dict[str, Any], path: Path) -> None:
    if config.get("kind") != "seq2seq" or config.get("direction") != "lower_to_upper":
        raise ValueError(f"{path}: the reverse model must be a lower_to_upper encoder-decoder")
    if set((config.get("shared_weights") or {}).values()) - {WEIGHTS_FILE}:
        raise ValueError(f"{path}: the reverse model may share tensors with {WEIGHTS_FILE} only")


def graph_key(bundle: Bundle, role: str) -> str | None:
    """The key under which the ONNX graphs of the bundle's model ``role`` (``model``,
    ``proposer``, ``reverse``) are cached (``onnx_engine.files_key``): a digest of its weights
    (and of those it shares tensors with), its configuration without the training record, the
    traced code and the versions, with no PyTorch;
    None for an old bundle (its models are keyed by their weights in memory). A file's digest
    is its sum in the manifest, checked when the bundle loaded, so no file is read twice."""
    weights, config = ROLE_FILES[role]
    settings = read_config(bundle.path / config)
    shared = sorted(shared_files(settings, bundle.path / config))
    paths = [bundle.path / weights, *(bundle.path / name for name in shared)]
    # (step and version are not traced: the same weights released again reuse their graphs)
    traced = json.dumps({k: v for k, v in settings.items() if k != "training"}, sort_keys=True)
    return files_key(f"{role}:float32:{traced}", paths, bundle.sums)


def scorer_weight(root: Path) -> float:
    """The weight of the bundle's reranker in a candidate's rank (its scorer's training record:
    the weight chosen on validation lines; ``reranking.DEFAULT_WEIGHT`` where it names none)."""
    record = read_config(root / SCORER_CONFIG).get("training") or {}
    return float(record.get("weight", DEFAULT_WEIGHT))


def scorer_graph_key(bundle: Bundle) -> str | None:
    """The graph key of the bundle's reranker (``graph_key``), None when it has none."""
    return graph_key(bundle, "scorer") if bundle.has_scorer else None


def decoder_graph_keys(bundle: Bundle, reverse: bool = False) -> tuple[str | None, str | None]:
    """The graph keys of a decoder of the bundle (``graph_key``): its model's (``reverse``: its
    reverse model's) and its proposer's (None where the decoder has none: a reverse one never)."""
    proposer = graph_key(bundle, "proposer") if bundle.has_proposer and not reverse else None
    return graph_key(bundle, "reverse" if reverse else "model"), proposer


def model_config(root: Path, role: str) -> ModelConfig:
    """The configuration of the bundle's model ``role``, from its config file alone."""
    return ModelConfig.from_dict(read_config(root / ROLE_FILES[role][1]))


def head_weight_t(root: Path) -> np.ndarray:
    """The bundle's model's output layer's weight, transposed (d, V), in float32, read from
    ``model.safetensors`` without PyTorch (tied to the embedding: stored once, under its name)."""
    tied = read_config(root / CONFIG_FILE).get("tied_weights") or {}
    name = tied.get("head.weight", "head.weight")
    return np.ascontiguousarray(read_arrays(root / WEIGHTS_FILE, [name])[name].T)


def check_models(root: str | os.PathLike[str]) -> None:
    """Read the bundle's models as ``load_bundle`` will, without building them: their files
    load and match their sums, the configurations name the vocabulary, and the proposer is a
    tagger on it (``python -m serve`` checks this before it starts)."""
    root = Path(root)
    vocab = bundle_vocab(root)
    check_vocab(read_config(root / CONFIG_FILE), vocab, root / CONFIG_FILE)
    read_model_arrays(root / WEIGHTS_FILE)
    if (root / PROPOSER_WEIGHTS).is_file():
        config = read_config(root / PROPOSER_CONFIG)
        proposer_kind(config["kind"], root / PROPOSER_CONFIG)
        check_vocab(config, vocab, root / PROPOSER_CONFIG)
        read_model_arrays(root / PROPOSER_WEIGHTS)
    if (root / REVERSE_WEIGHTS).is_file():
        config = read_config(root / REVERSE_CONFIG)
        reverse_kind(config, root / REVERSE_CONFIG)
        check_vocab(config, vocab, root / REVERSE_CONFIG)
        read_model_arrays(root / REVERSE_WEIGHTS)
    if (root / SCORER_WEIGHTS).is_file():
        config = read_config(root / SCORER_CONFIG)
        check_vocab(config, vocab, root / SCORER_CONFIG)
        read_model_arrays(root / SCORER_WEIGHTS)


def model_meta(root: str | os.PathLike[str], proposer: bool = False, reverse: bool = False) -> dict[str, Any]:
    """The meta of the bundle's model (or its proposer, or its reverse model) without its
    weights: ``model_config``, the training record (``step``, ``best_valid``, ``preset`` ...)
    and ``n_params`` (tied weights counted once, shared ones too); {} when there is no such model."""
    root = Path(root)
    weights, config = ROLE_FILES["reverse" if reverse else "proposer" if proposer else "model"]
    if not (root / weights).is_file():
        return {}
    cfg = read_config(root / config)
    return {**config_meta(cfg), "n_params": count_parameters(cfg, root / config)}


def load_bundle(path: str | os.PathLike[str], lazy: bool = False) -> Bundle:
    """Load a bundle folder, its files checked against its manifest first; raises
    ``FileNotFoundError`` naming what is missing, ``BundleError`` naming a damaged file.
    ``lazy``: the known lower lines are read on the first lookup of a training line, and then
    only the block that holds it, not now (the command line's start; a server reads them all
    at start, not in a request). Its models' weights are read by whoever needs them
    (model/export/models.py; a decoder on ONNX Runtime whose graphs are cached needs none)."""
    root = Path(path)
    if not has_model(root):
        raise FileNotFoundError(f"{missing_model(root)}; run `make train`")
    if old_format_files(root):  # a bundle half converted: its known lines would go unread
        raise BundleError(missing_model(root))
    sums = verified_sums(root) or {}
    vocab = bundle_vocab(root)
    config = read_config(root / CONFIG_FILE)
    check_vocab(config, vocab, root / CONFIG_FILE)
    meta = config_meta(config)
    fp_path, sens_path = root / FINGERPRINTS_FILE, root / SENSITIVE_FILE
    fps = FingerprintIndex.load(fp_path) if fp_path.exists() else FingerprintIndex(np.zeros(0, np.uint64))
    sens = np.load(sens_path, allow_pickle=False) if sens_path.exists() else np.zeros(0, np.uint64)
    ev = json.loads(_read_text(root / EVAL_FILE) or "{}")
    known_path = known_file(root)
    known = KnownLowers.load(fps, known_path, lazy) if known_path is not None else None
    pairing = PairingTable.load(root / PAIRING_FILE) if (root / PAIRING_FILE).is_file() else None
    blocked = BlockedWords.load(root / BLOCKED_FILE) if (root / BLOCKED_FILE).is_file() else None
    if blocked is not None and blocked.vocab_size != len(vocab):
        raise ValueError(
            f"{root / BLOCKED_FILE} is for a vocabulary of {blocked.vocab_size}, not {len(vocab)}"
        )
    return Bundle(
        root,
        vocab,
        meta,
        fps,
        sens,
        _read_text(root / MODEL_CARD),
        _read_text(root / DATA_CARD),
        ev,
        known,
        pairing,
        blocked,
        has_proposer=(root / PROPOSER_WEIGHTS).is_file(),
        has_reverse=(root / REVERSE_WEIGHTS).is_file(),
        has_scorer=(root / SCORER_WEIGHTS).is_file(),
        sums=sums,
    )
