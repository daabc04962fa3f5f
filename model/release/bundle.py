"""The model bundle that `make serve` loads: model, vocabulary, fingerprints, cards, figures.

Layout of a bundle folder (the models as a Hugging Face model folder holds them, model/release/weights.py)::

    model.safetensors fp16 weights of the encoder-decoder, the tied embedding stored once
    config.json       its configuration (``ModelConfig``), the tied keys, and the training
                      record (step, best_valid, preset, ``sensitive_max_len``)
    spm.model         the sentencepiece vocabulary both models read (pad=0, unk=1, bos=2, eos=3)
    proposer.safetensors, proposer_config.json
                      optional: an encoder-only proposer (model/net/tagger.py), fp16, same vocabulary
    reverse.safetensors, reverse_config.json
                      optional: the lower_to_upper model (下联求上联), an encoder-decoder trained on the
                      same pairs with the direction swapped; it shares model.safetensors's character
                      embeddings (``shared_weights``), so it stores only its layers
    fingerprints.npy  sorted uint64 fingerprints of the normalised training upper lines
    banners.npz       optional: the 横批 phrases and character vectors (data/banners.py), copied
                      from the data stage's folder; corpus text, AGPL-3.0 like the model
    pairing.npz       optional: how well characters pair at one position, counted from the
                      training pairs (data/pairing.py); the decoder adds it to its scores
    known_lowers.blocks  optional: the training pairs' lower lines, one record per fingerprint
                      (model.release.fingerprint.KnownLowers), so a fresh clone shows a known couplet's
                      lower lines without the corpus; corpus text, AGPL-3.0 like the model. In
                      blocks compressed one by one, so a lookup decompresses one block; bundles
                      made before blocks hold ``known_lowers.txt.xz`` instead, one lzma stream that
                      a lookup decompresses whole, still read (``--convert-known`` rewrites it)
    blocked.npz       optional: the sensitive words as the search's table (model/decoding/blocked.py:
                      keys of each word's head, ids of its last character; no text), so
                      that no candidate completes a listed word
    sensitive.npy     hashed sensitive words (``data.sensitive.hash_words``); the longest
                      word's length is ``sensitive_max_len`` in config.json's training record
    MODEL_CARD.md, DATA_CARD.md, eval.json
    data_report.json  the data stage's counts for the data the model was trained on (its
                      report.json without the example pairs), so a card written later, after
                      `make data` has moved on, still describes this model's data
    SHA256SUMS        the sha256 of each payload file above (``PAYLOAD_FILES``: the weights,
                      configurations, vocabulary and tables the server computes with; the cards,
                      eval.json and data_report.json are documents, rewritten by ``python -m
                      model.card``), ``sha256sum`` format

Bundles made before safetensors hold ``model.pt`` and ``proposer.pt`` instead (checkpoints
with fp16 weights and the vocabulary inside, model/net/checkpoint.py): they still load, each
model from its ``.pt`` file when its ``.safetensors`` file is not there, and ``python -m
model.release.bundle --convert DIR`` turns such a bundle into the new layout (the weights
bit for bit; checked before the old files go).

``export_bundle`` writes SHA256SUMS last; ``load_bundle`` (so the server's start-up and its
reload) checks every file it lists first and refuses the bundle (``BundleError``, one line
naming the file) when one differs or is missing, or when a payload file is there but not
listed. A bundle without SHA256SUMS (made before sums) loads with a warning. After replacing a
bundle's files by hand, write the sums again::

    python -m model.release.bundle --write-manifest models/default
    python -m model.release.bundle --check models/default  # or: sha256sum -c SHA256SUMS in it
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from data.banners import BANNERS_FILE
from data.files import atomic_file
from data.pairing import PairingTable
from data.sensitive import SensitiveFilter
from data.vocab import Vocab
from model.decoding.blocked import BLOCKED_FILE, BlockedWords
from model.decoding.graph_keys import files_key
from model.net.config import ModelConfig
from model.release.fingerprint import FingerprintIndex, KnownLowers
from model.release.weights import (
    check_vocab,
    config_meta,
    count_parameters,
    file_names,
    load_model_files,
    read_arrays,
    read_config,
    read_weights,
    same_weights,
    save_model_files,
    shared_files,
)

WEIGHTS_FILE, CONFIG_FILE = file_names("model")  # model.safetensors, config.json
PROPOSER_WEIGHTS, PROPOSER_CONFIG = file_names("proposer")  # proposer.safetensors, proposer_config.json
REVERSE_WEIGHTS, REVERSE_CONFIG = file_names("reverse")  # reverse.safetensors, reverse_config.json
SHARED_WITH_MAIN = ("embed.weight",)  # the reverse model's tensors that model.safetensors holds
VOCAB_FILE = "spm.model"
# bundles made before safetensors: checkpoints (model/net/checkpoint.py), still read
MODEL_FILE, PROPOSER_FILE = "model.pt", "proposer.pt"
LEGACY_FILES = (MODEL_FILE, PROPOSER_FILE)
FINGERPRINTS_FILE, SENSITIVE_FILE = "fingerprints.npy", "sensitive.npy"
KNOWN_FILE = "known_lowers.blocks"
OLD_KNOWN_FILE = "known_lowers.txt.xz"  # bundles made before blocks: one lzma stream, still read
PAIRING_FILE = "pairing.npz"
MODEL_CARD, DATA_CARD, EVAL_FILE = "MODEL_CARD.md", "DATA_CARD.md", "eval.json"
DATA_REPORT = "data_report.json"
MANIFEST_FILE = "SHA256SUMS"
# the files whose bytes the server computes with, listed in the manifest (a new one belongs here:
# tests/model/release/test_checkpoint_bundle.py checks that export writes nothing else but DOC_FILES)
PAYLOAD_FILES = (
    WEIGHTS_FILE, CONFIG_FILE, VOCAB_FILE, PROPOSER_WEIGHTS, PROPOSER_CONFIG, REVERSE_WEIGHTS, REVERSE_CONFIG,
    *LEGACY_FILES,
    FINGERPRINTS_FILE, SENSITIVE_FILE, KNOWN_FILE, OLD_KNOWN_FILE, PAIRING_FILE, BANNERS_FILE, BLOCKED_FILE,
)  # fmt: skip
DOC_FILES = (MODEL_CARD, DATA_CARD, EVAL_FILE, DATA_REPORT)

if TYPE_CHECKING:  # (PyTorch is imported where a model is read or written: a bundle's other
    # files, and a decoder on ONNX Runtime whose graphs are cached, do without it)
    import torch

    from model.net.checkpoint import CoupletModel
    from model.net.tagger import CoupletTagger
    from model.net.transformer import CoupletTransformer
log = logging.getLogger(__name__)
# report.json's parts that quote corpus lines: a bundle carries counts, never corpus text
REPORT_EXAMPLES = ("sensitive_examples", "sensitive_sample_hits", "dedup_examples")


def data_counts(report: dict[str, Any]) -> dict[str, Any]:
    """The data stage's ``report`` without the parts that quote corpus lines."""
    return {k: v for k, v in report.items() if k not in REPORT_EXAMPLES}


