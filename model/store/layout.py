"""A bundle folder's files, its manifest (SHA256SUMS), and changing a folder by renames only.

Layout of a bundle folder (the models as a Hugging Face model folder holds them, model/store/weights.py)::

    model.safetensors the encoder-decoder's weights (fp16, or int8 with a scale per row:
                      weights.py), the tied embedding stored once
    config.json       its configuration (``ModelConfig``), the tied keys, and the training
                      record (step, best_valid, preset, ``sensitive_max_len``)
    spm.model         the sentencepiece vocabulary the models read (pad=0, unk=1, bos=2, eos=3)
    proposer.safetensors, proposer_config.json
                      optional: an encoder-only proposer (model/net/tagger.py), same vocabulary
    reverse.safetensors, reverse_config.json
                      optional: the lower_to_upper model (下联求上联), an encoder-decoder trained on the
                      same pairs with the direction swapped; it shares model.safetensors's character
                      embeddings (``shared_weights``), so it stores only its layers
    scorer.safetensors, scorer_config.json
                      optional: the reranker's scorer (model/net/scorer.py, model/export/scorer.py),
                      which reads model.safetensors's character embeddings too (``shared_weights``)
    fingerprints.npy  the fingerprints of the normalised training upper lines, sorted, 6 bytes each
                      behind a table of buckets (model/store/fingerprint.py)
    banners.npz       optional: the 横批 phrases and character vectors (data/banners.py), copied
                      from the data stage's folder; corpus text, AGPL-3.0 like the model
    pairing.npz       optional: how well characters pair at one position, counted from the
                      training pairs (data/pairing.py); the decoder adds it to its scores
    known_lowers.blocks  optional: the training pairs' lower lines, one record per fingerprint
                      (model.store.fingerprint.KnownLowers), so a fresh clone shows a known couplet's
                      lower lines without the corpus; corpus text, AGPL-3.0 like the model;
                      compressed block by block, so a lookup decompresses one block
    blocked.npz       optional: the sensitive words as the search's table (model/decoding/blocked.py:
                      keys of each word's head, ids of its last character; no text), so
                      that no candidate completes a listed word
    sensitive.npy     hashed sensitive words (``data.sensitive.hash_words``); the longest
                      word's length is ``sensitive_max_len`` in config.json's training record
    MODEL_CARD.md, DATA_CARD.md, eval.json
    data_report.json  the data stage's counts for the data the model was trained on
    SHA256SUMS        the sha256 of each payload file above (``PAYLOAD_FILES``: the weights,
                      configurations, vocabulary and tables the server computes with; the cards,
                      eval.json and data_report.json are documents, rewritten by ``python -m
                      model.card``), ``sha256sum`` format

A bundle is written into a temporary sibling folder and swapped in with renames (``swap_in``);
``load_bundle`` checks every file SHA256SUMS lists first and refuses the bundle (``BundleError``,
one line naming the file) when one differs or is missing, or when a payload file is there but
not listed. After replacing a bundle's files by hand, write the sums again::

    python -m model.bundle --write-manifest models/default
    python -m model.bundle --check models/default  # or: sha256sum -c SHA256SUMS in it

Bundles made before safetensors (``model.pt``) or before blocks (``known_lowers.txt.xz``) are
not read: ``missing_model`` says how to convert one (docs/ARCHITECTURE.md, "Bundle formats").
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from data.banners import BANNERS_FILE
from data.files import atomic_file
from model.decoding.blocked import BLOCKED_FILE
from model.store.weights import file_names

WEIGHTS_FILE, CONFIG_FILE = file_names("model")  # model.safetensors, config.json
PROPOSER_WEIGHTS, PROPOSER_CONFIG = file_names("proposer")  # proposer.safetensors, proposer_config.json
REVERSE_WEIGHTS, REVERSE_CONFIG = file_names("reverse")  # reverse.safetensors, reverse_config.json
SCORER_WEIGHTS, SCORER_CONFIG = file_names("scorer")  # scorer.safetensors, scorer_config.json
ROLE_FILES = {
    "model": (WEIGHTS_FILE, CONFIG_FILE),
    "proposer": (PROPOSER_WEIGHTS, PROPOSER_CONFIG),
    "reverse": (REVERSE_WEIGHTS, REVERSE_CONFIG),
    "scorer": (SCORER_WEIGHTS, SCORER_CONFIG),
}
ROLES = ("model", "proposer", "reverse")  # the couplet models (a checkpoint can be made of each)
SHARED_WITH_MAIN = ("embed.weight",)  # the reverse model's tensors that model.safetensors holds
VOCAB_FILE = "spm.model"
FINGERPRINTS_FILE, SENSITIVE_FILE = "fingerprints.npy", "sensitive.npy"
KNOWN_FILE = "known_lowers.blocks"
PAIRING_FILE = "pairing.npz"
MODEL_CARD, DATA_CARD, EVAL_FILE = "MODEL_CARD.md", "DATA_CARD.md", "eval.json"
DATA_REPORT = "data_report.json"
MANIFEST_FILE = "SHA256SUMS"
# the files whose bytes the server computes with, listed in the manifest (a new one belongs here:
# tests/model/store/test_checkpoint_bundle.py checks that export writes nothing else but DOC_FILES)
PAYLOAD_FILES = (
    WEIGHTS_FILE, CONFIG_FILE, VOCAB_FILE, PROPOSER_WEIGHTS, PROPOSER_CONFIG, REVERSE_WEIGHTS, REVERSE_CONFIG,
    SCORER_WEIGHTS, SCORER_CONFIG,
    FINGERPRINTS_FILE, SENSITIVE_FILE, KNOWN_FILE, PAIRING_FILE, BANNERS_FILE, BLOCKED_FILE,
)  # fmt: skip
DOC_FILES = (MODEL_CARD, DATA_CARD, EVAL_FILE, DATA_REPORT)
# what bundles of earlier formats hold instead, named in the refusal (docs/ARCHITECTURE.md)
OLD_FORMAT_FILES = ("model.pt", "known_lowers.txt.xz")
LAST_READER = "7d8a4da"  # the last commit that reads and converts them (--convert, --convert-known)

log = logging.getLogger(__name__)


class BundleError(ValueError):
    """A bundle whose files do not match its manifest (the message names the file)."""


def has_model(root: str | os.PathLike[str]) -> bool:
    """Whether ``root`` holds a bundle's model (``model.safetensors``)."""
    return (Path(root) / WEIGHTS_FILE).is_file()


