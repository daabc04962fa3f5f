"""A bundle folder read: the models (on first use, or at once), the vocabulary, fingerprints,
known lower lines, tables and cards, checked against SHA256SUMS first (model/release/layout.py:
the files; model/release/export.py: writing one; ``python -m model.bundle``: its command line,
model/release/bundle_cli.py)."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from data.pairing import PairingTable
from data.sensitive import SensitiveFilter
from data.vocab import Vocab
from model.decoding.blocked import BLOCKED_FILE, BlockedWords
from model.decoding.graph_keys import files_key
from model.decoding.reranking import DEFAULT_WEIGHT
from model.net.config import ModelConfig
from model.release.fingerprint import FingerprintIndex, KnownLowers
from model.release.layout import (
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
from model.release.weights import (
    check_vocab,
    config_meta,
    count_parameters,
    dequantized,
    load_model_files,
    read_arrays,
    read_config,
    read_weights,
    shared_files,
)

if TYPE_CHECKING:  # (PyTorch is imported where a model is read: a bundle's other files, and a
    # decoder on ONNX Runtime whose graphs are cached, do without it)
    import torch

    from model.net.checkpoint import CoupletModel
    from model.net.scorer import PairScorer
    from model.net.tagger import CoupletTagger
    from model.net.transformer import CoupletTransformer
log = logging.getLogger(__name__)


@dataclass
class Bundle:
    """A loaded bundle. Its PyTorch models (``model``, ``proposer``, ``reverse``: the
    lower_to_upper model, 下联求上联) are read when ``load_bundle`` reads the bundle, or with
    ``models=False`` on first use: a decoder on ONNX Runtime whose graphs are cached never
    asks for them (``has_proposer``, ``has_reverse`` and ``has_scorer`` say what there is without
    reading it). The reranker's ``scorer`` is read on first use."""

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
    dtype: Any = None  # the models' torch dtype (None: float32)
    sums: dict[str, str] = field(default_factory=dict)  # the manifest's sums, checked at load
    _models: list[Any] = field(default_factory=list, repr=False)  # [model, proposer, reverse] once read
    _scorer: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _read_models(self) -> list[Any]:
        with self._lock:
            if not self._models:
                model, _, _, proposer = load_models(self.path, self.dtype)
                reverse = load_reverse(self.path, self.vocab, self.dtype, model)
                self._models.extend([model, proposer, reverse])
            return self._models

    @property
    def model(self) -> CoupletModel:
        return cast("CoupletModel", self._read_models()[0])

    @property
    def proposer(self) -> CoupletTagger | None:
        return cast("CoupletTagger | None", self._read_models()[1]) if self.has_proposer else None

    @property
    def reverse(self) -> CoupletTransformer | None:
        return cast("CoupletTransformer | None", self._read_models()[2]) if self.has_reverse else None

    @property
    def scorer(self) -> PairScorer | None:
        """The reranker's scorer (model/release/scorer.py), read on first use; None without one."""
        if not self.has_scorer:
            return None
        with self._lock:
            if self._scorer is None:
                from model.release.scorer import load_scorer

                self._scorer = load_scorer(self.path, self.vocab)
            return cast("PairScorer", self._scorer)

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


def _proposer_kind(kind: str, path: Path) -> None:
    if kind != "tagger":
        raise ValueError(f"{path}: a proposer must be an encoder-only tagger, not a {kind} model")


def load_models(
    root: str | os.PathLike[str], dtype: torch.dtype | None = None
) -> tuple[CoupletModel, Vocab, dict[str, Any], CoupletTagger | None]:
    """(model, vocabulary, meta, proposer or None) of the bundle ``root``, each model from its
    safetensors files; no manifest check."""
    import torch

    dtype = torch.float32 if dtype is None else dtype
    root = Path(root)
    vocab = bundle_vocab(root)
    model, meta = load_model_files(root / WEIGHTS_FILE, root / CONFIG_FILE, vocab, dtype)
    proposer: CoupletTagger | None = None
    if (root / PROPOSER_WEIGHTS).is_file():
        _proposer_kind(read_config(root / PROPOSER_CONFIG)["kind"], root / PROPOSER_CONFIG)
        loaded, _ = load_model_files(root / PROPOSER_WEIGHTS, root / PROPOSER_CONFIG, vocab, dtype)
        proposer = cast("CoupletTagger", loaded)
    return model, vocab, meta, proposer