@dataclass
class Bundle:
    """A loaded bundle. Its PyTorch models (``model``, ``proposer``, ``reverse``: the
    lower_to_upper model, 下联求上联) are read when ``load_bundle`` reads the bundle, or with
    ``models=False`` on first use: a decoder on ONNX Runtime whose graphs are cached never
    asks for them (``has_proposer`` and ``has_reverse`` say what there is without reading it)."""

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
    dtype: Any = None  # the models' torch dtype (None: float32)
    sums: dict[str, str] = field(default_factory=dict)  # the manifest's sums, checked at load
    _models: list[Any] = field(default_factory=list, repr=False)  # [model, proposer, reverse] once read
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _read_models(self) -> list[Any]:
        with self._lock:
            if not self._models:
                model, _, _, proposer = load_models(self.path, self.dtype)
                legacy = is_legacy(self.path)
                reverse = None if legacy else load_reverse(self.path, self.vocab, self.dtype, model)
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


class BundleError(ValueError):
    """A bundle whose files do not match its manifest (the message names the file)."""


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(root: str | os.PathLike[str]) -> Path:
    """Write ``root/SHA256SUMS``: the sha256 of each payload file there, sorted by name,
    atomically."""
    root = Path(root)
    names = sorted(name for name in PAYLOAD_FILES if (root / name).is_file())
    text = "".join(f"{file_sha256(root / name)}  {name}\n" for name in names)
    with atomic_file(root / MANIFEST_FILE, "w", encoding="utf-8") as f:
        f.write(text)
    return root / MANIFEST_FILE


def read_manifest(root: Path) -> dict[str, str] | None:
    """{file name: sha256} from ``root/SHA256SUMS``, None when there is none."""
    path = root / MANIFEST_FILE
    if not path.is_file():
        return None
    sums: dict[str, str] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = re.fullmatch(r"([0-9a-f]{64}) [ *]([^/]+)", line)  # sha256sum's text and binary forms
        if m is None or m[2].startswith("."):
            raise BundleError(f"{path}: line {n} is not '<sha256>  <file name>'")
        sums[m[2]] = m[1]
    return sums