def missing_model(root: Path) -> str:
    """Why ``root`` is not a bundle, in one line: no model, or a bundle of an earlier format."""
    old = [name for name in OLD_FORMAT_FILES if (root / name).is_file()]
    if old:
        return (
            f"{root} is a bundle of an earlier format ({', '.join(old)}), no longer read: convert it "
            f"with duilian {LAST_READER} (python -m model.store.bundle --convert/--convert-known DIR)"
        )
    return f"no model bundle at {root} (missing {WEIGHTS_FILE})"


def old_format_files(root: Path) -> list[str]:
    """The files of an earlier bundle format in ``root`` (a bundle that also has them is refused)."""
    return [name for name in OLD_FORMAT_FILES if (root / name).is_file()]


def known_file(root: str | os.PathLike[str]) -> Path | None:
    """The bundle's known lower lines (``known_lowers.blocks``), or None."""
    path = Path(root) / KNOWN_FILE
    return path if path.is_file() else None


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
            "%s has no %s: its files are not verified (python -m model.bundle --write-manifest %s)",
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


def swap_in(new: Path, out: Path) -> None:
    """Replace ``out`` by ``new`` with renames only (the old folder is removed afterwards)."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old.{os.getpid()}")
        os.replace(out, old)
    os.replace(new, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def new_folder(out: Path) -> Path:
    """An empty temporary folder beside ``out`` (readable by other users, as a bundle must be)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
    return tmp


def install_bundle(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """Copy the bundle folder ``src`` over ``dst`` (e.g. ``models/default``), swapping atomically."""
    out = Path(dst)
    tmp = new_folder(out)
    shutil.rmtree(tmp)
    shutil.copytree(src, tmp)
    try:
        verify_bundle(tmp)  # never install a copy that differs from its sums
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    swap_in(tmp, out)
    return out


@contextmanager
def changed_copy(root: Path, leave_out: Iterable[str] = ()) -> Iterator[Path]:
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
        swap_in(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
