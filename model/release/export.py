"""Writing a bundle (model/store/layout.py: its files): from trained models, a reverse model
added to one, its weights rewritten in int8, and a bundle's model back as a training checkpoint."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from data.banners import BANNERS_FILE
from data.pairing import PairingTable
from data.vocab import Vocab
from model.decoding.blocked import BLOCKED_FILE, BlockedWords
from model.export.models import load_models, load_reverse
from model.export.weights import save_model_files
from model.net.checkpoint import CoupletModel, load_model, save
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer
from model.store.bundle import model_meta
from model.store.fingerprint import FingerprintIndex, KnownLowers
from model.store.layout import (
    CONFIG_FILE,
    DATA_CARD,
    DATA_REPORT,
    EVAL_FILE,
    FINGERPRINTS_FILE,
    KNOWN_FILE,
    MODEL_CARD,
    PAIRING_FILE,
    PROPOSER_CONFIG,
    PROPOSER_WEIGHTS,
    REVERSE_CONFIG,
    REVERSE_WEIGHTS,
    ROLES,
    SENSITIVE_FILE,
    SHARED_WITH_MAIN,
    VOCAB_FILE,
    WEIGHTS_FILE,
    BundleError,
    changed_copy,
    new_folder,
    swap_in,
    verify_bundle,
    write_manifest,
)
from model.store.weights import read_config

# report.json's parts that quote corpus lines: a bundle carries counts, never corpus text
REPORT_EXAMPLES = ("sensitive_examples", "sensitive_sample_hits", "dedup_examples")


def data_counts(report: dict[str, Any]) -> dict[str, Any]:
    """The data stage's ``report`` without the parts that quote corpus lines."""
    return {k: v for k, v in report.items() if k not in REPORT_EXAMPLES}


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
    weights_dtype: str = "float16",
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
    reverse model whose embeddings differ from ``model``'s is refused. ``weights_dtype``: the
    models' weights in ``float16`` or ``int8`` (model/store/weights.py)."""
    out = Path(out_dir)
    tmp = new_folder(out)
    try:
        if sensitive_max_len is not None:
            meta["sensitive_max_len"] = sensitive_max_len
        (tmp / VOCAB_FILE).write_bytes(vocab.to_bytes())
        training = {"step": step, "best_valid": best_valid, **meta}
        files = (tmp / WEIGHTS_FILE, tmp / CONFIG_FILE)
        save_model_files(model, vocab, *files, VOCAB_FILE, training, dtype=weights_dtype)
        if proposer is not None:
            pm = proposer_meta or {}
            trained = {"step": pm.get("step", 0), "best_valid": pm.get("best_valid")}
            files = (tmp / PROPOSER_WEIGHTS, tmp / PROPOSER_CONFIG)
            save_model_files(proposer, vocab, *files, VOCAB_FILE, trained, dtype=weights_dtype)
        if reverse is not None:
            check_reverse(model, reverse)
            rm = reverse_meta or {}
            trained = {"step": rm.get("step", 0), "best_valid": rm.get("best_valid")}
            files = (tmp / REVERSE_WEIGHTS, tmp / REVERSE_CONFIG)
            shared = dict.fromkeys(SHARED_WITH_MAIN, WEIGHTS_FILE)
            save_model_files(reverse, vocab, *files, VOCAB_FILE, trained, shared, weights_dtype)
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
        save_npy(tmp / SENSITIVE_FILE, hashes)
        if blocked is not None:
            blocked.save(tmp / BLOCKED_FILE)
        (tmp / MODEL_CARD).write_text(model_card, encoding="utf-8")
        (tmp / DATA_CARD).write_text(data_card, encoding="utf-8")
        if data_report:
            counts = json.dumps(data_counts(data_report), ensure_ascii=False, indent=1)
            (tmp / DATA_REPORT).write_text(counts, encoding="utf-8")
        (tmp / EVAL_FILE).write_text(json.dumps(eval_result or {}, ensure_ascii=False, indent=1), "utf-8")
        write_manifest(tmp)  # last: the sums of everything above
        swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def check_reverse(model: CoupletModel, reverse: CoupletModel) -> None:
    """ValueError unless ``reverse`` is a lower_to_upper encoder-decoder that can share
    ``model``'s character embeddings (the same shape, bit for bit in fp16)."""

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