def verify_bundle(root: str | os.PathLike[str]) -> bool:
    """Check every file ``root/SHA256SUMS`` lists; ``BundleError`` naming the first file that
    differs or is missing, or a payload file that is there but not listed. False (and a logged
    warning) when the bundle has no manifest, True when it was checked."""
    return verified_sums(root) is not None


def verified_sums(root: str | os.PathLike[str]) -> dict[str, str] | None:
    """``verify_bundle``, giving the sums it checked ({file name: sha256}), or None when the
    bundle has no manifest."""
    root = Path(root)
    sums = read_manifest(root)
    if sums is None:
        log.warning(
            "%s has no %s: its files are not verified (python -m model.release.bundle --write-manifest %s)",
            root, MANIFEST_FILE, root,
        )  # fmt: skip
        return None
    for name in PAYLOAD_FILES:
        if name not in sums and (root / name).exists():
            raise BundleError(f"{root / name}: not listed in {MANIFEST_FILE}, so it cannot be verified")
    for name, want in sums.items():
        path = root / name
        if not path.is_file():
            raise BundleError(f"{path}: listed in {MANIFEST_FILE} but missing")
        got = file_sha256(path)
        if got != want:
            raise BundleError(
                f"{path}: damaged or replaced: its sha256 is {got[:16]}..., "
                f"{MANIFEST_FILE} says {want[:16]}..."
            )
    return sums


def _save_npy(path: Path, arr: np.ndarray) -> None:
    with open(path, "wb") as f:
        np.save(f, arr, allow_pickle=False)


def export_bundle(
    out_dir: str | os.PathLike[str],
    model: CoupletModel,
    vocab: Vocab,
    *,
    proposer: CoupletTagger | None = None,
    proposer_meta: dict[str, Any] | None = None,
    reverse: CoupletModel | None = None,
    reverse_meta: dict[str, Any] | None = None,
    train_uppers: Iterable[str] = (),
    train_pairs: Iterable[tuple[str, str]] | None = None,
    pairing: PairingTable | None = None,
    banners: Path | None = None,
    sensitive_hashes: np.ndarray | None = None,
    sensitive_max_len: int | None = None,
    blocked: BlockedWords | None = None,
    model_card: str = "",
    data_card: str = "",
    data_report: dict[str, Any] | None = None,
    eval_result: dict[str, Any] | None = None,
    step: int = 0,
    best_valid: float | None = None,
    **meta: Any,
) -> Path:
    """Write a bundle into a temporary sibling folder, then swap it into ``out_dir``.
    ``proposer_meta``: the proposer's ``step`` and ``best_valid``, kept in its checkpoint.
    ``sensitive_max_len``: the longest hashed word's length (the filter checks no longer
    substrings). ``train_pairs``, when given, stands for ``train_uppers`` and also writes the
    known lower lines and, unless ``pairing`` is given (counted from them already), the
    pairing table. ``banners``: a 横批 table (banners.npz) to carry. ``reverse``: the
    lower_to_upper model (``reverse_meta`` its step and best_valid), trained with ``model``'s
    character embeddings frozen: it stores only its own tensors (``shared_weights``), and a
    reverse model whose embeddings differ from ``model``'s is refused."""
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
    try:
        if sensitive_max_len is not None:
            meta["sensitive_max_len"] = sensitive_max_len
        (tmp / VOCAB_FILE).write_bytes(vocab.to_bytes())
        training = {"step": step, "best_valid": best_valid, **meta}
        save_model_files(model, vocab, tmp / WEIGHTS_FILE, tmp / CONFIG_FILE, VOCAB_FILE, training)
        if proposer is not None:
            pm = proposer_meta or {}
            trained = {"step": pm.get("step", 0), "best_valid": pm.get("best_valid")}
            files = (tmp / PROPOSER_WEIGHTS, tmp / PROPOSER_CONFIG)
            save_model_files(proposer, vocab, *files, VOCAB_FILE, trained)
        if reverse is not None:
            check_reverse(model, reverse)
            rm = reverse_meta or {}
            trained = {"step": rm.get("step", 0), "best_valid": rm.get("best_valid")}
            files = (tmp / REVERSE_WEIGHTS, tmp / REVERSE_CONFIG)
            shared = dict.fromkeys(SHARED_WITH_MAIN, WEIGHTS_FILE)
            save_model_files(reverse, vocab, *files, VOCAB_FILE, trained, shared)
        pairs = list(train_pairs) if train_pairs is not None else None
        index = FingerprintIndex.from_lines(train_uppers if pairs is None else (u for u, _ in pairs))
        index.save(tmp / FINGERPRINTS_FILE)
        if pairs is not None:
            (tmp / KNOWN_FILE).write_bytes(KnownLowers.encode(index, pairs))
            pairing = pairing if pairing is not None else PairingTable.count(pairs)
        if pairing is not None:
            pairing.save(tmp / PAIRING_FILE)
        if banners is not None:
            shutil.copyfile(banners, tmp / BANNERS_FILE)
        hashes = np.zeros(0, np.uint64) if sensitive_hashes is None else np.asarray(sensitive_hashes)
        _save_npy(tmp / SENSITIVE_FILE, hashes)
        if blocked is not None:
            blocked.save(tmp / BLOCKED_FILE)
        (tmp / MODEL_CARD).write_text(model_card, encoding="utf-8")
        (tmp / DATA_CARD).write_text(data_card, encoding="utf-8")
        if data_report:
            counts = json.dumps(data_counts(data_report), ensure_ascii=False, indent=1)
            (tmp / DATA_REPORT).write_text(counts, encoding="utf-8")
        (tmp / EVAL_FILE).write_text(json.dumps(eval_result or {}, ensure_ascii=False, indent=1), "utf-8")
        write_manifest(tmp)  # last: the sums of everything above
        _swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def check_reverse(model: CoupletModel, reverse: CoupletModel) -> None:
    """ValueError unless ``reverse`` is a lower_to_upper encoder-decoder that can share
    ``model``'s character embeddings (the same shape, bit for bit in fp16)."""
    import torch

    from model.net.transformer import CoupletTransformer

    if not isinstance(reverse, CoupletTransformer) or not reverse.cfg.reverse:
        raise ValueError("the reverse model must be a lower_to_upper encoder-decoder (ModelConfig.direction)")
    if model.cfg.reverse:
        raise ValueError("the bundle's main model must be an upper_to_lower one")
    mine, theirs = model.state_dict(), reverse.state_dict()
    for key in SHARED_WITH_MAIN:
        a, b = mine.get(key), theirs.get(key)
        if a is None or b is None or a.shape != b.shape or not torch.equal(a.half(), b.half()):
            raise ValueError(
                f"the reverse model's {key} differs from the model's: train it with --init-from the "
                "model and freeze_embeddings (it shares the model's embeddings in a bundle)"
            )


