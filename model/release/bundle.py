"""The model bundle that `make serve` loads: model, vocabulary, fingerprints, cards, figures.

Layout of a bundle folder::

    model.pt          checkpoint with fp16 weights, no optimizer state
    proposer.pt       optional: an encoder-only proposer (model/net/tagger.py), fp16, same vocabulary
    fingerprints.npy  sorted uint64 fingerprints of the normalised training upper lines
    banners.npz       optional: the 横批 phrases and character vectors (data/banners.py), copied
                      from the data stage's folder; corpus text, AGPL-3.0 like the model
    pairing.npz       optional: how well characters pair at one position, counted from the
                      training pairs (data/pairing.py); the decoder adds it to its scores
    known_lowers.txt.xz  optional: the training pairs' lower lines, one record per fingerprint
                      (model.release.fingerprint.KnownLowers), so a fresh clone shows a known couplet's
                      lower lines without the corpus; corpus text, AGPL-3.0 like the model
    blocked.npz       optional: the sensitive words as the search's table (model/decoding/blocked.py:
                      keys of each word's head, ids of its last character; no text), so
                      that no candidate completes a listed word
    sensitive.npy     hashed sensitive words (``data.sensitive.hash_words``); the longest
                      word's length is ``sensitive_max_len`` in model.pt's meta
    MODEL_CARD.md, DATA_CARD.md, eval.json
    data_report.json  the data stage's counts for the data the model was trained on (its
                      report.json without the example pairs), so a card written later, after
                      `make data` has moved on, still describes this model's data
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from data.banners import BANNERS_FILE
from data.pairing import PairingTable
from data.sensitive import SensitiveFilter
from data.vocab import Vocab
from model.decoding.blocked import BLOCKED_FILE, BlockedWords
from model.net.checkpoint import (
    CoupletModel,
    atomic_save,
    load_model,
    load_proposer,
    make_checkpoint,
)
from model.net.tagger import CoupletTagger
from model.release.fingerprint import FingerprintIndex, KnownLowers

MODEL_FILE, FINGERPRINTS_FILE, SENSITIVE_FILE = "model.pt", "fingerprints.npy", "sensitive.npy"
PROPOSER_FILE = "proposer.pt"
KNOWN_FILE = "known_lowers.txt.xz"
PAIRING_FILE = "pairing.npz"
MODEL_CARD, DATA_CARD, EVAL_FILE = "MODEL_CARD.md", "DATA_CARD.md", "eval.json"
DATA_REPORT = "data_report.json"
# report.json's parts that quote corpus lines: a bundle carries counts, never corpus text
REPORT_EXAMPLES = ("sensitive_examples", "sensitive_sample_hits", "dedup_examples")


def data_counts(report: dict[str, Any]) -> dict[str, Any]:
    """The data stage's ``report`` without the parts that quote corpus lines."""
    return {k: v for k, v in report.items() if k not in REPORT_EXAMPLES}


@dataclass
class Bundle:
    path: Path
    model: CoupletModel
    vocab: Vocab
    meta: dict[str, Any]
    fingerprints: FingerprintIndex
    sensitive_hashes: np.ndarray
    model_card: str = ""
    data_card: str = ""
    eval: dict[str, Any] = field(default_factory=dict)
    proposer: CoupletTagger | None = None
    known: KnownLowers | None = None
    pairing: PairingTable | None = None
    blocked: BlockedWords | None = None

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
    pairing table. ``banners``: a 横批 table (banners.npz) to carry."""
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
    try:
        if sensitive_max_len is not None:
            meta["sensitive_max_len"] = sensitive_max_len
        ckpt = make_checkpoint(model, vocab, step=step, best_valid=best_valid, half=True, **meta)
        atomic_save(ckpt, tmp / MODEL_FILE)
        if proposer is not None:
            pm = proposer_meta or {}
            ckpt = make_checkpoint(proposer, vocab, pm.get("step", 0), pm.get("best_valid"), half=True)
            atomic_save(ckpt, tmp / PROPOSER_FILE)
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
        _swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


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
    _swap(tmp, out)
    return out


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def load_bundle(path: str | os.PathLike[str], dtype: torch.dtype = torch.float32) -> Bundle:
    """Load a bundle folder; raises ``FileNotFoundError`` naming what is missing."""
    root = Path(path)
    if not (root / MODEL_FILE).is_file():
        raise FileNotFoundError(f"no model bundle at {root} (missing {MODEL_FILE}); run `make train`")
    model, vocab, meta = load_model(root / MODEL_FILE, dtype)
    fp_path, sens_path = root / FINGERPRINTS_FILE, root / SENSITIVE_FILE
    fps = FingerprintIndex.load(fp_path) if fp_path.exists() else FingerprintIndex(np.zeros(0, np.uint64))
    sens = np.load(sens_path, allow_pickle=False) if sens_path.exists() else np.zeros(0, np.uint64)
    ev = json.loads(_read_text(root / EVAL_FILE) or "{}")
    known = KnownLowers.load(fps, root / KNOWN_FILE) if (root / KNOWN_FILE).is_file() else None
    pairing = PairingTable.load(root / PAIRING_FILE) if (root / PAIRING_FILE).is_file() else None
    blocked = BlockedWords.load(root / BLOCKED_FILE) if (root / BLOCKED_FILE).is_file() else None
    if blocked is not None and blocked.vocab_size != len(vocab):
        raise ValueError(
            f"{root / BLOCKED_FILE} is for a vocabulary of {blocked.vocab_size}, not {len(vocab)}"
        )
    return Bundle(
        root,
        model,
        vocab,
        meta,
        fps,
        sens,
        _read_text(root / MODEL_CARD),
        _read_text(root / DATA_CARD),
        ev,
        load_proposer(root / PROPOSER_FILE, vocab, dtype) if (root / PROPOSER_FILE).is_file() else None,
        known,
        pairing,
        blocked,
    )