def add_reverse(root: str | os.PathLike[str], checkpoint: str | os.PathLike[str]) -> Path:
    """Put the lower_to_upper model of ``checkpoint`` (a training checkpoint, e.g. a reverse run's
    ``best.pt``) into the bundle ``root``, replacing its reverse model if it has one: the bundle's
    files checked first, the reverse model checked against the bundle's model (the same
    vocabulary, its embeddings the model's, ``check_reverse``), ``SHA256SUMS`` rewritten, the
    folder swapped in with renames. Returns the reverse weights file."""
    root = Path(root)
    verify_bundle(root)

    model, vocab, _ = load_models(root)
    reverse, its_vocab, meta = load_model(Path(checkpoint))
    if not its_vocab.same_as(vocab):
        raise BundleError(f"{checkpoint}: its vocabulary differs from {root / VOCAB_FILE}")
    check_reverse(model, reverse)
    with changed_copy(root) as tmp:
        trained = {"step": meta.get("step", 0), "best_valid": meta.get("best_valid")}
        shared = dict.fromkeys(SHARED_WITH_MAIN, WEIGHTS_FILE)
        dtype = weights_dtype(root / CONFIG_FILE)
        files = (tmp / REVERSE_WEIGHTS, tmp / REVERSE_CONFIG)
        save_model_files(reverse, vocab, *files, VOCAB_FILE, trained, shared, dtype)
        write_manifest(tmp)
        loaded = load_reverse(tmp, vocab)
        if loaded is None or not torch.equal(loaded.embed.weight, model.embed.weight):
            raise BundleError(f"{root}: the reverse model did not load back with the model's embeddings")
    return root / REVERSE_WEIGHTS


def export_checkpoint(root: str | os.PathLike[str], role: str, out: str | os.PathLike[str]) -> Path:
    """The bundle's model ``role`` (``model``, ``proposer`` or ``reverse``) as a training
    checkpoint at ``out``: its weights in fp32 (the bundle's fp16 or int8 values), its vocabulary, and
    the step and best validation loss the bundle records. A run starts from it with
    ``--init-from`` (training the shipped model further), learns from it with ``--teacher``,
    or bundles it with ``--proposer``. The bundle is checked against its manifest first;
    ``BundleError`` when it has no model in that role."""

    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (choose from {', '.join(ROLES)})")
    root = Path(root)
    verify_bundle(root)
    model, vocab, proposer = load_models(root, torch.float32)
    chosen = {"model": model, "proposer": proposer}.get(role)
    if role == "reverse":
        chosen = load_reverse(root, vocab, torch.float32, model)
    if chosen is None:
        raise BundleError(f"{root} has no {role} model")
    meta = model_meta(root, proposer=role == "proposer", reverse=role == "reverse")
    return save(out, chosen, vocab, step=int(meta.get("step") or 0), best_valid=meta.get("best_valid"))


def weights_dtype(config: Path) -> str:
    """The dtype a bundle's model's weights are stored in (its configuration's ``torch_dtype``)."""
    return str(read_config(config).get("torch_dtype") or "float16")


def quantize_bundle(root: str | os.PathLike[str], dtype: str = "int8") -> list[str]:
    """Rewrite the bundle ``root``'s models' weights in ``dtype`` (model/store/weights.py), in
    place: its files checked first, each model read (the reverse one sharing the new model
    file's embeddings), written again beside a copy of the other files, ``SHA256SUMS`` rewritten,
    the folder swapped in with renames. The weights files written; ``BundleError`` when they are
    in ``dtype`` already."""
    root = Path(root)
    verify_bundle(root)
    if weights_dtype(root / CONFIG_FILE) == dtype:
        raise BundleError(f"{root}: its weights are in {dtype} already")
    model, vocab, proposer = load_models(root, torch.float32)
    reverse = load_reverse(root, vocab, torch.float32, model)
    written = [WEIGHTS_FILE]
    with changed_copy(root) as tmp:
        for stem_files, net, role in (
            ((WEIGHTS_FILE, CONFIG_FILE), model, "model"),
            ((PROPOSER_WEIGHTS, PROPOSER_CONFIG), proposer, "proposer"),
            ((REVERSE_WEIGHTS, REVERSE_CONFIG), reverse, "reverse"),
        ):
            if net is None:
                continue
            config = read_config(root / stem_files[1])
            shared = config.get("shared_weights")
            files = (tmp / stem_files[0], tmp / stem_files[1])
            training = config.get("training") or {}
            save_model_files(net, vocab, *files, VOCAB_FILE, training, shared, dtype)
            if role != "model":
                written.append(stem_files[0])
    return written


def save_npy(path: Path, arr: np.ndarray) -> None:
    with open(path, "wb") as f:
        np.save(f, arr, allow_pickle=False)