def _swap(new: Path, out: Path) -> None:
    """Replace ``out`` by ``new`` with renames only (the old folder is removed afterwards)."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old.{os.getpid()}")
        os.replace(out, old)
    os.replace(new, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def install_bundle(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """Copy the bundle folder ``src`` over ``dst`` (e.g. ``models/default``), swapping atomically."""
    out = Path(dst)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    shutil.rmtree(tmp)
    shutil.copytree(src, tmp)
    try:
        verify_bundle(tmp)  # never install a copy that differs from its sums
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _swap(tmp, out)
    return out


def known_file(root: str | os.PathLike[str]) -> Path | None:
    """The bundle's known lower lines: ``known_lowers.blocks``, else (a bundle made before
    blocks) ``known_lowers.txt.xz``, else None."""
    root = Path(root)
    return next((root / name for name in (KNOWN_FILE, OLD_KNOWN_FILE) if (root / name).is_file()), None)


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def has_model(root: str | os.PathLike[str]) -> bool:
    """Whether ``root`` holds a bundle's model: ``model.safetensors``, or an old ``model.pt``."""
    root = Path(root)
    return (root / WEIGHTS_FILE).is_file() or (root / MODEL_FILE).is_file()


def is_legacy(root: str | os.PathLike[str]) -> bool:
    """Whether the bundle ``root`` is one made before safetensors (``model.pt``, no
    ``model.safetensors``)."""
    root = Path(root)
    return not (root / WEIGHTS_FILE).is_file() and (root / MODEL_FILE).is_file()


def model_file(root: str | os.PathLike[str]) -> Path:
    """The file holding the bundle's model weights: ``model.safetensors``, else ``model.pt``."""
    root = Path(root)
    return root / (MODEL_FILE if is_legacy(root) else WEIGHTS_FILE)


def missing_model(root: Path) -> str:
    return f"no model bundle at {root} (missing {WEIGHTS_FILE}, or {MODEL_FILE} in an old bundle)"