def load_reverse(
    root: Path, vocab: Vocab, dtype: torch.dtype | None = None, model: CoupletModel | None = None
) -> CoupletTransformer | None:
    """The bundle's lower_to_upper model, or None when it has none. ``model``: the bundle's
    model already loaded, whose tensors the reverse model shares (``model.safetensors`` is
    then not read a second time)."""
    if not (root / REVERSE_WEIGHTS).is_file():
        return None
    config = read_config(root / REVERSE_CONFIG)
    _reverse_kind(config, root / REVERSE_CONFIG)
    shared = None if model is None else {WEIGHTS_FILE: model.state_dict()}
    loaded, _ = load_model_files(root / REVERSE_WEIGHTS, root / REVERSE_CONFIG, vocab, dtype, shared)
    return cast("CoupletTransformer", loaded)


def _reverse_kind(config: dict[str, Any], path: Path) -> None:
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
    return files_key(f"{role}:{bundle.dtype or 'float32'}:{traced}", paths, bundle.sums)


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
    dequantized(read_weights(root / WEIGHTS_FILE), root / WEIGHTS_FILE)
    if (root / PROPOSER_WEIGHTS).is_file():
        config = read_config(root / PROPOSER_CONFIG)
        _proposer_kind(config["kind"], root / PROPOSER_CONFIG)
        check_vocab(config, vocab, root / PROPOSER_CONFIG)
        dequantized(read_weights(root / PROPOSER_WEIGHTS), root / PROPOSER_WEIGHTS)
    if (root / REVERSE_WEIGHTS).is_file():
        config = read_config(root / REVERSE_CONFIG)
        _reverse_kind(config, root / REVERSE_CONFIG)
        check_vocab(config, vocab, root / REVERSE_CONFIG)
        dequantized(read_weights(root / REVERSE_WEIGHTS), root / REVERSE_WEIGHTS)
    if (root / SCORER_WEIGHTS).is_file():
        config = read_config(root / SCORER_CONFIG)
        check_vocab(config, vocab, root / SCORER_CONFIG)
        dequantized(read_weights(root / SCORER_WEIGHTS), root / SCORER_WEIGHTS)


def model_meta(root: str | os.PathLike[str], proposer: bool = False, reverse: bool = False) -> dict[str, Any]:
    """The meta of the bundle's model (or its proposer, or its reverse model) without its
    weights: ``model_config``, the training record (``step``, ``best_valid``, ``preset`` ...)
    and ``n_params`` (tied weights counted once, shared ones too); {} when there is no such model."""
    root = Path(root)
    weights, config = ROLE_FILES["reverse" if reverse else "proposer" if proposer else "model"]
    if not (root / weights).is_file():
        return {}
    cfg = read_config(root / config)
    return {**config_meta(cfg), "n_params": count_parameters(cfg)}


def load_bundle(
    path: str | os.PathLike[str], dtype: torch.dtype | None = None, lazy: bool = False, models: bool = True
) -> Bundle:
    """Load a bundle folder, its files checked against its manifest first; raises
    ``FileNotFoundError`` naming what is missing, ``BundleError`` naming a damaged file.
    ``lazy``: the known lower lines are read on the first lookup of a training line, and then
    only the block that holds it, not now (the command line's start; a server reads them all
    at start, not in a request). ``models=False``: the PyTorch models are read on first use
    (``Bundle.model``), not now; a decoder on ONNX Runtime whose graphs are cached needs none."""
    root = Path(path)
    if not has_model(root):
        raise FileNotFoundError(f"{missing_model(root)}; run `make train`")
    if old_format_files(root):  # a bundle half converted: its known lines would go unread
        raise BundleError(missing_model(root))
    sums = verified_sums(root) or {}
    read: list[Any] = []
    if models:
        model, vocab, meta, proposer = load_models(root, dtype)
        read = [model, proposer, load_reverse(root, vocab, dtype, model)]
    else:
        vocab = bundle_vocab(root)
        meta = config_meta(read_config(root / CONFIG_FILE))
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
        dtype=dtype,
        sums=sums,
        _models=read,
    )
