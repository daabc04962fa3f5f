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
    SHA256SUMS        the sha256 of each payload file above (``PAYLOAD_FILES``: the weights and
                      tables the server computes with; the cards, eval.json and data_report.json
                      are documents, rewritten by ``python -m model.card``), ``sha256sum`` format

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
    load_model,
    load_proposer,
    make_checkpoint,
    save_checkpoint,
)
from model.net.tagger import CoupletTagger
from model.release.fingerprint import FingerprintIndex, KnownLowers

MODEL_FILE, FINGERPRINTS_FILE, SENSITIVE_FILE = "model.pt", "fingerprints.npy", "sensitive.npy"
PROPOSER_FILE = "proposer.pt"
KNOWN_FILE = "known_lowers.txt.xz"
PAIRING_FILE = "pairing.npz"
MODEL_CARD, DATA_CARD, EVAL_FILE = "MODEL_CARD.md", "DATA_CARD.md", "eval.json"
DATA_REPORT = "data_report.json"
MANIFEST_FILE = "SHA256SUMS"
# the files whose bytes the server computes with, listed in the manifest (a new one belongs here:
# tests/model/release/test_checkpoint_bundle.py checks that export writes nothing else but DOC_FILES)
PAYLOAD_FILES = (
    MODEL_FILE, PROPOSER_FILE, FINGERPRINTS_FILE, SENSITIVE_FILE, KNOWN_FILE, PAIRING_FILE, BANNERS_FILE,
    BLOCKED_FILE,
)  # fmt: skip
DOC_FILES = (MODEL_CARD, DATA_CARD, EVAL_FILE, DATA_REPORT)
log = logging.getLogger(__name__)
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
    fd, tmp = tempfile.mkstemp(prefix=f".{MANIFEST_FILE}.", suffix=".tmp", dir=root)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, root / MANIFEST_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
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
    root = Path(root)
    sums = read_manifest(root)
    if sums is None:
        log.warning(
            "%s has no %s: its files are not verified (python -m model.release.bundle --write-manifest %s)",
            root, MANIFEST_FILE, root,
        )  # fmt: skip
        return False
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
    return True


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
        save_checkpoint(ckpt, tmp / MODEL_FILE)
        if proposer is not None:
            pm = proposer_meta or {}
            ckpt = make_checkpoint(proposer, vocab, pm.get("step", 0), pm.get("best_valid"), half=True)
            save_checkpoint(ckpt, tmp / PROPOSER_FILE)
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


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def load_bundle(
    path: str | os.PathLike[str], dtype: torch.dtype = torch.float32, lazy: bool = False
) -> Bundle:
    """Load a bundle folder, its files checked against its manifest first; raises
    ``FileNotFoundError`` naming what is missing, ``BundleError`` naming a damaged file.
    ``lazy``: the known lower lines are decompressed on the first lookup of a training line,
    not now (the command line's start; a server reads them at start, not in a request)."""
    root = Path(path)
    if not (root / MODEL_FILE).is_file():
        raise FileNotFoundError(f"no model bundle at {root} (missing {MODEL_FILE}); run `make train`")
    verify_bundle(root)
    model, vocab, meta = load_model(root / MODEL_FILE, dtype)
    fp_path, sens_path = root / FINGERPRINTS_FILE, root / SENSITIVE_FILE
    fps = FingerprintIndex.load(fp_path) if fp_path.exists() else FingerprintIndex(np.zeros(0, np.uint64))
    sens = np.load(sens_path, allow_pickle=False) if sens_path.exists() else np.zeros(0, np.uint64)
    ev = json.loads(_read_text(root / EVAL_FILE) or "{}")
    known = KnownLowers.load(fps, root / KNOWN_FILE, lazy) if (root / KNOWN_FILE).is_file() else None
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m model.release.bundle", description="write or check a bundle's SHA256SUMS"
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--write-manifest", type=Path, metavar="DIR", help="write DIR/SHA256SUMS")
    action.add_argument("--check", type=Path, metavar="DIR", help="check DIR's files against it")
    args = p.parse_args(argv)
    root = args.write_manifest or args.check
    if not (root / MODEL_FILE).is_file():
        print(f"error: no model bundle at {root} (missing {MODEL_FILE})", file=sys.stderr)
        return 2
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