def bundle_vocab(root: Path) -> Vocab:
    """The bundle's vocabulary: ``spm.model`` (in an old bundle, the one inside ``model.pt``)."""
    if is_legacy(root):
        from model.net.checkpoint import load_checkpoint

        return Vocab(load_checkpoint(root / MODEL_FILE)["vocab"])
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
    safetensors files, else (an old bundle) from its ``.pt`` checkpoint; no manifest check."""
    import torch

    from model.net.checkpoint import load_model, load_proposer

    dtype = torch.float32 if dtype is None else dtype
    root = Path(root)
    if is_legacy(root):
        model, vocab, meta = load_model(root / MODEL_FILE, dtype)
    else:
        vocab = bundle_vocab(root)
        model, meta = load_model_files(root / WEIGHTS_FILE, root / CONFIG_FILE, vocab, dtype)
    proposer: CoupletTagger | None = None
    if (root / PROPOSER_WEIGHTS).is_file():
        _proposer_kind(read_config(root / PROPOSER_CONFIG)["kind"], root / PROPOSER_CONFIG)
        loaded, _ = load_model_files(root / PROPOSER_WEIGHTS, root / PROPOSER_CONFIG, vocab, dtype)
        proposer = cast("CoupletTagger", loaded)
    elif (root / PROPOSER_FILE).is_file():
        proposer = load_proposer(root / PROPOSER_FILE, vocab, dtype)
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


_ROLE_FILES = {
    "model": (WEIGHTS_FILE, CONFIG_FILE),
    "proposer": (PROPOSER_WEIGHTS, PROPOSER_CONFIG),
    "reverse": (REVERSE_WEIGHTS, REVERSE_CONFIG),
}


def graph_key(bundle: Bundle, role: str) -> str | None:
    """The key under which the ONNX graphs of the bundle's model ``role`` (``model``,
    ``proposer``, ``reverse``) are cached (``onnx_engine.files_key``): a digest of its files
    (and of those it shares tensors with), the traced code and the versions, with no PyTorch;
    None for an old bundle (its models are keyed by their weights in memory). A file's digest
    is its sum in the manifest, checked when the bundle loaded, so no file is read twice."""
    if is_legacy(bundle.path):
        return None
    weights, config = _ROLE_FILES[role]
    paths = [bundle.path / weights, bundle.path / config]
    shared = sorted(shared_files(read_config(paths[1]), paths[1]))
    paths += [bundle.path / name for name in shared]
    return files_key(f"{role}:{bundle.dtype or 'float32'}", paths, bundle.sums)


def model_config(root: Path, role: str) -> ModelConfig:
    """The configuration of the bundle's model ``role``, from its config file alone."""
    return ModelConfig.from_dict(read_config(root / _ROLE_FILES[role][1]))


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
    from model.net.checkpoint import check_proposer, load_checkpoint

    root = Path(root)
    if is_legacy(root):
        model = load_checkpoint(root / MODEL_FILE)
        vocab_bytes = model["vocab"]
    else:
        vocab = bundle_vocab(root)
        vocab_bytes = vocab.to_bytes()
        check_vocab(read_config(root / CONFIG_FILE), vocab, root / CONFIG_FILE)
        read_weights(root / WEIGHTS_FILE)
    if (root / PROPOSER_WEIGHTS).is_file():
        config = read_config(root / PROPOSER_CONFIG)
        _proposer_kind(config["kind"], root / PROPOSER_CONFIG)
        check_vocab(config, Vocab(vocab_bytes), root / PROPOSER_CONFIG)
        read_weights(root / PROPOSER_WEIGHTS)
    elif (root / PROPOSER_FILE).is_file():
        check_proposer(load_checkpoint(root / PROPOSER_FILE), vocab_bytes, root / PROPOSER_FILE)
    if (root / REVERSE_WEIGHTS).is_file():
        config = read_config(root / REVERSE_CONFIG)
        _reverse_kind(config, root / REVERSE_CONFIG)
        check_vocab(config, Vocab(vocab_bytes), root / REVERSE_CONFIG)
        read_weights(root / REVERSE_WEIGHTS)


ROLES = ("model", "proposer", "reverse")


def export_checkpoint(root: str | os.PathLike[str], role: str, out: str | os.PathLike[str]) -> Path:
    """The bundle's model ``role`` (``model``, ``proposer`` or ``reverse``) as a training
    checkpoint at ``out``: its weights in fp32 (the bundle's fp16 values), its vocabulary, and
    the step and best validation loss the bundle records. A run starts from it with
    ``--init-from`` (training the shipped model further), learns from it with ``--teacher``,
    or bundles it with ``--proposer``. The bundle is checked against its manifest first;
    ``BundleError`` when it has no model in that role."""
    import torch

    from model.net.checkpoint import save

    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (choose from {', '.join(ROLES)})")
    root = Path(root)
    verify_bundle(root)
    model, vocab, _, proposer = load_models(root, torch.float32)
    chosen = {"model": model, "proposer": proposer}.get(role)
    if role == "reverse" and not is_legacy(root):
        chosen = load_reverse(root, vocab, torch.float32, model)
    if chosen is None:
        raise BundleError(f"{root} has no {role} model")
    meta = model_meta(root, proposer=role == "proposer", reverse=role == "reverse")
    return save(out, chosen, vocab, step=int(meta.get("step") or 0), best_valid=meta.get("best_valid"))


def model_meta(root: str | os.PathLike[str], proposer: bool = False, reverse: bool = False) -> dict[str, Any]:
    """The meta of the bundle's model (or its proposer, or its reverse model) without its
    weights: ``model_config``, the training record (``step``, ``best_valid``, ``preset`` ...)
    and ``n_params`` (tied weights counted once, shared ones too); {} when there is no such model."""
    root = Path(root)
    names = (PROPOSER_WEIGHTS, PROPOSER_CONFIG, PROPOSER_FILE), (WEIGHTS_FILE, CONFIG_FILE, MODEL_FILE)
    if reverse:
        names = (REVERSE_WEIGHTS, REVERSE_CONFIG, ""), names[1]
    weights, config, legacy = names[0] if proposer or reverse else names[1]
    if (root / weights).is_file():
        cfg = read_config(root / config)
        return {**config_meta(cfg), "n_params": count_parameters(cfg)}
    if legacy and (root / legacy).is_file():
        from model.net.checkpoint import load_checkpoint, model_from_checkpoint

        ckpt = load_checkpoint(root / legacy)
        meta = {k: v for k, v in ckpt.items() if k not in ("state_dict", "vocab", "optimizer")}
        meta["n_params"] = model_from_checkpoint(ckpt).num_parameters()
        return meta
    return {}


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
    sums = verified_sums(root) or {}
    legacy = is_legacy(root)
    read: list[Any] = []
    if legacy or models:  # (an old bundle's meta and vocabulary are inside its model.pt)
        model, vocab, meta, proposer = load_models(root, dtype)
        read = [model, proposer, None if legacy else load_reverse(root, vocab, dtype, model)]
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
        has_proposer=(root / PROPOSER_WEIGHTS).is_file() or (root / PROPOSER_FILE).is_file(),
        has_reverse=not legacy and (root / REVERSE_WEIGHTS).is_file(),
        dtype=dtype,
        sums=sums,
        _models=read,
    )


def convert_bundle(root: str | os.PathLike[str]) -> list[str]:
    """Turn an old bundle (``model.pt``, ``proposer.pt``) into the safetensors layout in place:
    its files checked against its manifest first, the new files written beside a copy of the
    others, each model read back and compared with the old one bit for bit (fp16 both), the
    ``.pt`` files left out, the manifest written again, and the folder swapped in with renames.
    The names of the files written; ``BundleError`` when the bundle is already converted."""
    root = Path(root)
    if not is_legacy(root):
        raise BundleError(f"{root}: already in the safetensors layout ({WEIGHTS_FILE})")
    import torch

    from model.net.checkpoint import load_checkpoint

    verify_bundle(root)
    old_model, vocab, meta, old_proposer = load_models(root, torch.float16)
    written = [VOCAB_FILE, WEIGHTS_FILE, CONFIG_FILE]
    with _changed_copy(root, leave_out=(*LEGACY_FILES, MANIFEST_FILE)) as tmp:
        (tmp / VOCAB_FILE).write_bytes(vocab.to_bytes())
        training = {k: v for k, v in meta.items() if k not in ("format_version", "model_config", "trainer")}
        save_model_files(old_model, vocab, tmp / WEIGHTS_FILE, tmp / CONFIG_FILE, VOCAB_FILE, training)
        if old_proposer is not None:
            ckpt = load_checkpoint(root / PROPOSER_FILE)
            trained = {"step": ckpt.get("step", 0), "best_valid": ckpt.get("best_valid")}
            save_model_files(
                old_proposer, vocab, tmp / PROPOSER_WEIGHTS, tmp / PROPOSER_CONFIG, VOCAB_FILE, trained
            )
            written += [PROPOSER_WEIGHTS, PROPOSER_CONFIG]
        model, vocab2, meta2, proposer = load_models(tmp, torch.float16)
        if vocab2.to_bytes() != vocab.to_bytes() or not same_weights(old_model, model):
            raise BundleError(f"{root}: the converted model differs from {MODEL_FILE}; nothing changed")
        if old_proposer is not None and (proposer is None or not same_weights(old_proposer, proposer)):
            raise BundleError(f"{root}: the converted proposer differs from {PROPOSER_FILE}; nothing changed")
        if {k: meta2.get(k) for k in training} != training:
            raise BundleError(f"{root}: the converted training record differs; nothing changed")
    return written


@contextmanager
def _changed_copy(root: Path, leave_out: Iterable[str] = ()) -> Iterator[Path]:
    """A copy of the bundle ``root`` beside it (less the files ``leave_out`` names), to change
    in the block; then its manifest written again, the copy checked and swapped in for ``root``
    with renames. Removed, ``root`` left as it was, when the block or the check fails."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    try:
        shutil.copystat(root, tmp)  # its permissions, not mkdtemp's owner-only ones
        skipped = set(leave_out)
        for p in root.iterdir():
            if p.name in skipped:
                continue
            if p.is_dir():
                shutil.copytree(p, tmp / p.name)
            else:
                shutil.copy2(p, tmp / p.name)
        yield tmp
        write_manifest(tmp)
        verify_bundle(tmp)
        _swap(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def add_reverse(root: str | os.PathLike[str], checkpoint: str | os.PathLike[str]) -> Path:
    """Put the lower_to_upper model of ``checkpoint`` (a training checkpoint, e.g. a reverse run's
    ``best.pt``) into the bundle ``root``, replacing its reverse model if it has one: the bundle's
    files checked first, the reverse model checked against the bundle's model (the same
    vocabulary, its embeddings the model's, ``check_reverse``), ``SHA256SUMS`` rewritten, the
    folder swapped in with renames. Returns the reverse weights file."""
    root = Path(root)
    verify_bundle(root)
    if is_legacy(root):
        raise BundleError(f"{root}: an old bundle; convert it first (--convert)")
    import torch

    from model.net.checkpoint import load_model

    model, vocab, _, _ = load_models(root)
    reverse, its_vocab, meta = load_model(Path(checkpoint))
    if its_vocab.to_bytes() != vocab.to_bytes():
        raise BundleError(f"{checkpoint}: its vocabulary differs from {root / VOCAB_FILE}")
    check_reverse(model, reverse)
    with _changed_copy(root) as tmp:
        trained = {"step": meta.get("step", 0), "best_valid": meta.get("best_valid")}
        shared = dict.fromkeys(SHARED_WITH_MAIN, WEIGHTS_FILE)
        save_model_files(
            reverse, vocab, tmp / REVERSE_WEIGHTS, tmp / REVERSE_CONFIG, VOCAB_FILE, trained, shared
        )
        write_manifest(tmp)
        loaded = load_reverse(tmp, vocab)
        if loaded is None or not torch.equal(loaded.embed.weight, model.embed.weight):
            raise BundleError(f"{root}: the reverse model did not load back with the model's embeddings")
    return root / REVERSE_WEIGHTS


def convert_known(root: str | os.PathLike[str]) -> Path:
    """Rewrite the known lower lines of a bundle made before blocks (``known_lowers.txt.xz``) as
    ``known_lowers.blocks``, in place: the bundle's files checked first, every fingerprint's
    lower lines read back from the new file and compared with the old one's, the old file left
    out, ``SHA256SUMS`` rewritten, the folder swapped in with renames. Returns the new file;
    ``BundleError`` when there is nothing to convert. The model card, a document, still names
    the old file until ``python -m model.card`` writes it again."""
    root = Path(root)
    verify_bundle(root)
    if (root / KNOWN_FILE).is_file() or not (root / OLD_KNOWN_FILE).is_file():
        raise BundleError(f"{root}: no {OLD_KNOWN_FILE} to convert (or {KNOWN_FILE} already)")
    index = FingerprintIndex.load(root / FINGERPRINTS_FILE)
    old = KnownLowers.load(index, root / OLD_KNOWN_FILE)
    records = [old.record(i) for i in range(len(index))]
    with _changed_copy(root) as tmp:
        (tmp / OLD_KNOWN_FILE).unlink()
        (tmp / KNOWN_FILE).write_bytes(KnownLowers.pack(records))
        new = KnownLowers.load(index, tmp / KNOWN_FILE)
        differ = next((i for i, lowers in enumerate(records) if new.record(i) != lowers), None)
        if differ is not None:
            raise BundleError(f"{root}: record {differ} differs once converted; nothing changed")
    return root / KNOWN_FILE


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m model.release.bundle",
        description="write or check a bundle's SHA256SUMS, or convert an old bundle to safetensors "
        "or its known lower lines to blocks",
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--write-manifest", type=Path, metavar="DIR", help="write DIR/SHA256SUMS")
    action.add_argument("--check", type=Path, metavar="DIR", help="check DIR's files against it")
    action.add_argument(
        "--convert",
        type=Path,
        metavar="DIR",
        help="turn DIR's model.pt/proposer.pt into model.safetensors, config.json, spm.model "
        "(and proposer.safetensors, proposer_config.json), checked bit for bit, and rewrite SHA256SUMS",
    )
    action.add_argument(
        "--add-reverse",
        type=Path,
        metavar="DIR",
        help="put the lower_to_upper model of --checkpoint into DIR (下联求上联; trained with DIR's model's "
        "embeddings frozen) and rewrite SHA256SUMS",
    )
    action.add_argument(
        "--convert-known",
        type=Path,
        metavar="DIR",
        help="rewrite DIR's known_lowers.txt.xz as known_lowers.blocks (a lookup then decompresses one "
        "block, not the whole file), checked record by record, and rewrite SHA256SUMS",
    )
    action.add_argument(
        "--export-checkpoint",
        type=Path,
        metavar="DIR",
        help="write DIR's model of --role as a training checkpoint to --out, to train it further "
        "(python -m model.train --init-from OUT) or learn from it (--teacher OUT)",
    )
    p.add_argument(
        "--checkpoint", type=Path, help="with --add-reverse: the reverse run's checkpoint (best.pt)"
    )
    p.add_argument("--role", choices=ROLES, default="model", help="with --export-checkpoint: which model")
    p.add_argument("--out", type=Path, help="with --export-checkpoint: the checkpoint file to write")
    args = p.parse_args(argv)
    root = (
        args.write_manifest
        or args.check
        or args.convert
        or args.add_reverse
        or args.convert_known
        or args.export_checkpoint
    )
    if not has_model(root):
        print(f"error: {missing_model(root)}", file=sys.stderr)
        return 2
    if args.add_reverse:
        if args.checkpoint is None:
            print("error: --add-reverse needs --checkpoint (the reverse run's best.pt)", file=sys.stderr)
            return 2
        try:
            weights = add_reverse(root, args.checkpoint)
        except (BundleError, OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        size = sum(f.stat().st_size for f in root.iterdir() if f.is_file()) / 1e6
        print(f"wrote {weights} ({weights.stat().st_size / 1e6:.2f} MB); the bundle is {size:.2f} MB")
        return 0
    if args.export_checkpoint:
        if args.out is None:
            print("error: --export-checkpoint needs --out (the checkpoint file to write)", file=sys.stderr)
            return 2
        try:
            written = export_checkpoint(root, args.role, args.out)
        except (BundleError, OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"wrote {written}: the {args.role} of {root} as a training checkpoint")
        return 0
    if args.convert_known:
        old = (root / OLD_KNOWN_FILE).stat().st_size if (root / OLD_KNOWN_FILE).is_file() else 0
        try:
            path = convert_known(root)
        except (BundleError, OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        size = sum(f.stat().st_size for f in root.iterdir() if f.is_file()) / 1e6
        print(
            f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB; {OLD_KNOWN_FILE} was {old / 1e6:.2f} MB); "
            f"the bundle is {size:.2f} MB"
        )
        return 0
    if args.convert:
        try:
            converted = convert_bundle(root)
        except (BundleError, OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        size = sum(f.stat().st_size for f in root.iterdir() if f.is_file()) / 1e6
        print(f"converted {root}: wrote {', '.join(converted)}; removed the .pt files; {size:.1f} MB in all")
        return 0
    if args.write_manifest:
        path = write_manifest(root)
        print(f"wrote {path} ({len(read_manifest(root) or {})} files)")
        return 0
    if not (root / MANIFEST_FILE).is_file():
        print(f"error: {root} has no {MANIFEST_FILE} (write it with --write-manifest)", file=sys.stderr)
        return 1
    try:
        verify_bundle(root)
    except BundleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{root}: every file matches {MANIFEST_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
